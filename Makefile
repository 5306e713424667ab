# agentwatch: `make demo` runs the main job, `make test` runs the tests. Both set up first.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: setup browser demo test lint bench clean

$(STAMP): pyproject.toml sdk/pyproject.toml collector/otlp/_native.c collector/otlp/_json_wire.c collector/otlp/_native.h
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e ./sdk -e '.[dev]'
	touch $(STAMP)

setup: $(STAMP)

# Debian's Chromium and ChromeDriver for the dashboard's browser tests.
browser:
	@if ! command -v chromium >/dev/null || ! command -v chromedriver >/dev/null; then \
		echo "installing Debian chromium and chromium-driver"; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null; \
	fi

demo: setup
	$(BIN)/agentwatch demo

test: setup browser
	$(BIN)/python -m pytest -q tests

lint: setup
	$(BIN)/ruff check sdk collector dashboard alerts reference_agent tests bench

bench: setup
	$(BIN)/python bench/sdk_overhead.py
	$(BIN)/python bench/batching.py

clean:
	rm -rf $(VENV) .agentwatch .pytest_cache
