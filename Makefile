# agentwatch: `make demo` runs the main job, `make test` runs the tests. Both set up first.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
LOCK := .ci/requirements-dev.lock

# Bytecode caches are written even where the environment asks Python not to (a container's
# default, this machine's among them): without them each pytest worker compiles and rewrites
# every test module again (~6.5 s of CPU a worker, a quick run's collection halved) and each
# process a test starts compiles the code it imports.
unexport PYTHONDONTWRITEBYTECODE

.PHONY: setup hooks setup-test system-packages clients-venvs demo check sanitize test quick lint typecheck lock bench clean

$(STAMP): pyproject.toml sdk/pyproject.toml $(LOCK) collector/ingest/otlp/_native.c collector/ingest/otlp/_json_wire.c collector/ingest/otlp/_native.h
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install -q -e ./sdk -e '.[dev]' -c $(LOCK)
	touch $(STAMP)

setup: $(STAMP) hooks

# Git runs .githooks/commit-msg (a subject of 72 characters at most; docs/commits.md) in a git
# checkout whose top is this folder; an unpacked tarball has none, and is left alone. Only setup
# (and so demo, quick, test) sets it; lint and typecheck need the environment alone.
hooks:
	@if git rev-parse --is-inside-work-tree >/dev/null 2>&1 && [ -z "$$(git rev-parse --show-prefix)" ]; then \
		git config core.hooksPath .githooks; \
	fi

# .ci/requirements-dev.lock pins the development environment: `make setup` (and so CI) installs within
# it. After changing a dependency in pyproject.toml: `make lock` (the new package is installed at
# its newest version, then every installed version is written down); commit the lock.
lock:
	$(BIN)/python -m pip install -q -e ./sdk -e '.[dev]' -c $(LOCK)
	{ sed -n '1,2p' $(LOCK); $(BIN)/python -m pip freeze --exclude-editable; } > $(LOCK).new
	mv $(LOCK).new $(LOCK)

# tests/clients: traceloop-sdk 0.45 and openlit pin OpenTelemetry (openlit also openai<3) apart from
# the main environment and from each other, so each gets a virtual environment of its own, installed
# from a full lock with --no-deps (nothing to resolve) by the main environment's pip (no pip of its own).
.venv-%/.installed: tests/clients/requirements-%.txt $(STAMP)
	rm -rf .venv-$*
	$(PYTHON) -m venv --without-pip .venv-$*
	$(BIN)/python -m pip --python .venv-$*/bin/python install -q --no-deps -r $<
	touch $@

clients-venvs: .venv-traceloop/.installed .venv-openlit/.installed

# The system packages the tests need, from Debian, installed when one of their commands is missing:
# chromium and chromium-driver (the dashboard's browser tests drive a real browser) and fontconfig
# (fc-list: which fonts Chromium can draw). apt-get needs root: sudo when not run as root.
SYSTEM_PACKAGES := chromium chromium-driver fontconfig
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)
system-packages:
	@if ! command -v chromium >/dev/null || ! command -v chromedriver >/dev/null || ! command -v fc-list >/dev/null; then \
		echo "make system-packages: installing Debian's $(SYSTEM_PACKAGES) for the dashboard's browser tests"; \
		$(SUDO) apt-get update -qq && DEBIAN_FRONTEND=noninteractive $(SUDO) apt-get install -y -qq $(SYSTEM_PACKAGES) >/dev/null; \
	fi

# Everything the tests need beyond `make setup`, installed before any of them runs: the system
# packages and the client environments. `make test` starts with it; `make quick` needs none of it.
setup-test: setup system-packages clients-venvs

demo: setup
	$(BIN)/agentwatch demo

# Two workers, a test file per worker at a time (module fixtures stay whole; a process holds one
# embedded chDB): most tests wait on servers and subprocesses, so this halves the wall time. The
# longest files start first, so that both workers end together, and the dashboard's files, which
# share one seeded stack, run on one worker (tests/support/schedule.py).
# First what the tests need (setup-test), then lint, types, C warnings (check) and the native
# decoder under the sanitizers, then every test.
test: setup-test check sanitize
	$(TEST_TMP) $(BIN)/python -m pytest -q -n 2 --dist loadfile --durations=25 $(TEST_TMP_OPTS) tests

# The everyday loop, a few minutes: lint, then the tests but those marked browser (Chromium),
# clients (the client environments of `make clients-venvs`), slow (the demo's minutes and the
# like) or clickhouse_server (the server back end; chDB runs the same SQL). pyproject.toml lists
# the markers. Property tests draw a fifth of their examples (tests/support/examples.py). `make
# test` runs them all, at full count, and more checks.
QUICK_MARKERS := not browser and not clients and not slow and not clickhouse_server
quick: setup lint
	$(TEST_TMP) AGENTWATCH_TEST_EXAMPLES_SCALE=0.2 $(BIN)/python -m pytest -q -n 2 --dist loadfile --durations=10 \
		$(TEST_TMP_OPTS) -m "$(QUICK_MARKERS)" tests

# Where the tests write: a store per test is ~360 small files, ~140k in a quick run. On an ext4
# without a journal (this machine's) a new file costs more when many were deleted in the last 30 s,
# and removing an old run's folder, written back, took 4-6 minutes under load (pytest removes the
# fourth-newest run's as a session ends). So where /dev/shm is a tmpfs with 4 GiB free, the tests
# run with TMPDIR there and a passed test's folder is removed as it ends (a failed one's stays for
# a look). Measured in docs/development.md ("Where the tests write"). Elsewhere, or with TMPDIR
# set, pytest's defaults stand.
TEST_TMPDIR := $(if $(TMPDIR),,$(shell df -B1M --output=fstype,avail /dev/shm 2>/dev/null | \
	awk 'NR == 2 && $$1 == "tmpfs" && $$2 >= 4096 {print "/dev/shm/agentwatch-tests"}'))
TEST_TMP := $(if $(TEST_TMPDIR),mkdir -p $(TEST_TMPDIR) && TMPDIR=$(TEST_TMPDIR))
TEST_TMP_OPTS := $(if $(TEST_TMPDIR),-o tmp_path_retention_policy=failed)

lint: $(STAMP)
	$(BIN)/ruff check sdk collector dashboard alerts reference_agent tests bench
	$(BIN)/ruff format --check sdk collector dashboard alerts reference_agent tests bench

# mypy --strict where the code is clean: the SDK (with its command line) and the wire contract; plain
# mypy on the other parts: the alerts, the collector, the dashboard and the reference stack (a cache
# of its own: other options would rebuild the first one's).
# The parts install as agentwatch_platform.<part> (pyproject.toml's package-dir), which mypy and a
# copy of the tree cannot see through the editable install: a tree of links gives them that name.
PARTS := alerts collector dashboard reference_agent
NS_TREE := build/typecheck
typecheck: $(STAMP)
	$(BIN)/python -m mypy --strict sdk/agentwatch sdk/agentwatch_api
	mkdir -p $(NS_TREE)/agentwatch_platform && for part in $(PARTS); do \
		ln -sfn ../../../$$part $(NS_TREE)/agentwatch_platform/$$part; done
	MYPYPATH=$(NS_TREE):sdk $(BIN)/python -m mypy --follow-imports=silent --ignore-missing-imports \
		--cache-dir .mypy_cache/rest $(foreach part,$(PARTS),-p agentwatch_platform.$(part))

# What `make test` (and so CI) checks before the tests, in seconds: lint, types, and the native
# decoder compiled with its warnings as errors (the install builds it with -O2 and shows none);
# lint includes `ruff format --check` (line length 120, pyproject.toml).
NATIVE_CFLAGS := -O2 -Wall -Wextra -Werror
NATIVE_DIR := collector/ingest/otlp
NATIVE_SRC := $(NATIVE_DIR)/_native.c $(NATIVE_DIR)/_json_wire.c
check: lint typecheck
	@include="$$($(BIN)/python -c 'import sysconfig; print(sysconfig.get_paths()["include"])')"; \
	for src in $(NATIVE_SRC); do \
		echo "$(CC) $(NATIVE_CFLAGS) $$src"; \
		$(CC) $(NATIVE_CFLAGS) -I"$$include" -c -o /dev/null $$src || exit 1; \
	done

# The native decoder's tests under AddressSanitizer and UBSan, before the tests of `make test`: the
# extension built once (again when its C changes) with the sanitizers, into a copy of the working
# tree (the in-tree module stays as built, for whoever runs tests meanwhile). CPython is not built
# with them: their runtimes are preloaded, leak detection is off (CPython's own allocations), and
# PYTHONMALLOC=malloc gives every bytes object its own heap block, so a read past a small body's
# end is seen (pymalloc's pools hide it). A fifth of the property tests' examples
# (tests/support/examples.py); --capture=sys lets a sanitizer's report reach the terminal.
SANITIZE := build/sanitize
SANITIZED_EXT := build/sanitize-ext/_native.so
SANITIZE_FLAGS := -O1 -g -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=undefined
$(SANITIZED_EXT): $(NATIVE_SRC) $(NATIVE_DIR)/_native.h $(STAMP)
	mkdir -p $(@D)
	$(CC) -shared -fPIC $(SANITIZE_FLAGS) -I"$$($(BIN)/python -c 'import sysconfig; print(sysconfig.get_paths()["include"])')" \
		$(NATIVE_SRC) -o $@

sanitize: $(SANITIZED_EXT)
	rm -rf $(SANITIZE) && mkdir -p $(SANITIZE)
	git ls-files -co --exclude-standard | grep -v '\.so$$' | tar -cf - -T - | tar -xf - -C $(SANITIZE)
	cp $(SANITIZED_EXT) $(SANITIZE)/$(NATIVE_DIR)/_native$$($(BIN)/python -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')
	mkdir -p $(SANITIZE)/build/ns/agentwatch_platform && for part in $(PARTS); do \
		ln -sfn ../../../$$part $(SANITIZE)/build/ns/agentwatch_platform/$$part; done
	cd $(SANITIZE) && PYTHONPATH=build/ns LD_PRELOAD="$$($(CC) -print-file-name=libasan.so) $$($(CC) -print-file-name=libubsan.so)" \
		ASAN_OPTIONS=detect_leaks=0:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
		PYTHONMALLOC=malloc AGENTWATCH_TEST_EXAMPLES_SCALE=0.2 \
		$(CURDIR)/$(BIN)/python -m pytest -q -p no:cacheprovider --capture=sys \
		tests/collector/test_native_decode.py tests/collector/test_ingest_decode.py tests/collector/test_decoder_spec.py

bench: setup
	$(BIN)/python bench/sdk_overhead.py
	$(BIN)/python bench/batching.py

clean:
	rm -rf $(VENV) .venv-traceloop .venv-openlit .agentwatch .pytest_cache
