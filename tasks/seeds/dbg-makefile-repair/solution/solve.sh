#!/bin/bash
set -euo pipefail
cd /app/statlib
printf '%s\n' \
  'CC = gcc' \
  'CFLAGS = -O2 -Wall -Iinclude' \
  'LDLIBS = -lm' \
  '' \
  'OBJS = build/main.o build/stats.o' \
  '' \
  'bin/stats: $(OBJS)' \
  '	mkdir -p bin' \
  '	$(CC) -o $@ $(OBJS) $(LDLIBS)' \
  '' \
  'build/%.o: src/%.c include/stats.h' \
  '	mkdir -p build' \
  '	$(CC) $(CFLAGS) -c $< -o $@' \
  '' \
  'test: bin/stats' \
  '	./tests/run.sh' \
  '' \
  'clean:' \
  '	rm -rf build bin' \
  '' \
  '.PHONY: test clean' > Makefile
make -s clean && make -s && make -s test
