#!/bin/bash
set -euo pipefail
cd /app/libvec
cat > Makefile <<'MK'
CC = gcc
CFLAGS = -O2 -Wall
CPPFLAGS = -Iinclude
PREFIX = /usr/local
DESTDIR =
VERSION := $(shell cat VERSION)
OBJ = $(patsubst src/%.c,build/%.o,$(wildcard src/*.c))

all: libvec.a

libvec.a: $(OBJ)
	rm -f $@
	ar rcs $@ $^

build/%.o: src/%.c include/vec.h
	@mkdir -p build
	$(CC) $(CPPFLAGS) $(CFLAGS) -c $< -o $@

vec.pc: VERSION
	printf '%s\n' 'prefix=$(PREFIX)' 'libdir=$${prefix}/lib' 'includedir=$${prefix}/include' \
	  'Name: vec' 'Description: Small fixed-size vector math library' 'Version: $(VERSION)' \
	  'Libs: -L$${libdir} -lvec -lm' 'Cflags: -I$${includedir}/vec' > $@

install: libvec.a
	rm -f vec.pc && $(MAKE) --no-print-directory vec.pc PREFIX='$(PREFIX)'
	install -d '$(DESTDIR)$(PREFIX)/lib/pkgconfig' '$(DESTDIR)$(PREFIX)/include/vec'
	install -m 0644 libvec.a '$(DESTDIR)$(PREFIX)/lib/libvec.a'
	install -m 0644 include/vec.h '$(DESTDIR)$(PREFIX)/include/vec/vec.h'
	install -m 0644 vec.pc '$(DESTDIR)$(PREFIX)/lib/pkgconfig/vec.pc'
	rm -f vec.pc

uninstall:
	rm -f '$(DESTDIR)$(PREFIX)/lib/libvec.a' '$(DESTDIR)$(PREFIX)/include/vec/vec.h' \
	  '$(DESTDIR)$(PREFIX)/lib/pkgconfig/vec.pc'

clean:
	rm -rf build libvec.a vec.pc

.PHONY: all install uninstall clean
MK
make
