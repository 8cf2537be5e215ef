#!/bin/bash
set -euo pipefail
cd /app/wordstat
cat > Makefile <<'MK'
CC = gcc
CFLAGS = -Wall -O2
CPPFLAGS = -MMD -MP
LDLIBS = -lm
SRC = $(wildcard src/*.c)
OBJ = $(patsubst src/%.c,build/%.o,$(SRC))

build/wordstat: $(OBJ)
	$(CC) $(CFLAGS) -o $@ $(OBJ) $(LDLIBS)

build/%.o: src/%.c | build
	$(CC) $(CPPFLAGS) $(CFLAGS) -c $< -o $@

build:
	mkdir -p build

clean:
	rm -rf build

test: build/wordstat
	./tests/run.sh

.PHONY: clean test

-include $(OBJ:.o=.d)
MK
make clean >/dev/null
make >/dev/null
make test
