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

# The store tests again on the clickhouse-connect back end (ClickHouseStore), over
# clickhouse-connect's embedded chDB client: its code path without a server. Point
# AGENTWATCH_CLICKHOUSE_URL at a ClickHouse server to run the whole suite against one.
CLICKHOUSE_CONNECT_TESTS := tests/collector/test_store.py tests/collector/test_query.py \
	tests/collector/test_rollup.py tests/collector/test_reprice.py tests/alerts

test: setup browser
	$(BIN)/python -m pytest -q tests
	AGENTWATCH_CLICKHOUSE_URL=chdb:// $(BIN)/python -m pytest -q $(CLICKHOUSE_CONNECT_TESTS) -k clickhouse

lint: setup
	$(BIN)/ruff check sdk collector dashboard alerts reference_agent tests bench

bench: setup
	$(BIN)/python bench/sdk_overhead.py
	$(BIN)/python bench/batching.py

clean:
	rm -rf $(VENV) .agentwatch .pytest_cache
