#!/bin/bash
set -euo pipefail
cd /app
cat > Makefile <<'MK'
PYTHON ?= python3
NAME ?= world
VERSION := $(shell cat VERSION)
PKG := greetlib-$(VERSION)

.PHONY: run test dist clean

run:
	PYTHONPATH=src $(PYTHON) -m greetlib $(NAME)

test:
	PYTHONPATH=src $(PYTHON) -m unittest discover -s tests

dist: test
	rm -rf dist/$(PKG)
	mkdir -p dist/$(PKG)/src/greetlib
	cp README.md VERSION dist/$(PKG)/
	cp src/greetlib/*.py dist/$(PKG)/src/greetlib/
	tar -czf dist/$(PKG).tar.gz -C dist $(PKG)
	rm -rf dist/$(PKG)

clean:
	rm -rf dist
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
MK
make dist
tar -tzf dist/greetlib-*.tar.gz
make clean
