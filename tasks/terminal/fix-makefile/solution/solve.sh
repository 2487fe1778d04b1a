#!/bin/bash
# Tabs for recipes, the right object list, -lm when linking, header dependencies, a full clean.
set -euo pipefail
cd /app
printf '%s\n' \
  'CC ?= cc' \
  'CFLAGS ?= -O2 -Wall' \
  'LDLIBS = -lm' \
  '' \
  'SRCS = $(wildcard src/*.c)' \
  'OBJS = $(SRCS:.c=.o)' \
  '' \
  '.PHONY: all clean' \
  '' \
  'all: bin/geom' \
  '' \
  'bin/geom: $(OBJS)' \
  '	mkdir -p bin' \
  '	$(CC) $(CFLAGS) -o $@ $(OBJS) $(LDLIBS)' \
  '' \
  'src/%.o: src/%.c src/vec.h' \
  '	$(CC) $(CFLAGS) -c -o $@ $<' \
  '' \
  'clean:' \
  '	rm -rf bin src/*.o' > Makefile
make clean
make
bin/geom 3 4
