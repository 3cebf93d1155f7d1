# Two commands set everything up on a fresh machine with Python 3.11:
#   make demo   -- the main job on the embedded default (rocksmq)
#   make test   -- lint, type-check and the whole test suite
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: install demo test lint docs bench bench-brokers fuzz chaos clean

# The dev install is a strict editable install: build/__editable__.*/ holds a link per
# module of the installed layout (msgstream, msgstream.backends -> src/backends,
# msgstream.bridge_spark -> src/bridge_spark), a plain path that mypy, mkdocstrings and a
# user's `mypy --strict` can read, where the default editable install's import hook is
# invisible to them. Edits show at once; a module added or removed needs the install
# again, so the stamp also depends on the list of installed files under src/, rewritten
# here only when it changes. Each make writes the list to a file of its own first
# (.new.<pid>): `make test` runs makes side by side, and one comparing a list another
# was still writing would take it for a change and install again under running tests.
EDITABLE := --config-settings editable_mode=strict
EXTRAS   := dev,kafka,pulsar,spark
MODULES  := $(VENV)/.modules
$(shell mkdir -p $(VENV) && new=$(MODULES).new.$$$$ && \
	find src -name '*.py' -o -name py.typed -o -name '*.json' | LC_ALL=C sort > $$new && \
	{ cmp -s $$new $(MODULES) || mv $$new $(MODULES); }; rm -f $$new)

$(STAMP): pyproject.toml $(MODULES)
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet $(EDITABLE) -e '.[$(EXTRAS)]'
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/msgstream demo

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks examples tools
	$(BIN)/ruff format --check src tests benchmarks examples tools
	$(BIN)/mypy --strict
	$(BIN)/mypy --strict examples
	$(BIN)/mypy --strict tools

# The documentation site into build/site: the pages of docs/ and the API reference from the
# docstrings (mkdocs + mkdocstrings; tools/griffe_roles.py turns their Sphinx roles into
# links); --strict turns a broken reference or link into a failure, so `make test` checks
# them.
docs: $(STAMP)
	$(BIN)/mkdocs build --strict --quiet

# Three lanes at once on two cores: the tests that need a broker (Kafka, Pulsar; with
# Spark too where a test needs both: much of their time is spent waiting on brokers and
# Spark jobs) into build/test-brokers.log; lint, the other tests on Python 3.13 and then
# the Spark tests that need no broker into build/test-py313-spark.log, both printed whole
# at the end; in front, docs and the other tests on Python 3.11 (also kept in
# build/test-local.log). Last comes a summary of the three (tools/test_summary.py): each
# lane's outcome and first failures, so a log cut to its last lines still names them. Each
# lane alone leaves a core idle much of the time (waiting on brokers, child processes
# and timers), so the three share the two cores; the broker lane is the longest, so the
# Spark tests that can run apart from it do (their own Spark session, its start a few
# seconds of CPU). `make test` fails if any lane failed. Both virtualenvs are installed
# before any lane starts: an install rewrites the shared build/__editable__ link tree
# that running tests import from. The 3.13 virtualenv's dependencies install beside the
# 3.11 install (-j2), the project into it once that is done (see $(DEPS313)).
JVM_TESTS    := kafka or pulsar or spark
BROKER_TESTS := kafka or pulsar
test:
	@$(MAKE) --no-print-directory -j2 -Otarget $(STAMP) py313-deps
	@$(MAKE) --no-print-directory py313-install
	@mkdir -p build
	@$(MAKE) --no-print-directory test-brokers >build/test-brokers.log 2>&1 & brokers=$$!; \
	$(MAKE) --no-print-directory lint test-py313 test-spark-alone \
		>build/test-py313-spark.log 2>&1 & side=$$!; \
	status=0; \
	{ $(MAKE) --no-print-directory docs test-local BUILT_SITE=build/site; \
	  echo $$? >build/test-local.status; } 2>&1 | tee build/test-local.log; \
	[ "$$(cat build/test-local.status)" = 0 ] || status=1; \
	wait $$side || status=$$?; \
	wait $$brokers || status=$$?; \
	echo "===== lint, the tests on Python 3.13, Spark alone (build/test-py313-spark.log)"; \
	cat build/test-py313-spark.log; \
	echo "===== the tests that need a broker (build/test-brokers.log)"; \
	cat build/test-brokers.log; \
	$(BIN)/python tools/test_summary.py "docs, the tests on Python 3.11=build/test-local.log" \
		"lint, Python 3.13, Spark alone=build/test-py313-spark.log" \
		"the tests that need a broker=build/test-brokers.log"; \
	exit $$status

# Every test that needs a JVM, in one run; `make test` runs them as the two parts below.
.PHONY: test-jvm test-brokers test-spark-alone test-local
test-jvm: $(STAMP)
	$(BIN)/python -m pytest -q -p no:cacheprovider --durations=10 -m "$(JVM_TESTS)"

test-brokers: $(STAMP)
	$(BIN)/python -m pytest -q -p no:cacheprovider --durations=10 -m "$(BROKER_TESTS)"

test-spark-alone: $(STAMP)
	$(BIN)/python -m pytest -q -p no:cacheprovider --durations=10 -m "spark and not ($(BROKER_TESTS))"

# BUILT_SITE: a site `make docs` has just built, which the docs test checks instead of
# building its own (`make test` sets it).
test-local: $(STAMP)
	BUILT_DOCS_SITE=$(BUILT_SITE) $(BIN)/python -m pytest -q -p no:cacheprovider --durations=10 -m "not ($(JVM_TESTS))"

# The tests that need no JVM again under Python 3.13, the newest release the package
# declares, in a second virtualenv: both ends of the supported range run in `make test`.
# Tests marked slow (fuzzing, stress loops, the type checks and the docs build) run once,
# on 3.11.
# Without a Python 3.13 (PYTHON313=/path/to/python3.13 names one) the leg is skipped, but
# under CI=true it fails.
PYTHON313 ?= $(firstword $(wildcard $(HOME)/.pyenv/versions/3.13*/bin/python3.13) $(shell command -v python3.13 2>/dev/null))
VENV313   ?= .venv313
STAMP313  := $(VENV313)/.installed
HAVE313   := $(shell [ -n "$(PYTHON313)" ] && "$(PYTHON313)" --version >/dev/null 2>&1 && echo yes)

# In two steps: the dependencies (tools/requirements.py lists them), which may install
# while the 3.11 virtualenv does, then the project alone, never beside another install
# (the order-only $(STAMP)): both editable installs write the build/__editable__ link tree.
DEPS313   := $(VENV313)/.dependencies
$(DEPS313): pyproject.toml tools/requirements.py
	"$(PYTHON313)" -m venv $(VENV313)
	$(VENV313)/bin/python -m pip install --quiet --upgrade pip
	$(VENV313)/bin/python tools/requirements.py $(EXTRAS) > $(VENV313)/requirements.txt
	$(VENV313)/bin/python -m pip install --quiet -r $(VENV313)/requirements.txt
	touch $(DEPS313)

$(STAMP313): $(DEPS313) $(MODULES) | $(STAMP)
	$(VENV313)/bin/python -m pip install --quiet --no-deps $(EDITABLE) -e '.[$(EXTRAS)]'
	touch $(STAMP313)

.PHONY: py313-deps py313-install test-py313
ifeq ($(HAVE313),yes)
py313-deps: $(DEPS313)
py313-install: $(STAMP313)
test-py313: $(STAMP313)
	$(VENV313)/bin/python -m pytest -q -p no:cacheprovider --durations=10 -m "not ($(JVM_TESTS)) and not slow"
else
py313-deps:
py313-install:
test-py313:
	@echo "test-py313: no Python 3.13 found (set PYTHON313)"
	@[ "$$CI" != "true" ] || exit 1
endif

# Fuzz decode, positions and config longer than CI does (a new seed each run, printed;
# FUZZ_SEED=... repeats one).
FUZZ_ITERATIONS ?= 1000000
fuzz: $(STAMP)
	FUZZ_ITERATIONS=$(FUZZ_ITERATIONS) $(BIN)/python tests/fuzzing.py

# Fault scenarios (process and broker kills, store damage, a full disk) against the real
# parts; prints one table: acknowledged, lost, duplicated, longest time to error.
chaos: $(STAMP)
	$(BIN)/python benchmarks/chaos.py

bench: $(STAMP)
	$(BIN)/python benchmarks/bench_rocksmq.py
	$(BIN)/python benchmarks/bench_shared.py

bench-brokers: $(STAMP)
	$(BIN)/python benchmarks/bench_kafka.py
	$(BIN)/python benchmarks/bench_pulsar.py
	$(BIN)/python benchmarks/bench_spark.py --kafka --pulsar

# A local Kafka or Pulsar broker (the test suite's JVM launcher: Java 17 and Maven, no
# Docker) serving until Ctrl-C; it prints the MSGSTREAM_* variables that point the
# examples at it (examples/README.md).
.PHONY: broker-kafka broker-pulsar
broker-kafka broker-pulsar: $(STAMP)
	$(BIN)/python -m tests.brokers $(@:broker-%=%)

# Peak RSS of a TtMsgStream draining 10^6 4 KB messages, one channel silent for the first
# half (writes ~4 GB to a temporary store, removed afterwards; add --old for the unbounded
# comparison, which holds ~2 GB in memory).
.PHONY: bench-memory
bench-memory: $(STAMP)
	$(BIN)/python benchmarks/bench_memory.py

clean:
	rm -rf $(VENV) $(VENV313) build dist *.egg-info src/*.egg-info .pytest_cache .mypy_cache .ruff_cache .hypothesis
