# tidegate -- every target sets itself up from a fresh clone and is quick when already set up.
#
#   make run        set up, then run the main job (tidegate demo) on embedded defaults
#   make test       set up, then run the whole test suite
#   make test-fast  the tests that start nothing: no Spark, no PostgreSQL, no other process, not
#                   slow (selected by marker; tests/README.md lists the tiers)
#   make lint       ruff check and ruff format --check on everything, mypy --strict on every package
#   make docs       build the documentation site (mkdocs --strict) into site/
#   make bench      set up, then run every benchmark in bench/
#   make proto      regenerate runtime/wire/gen from proto/ (checked in)
#   make soak       the long mutant campaigns, then the crash tests: the shard store, the whole runtime
#   make lock       re-resolve requirements/*.txt after editing pyproject.toml (UPGRADE=1: newest
#                   releases the ranges allow); the only way an installed version changes

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.tidegate-installed
HYPOTHESIS_PROFILE ?= $(if $(CI),ci,dev)

.PHONY: all setup run test test-fast lint docs bench soak clean proto postgres lock

all: test

# Versions come from the lock, never from the day's newest release. pyproject.toml keeps the
# compatible ranges; requirements/lock.txt picks one point in them, for every package make setup
# installs (the project's dependencies with its dev and docs extras), each with its hashes;
# requirements/bench.txt adds the bench extra on the same pins, iceberg-reader.txt is the
# Iceberg sink tests' outside reader. pip installs from them (--require-hashes: a file that does
# not match its hash, or a dependency the lock lacks, stops the install); the project itself goes
# in editable on top, with no dependencies of its own choosing. tests/test_lock.py fails when
# pyproject.toml and the lock disagree.
LOCK := requirements/lock.txt
PIP_LOCKED := $(PY) -m pip install --quiet --require-hashes

$(STAMP): pyproject.toml setup.py $(LOCK)
	@command -v java >/dev/null 2>&1 || { echo "tidegate needs a Java 17 runtime for Spark (apt-get install openjdk-17-jre-headless)"; exit 1; }
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PIP_LOCKED) -r $(LOCK)
	$(PY) -m pip install --quiet --no-deps --no-build-isolation -e .
	@touch $(STAMP)

# uv resolves, rather than pip-tools: one universal file (every platform, every Python from 3.11,
# with markers where they differ) in seconds where pip-compile takes minutes, and uv is itself
# pinned in the lock. Without UPGRADE, pins move only where pyproject.toml's ranges demand it.
UV_COMPILE = $(VENV)/bin/uv pip compile --quiet --universal --python-version 3.11 --generate-hashes \
	--custom-compile-command "make lock" $(if $(UPGRADE),--upgrade)

lock: $(STAMP)
	$(UV_COMPILE) pyproject.toml --extra dev --extra docs -o $(LOCK)
	$(UV_COMPILE) pyproject.toml --extra dev --extra docs --extra bench -c $(LOCK) -o requirements/bench.txt
	$(UV_COMPILE) requirements/iceberg-reader.in -o requirements/iceberg-reader.txt
	$(UV_COMPILE) requirements/dbt.in -o requirements/dbt.txt

# An independent reader of the Iceberg sink's tables for the tests: DuckDB's iceberg extension.
# It does not load in the DuckDB the project uses (2.x), so 1.5.5 goes into a folder of its own
# (requirements/iceberg-reader.in says so; the tests run it in a subprocess with PYTHONPATH there).
ICEBERG_READER := build/duckdb-iceberg/.installed

$(ICEBERG_READER): requirements/iceberg-reader.txt | $(STAMP)
	$(PIP_LOCKED) --target build/duckdb-iceberg -r requirements/iceberg-reader.txt
	@touch $@

# dbt-core with dbt-materialize, the wire protocol's dbt client in the tests: its adapters need a
# protobuf older than tidegate's, so it gets a virtualenv of its own (requirements/dbt.in).
DBT_VENV := build/dbt-venv
DBT := $(DBT_VENV)/.installed

$(DBT): requirements/dbt.txt
	@test -x $(DBT_VENV)/bin/python || $(PYTHON) -m venv $(DBT_VENV)
	$(DBT_VENV)/bin/python -m pip install --quiet --require-hashes --no-deps -r requirements/dbt.txt
	@touch $@

setup: $(STAMP) postgres $(ICEBERG_READER) $(DBT)

# The storage tests start their own PostgreSQL cluster from the Debian server package.
postgres:
	@ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || { \
	  echo "installing the PostgreSQL server (the storage tests start their own cluster)"; \
	  $(if $(filter 0,$(shell id -u)),,sudo) sh -c 'apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null'; }

# Regenerate the checked-in Protobuf code after editing proto/ (a test fails if it is stale).
proto: $(STAMP)
	$(PY) -m tidegate.runtime.wire.generate

run: setup
	$(VENV)/bin/tidegate demo

# Two pytest-xdist workers, one per core: one process would take about twice as long on the
# 2-core machines CI runs on. TEST_JOBS=0 runs it in one process.
TEST_JOBS ?= 2

# Work stealing: the long simulator tests otherwise gather at one worker's tail. Tests marked
# soak (the mutant campaigns that take minutes to find their mutant) run in make soak.
test: setup
	HYPOTHESIS_PROFILE=$(HYPOTHESIS_PROFILE) $(VENV)/bin/pytest -q -n $(TEST_JOBS) \
		$(if $(filter 0,$(TEST_JOBS)),,--dist worksteal) -m "not soak" $(PYTEST_ARGS)

# The tiers are pytest markers (pyproject.toml; tests/tiers.py fails a test that starts Spark,
# PostgreSQL or a process without its marker), so the fast tier cannot drift from what it skips.
FAST_MARKERS := not spark and not processes and not postgres and not slow and not soak
FAST_JOBS   ?= 2

test-fast: $(STAMP)
	HYPOTHESIS_PROFILE=$(HYPOTHESIS_PROFILE) $(VENV)/bin/pytest -q -n $(FAST_JOBS) -m "$(FAST_MARKERS)" \
		$(PYTEST_ARGS)

# mypy reads the package through a link tree of its installed layout (tools/typecheck.py says why).
lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(PY) tools/typecheck.py

docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --site-dir site

# Every benchmark; the soaks (bench/soak.py, bench/shards_crash.py) run in make soak.
# The benchmarks' own extra (Pathway, the anchor of bench/replica.py) is installed here only.
BENCH_STAMP := $(VENV)/.tidegate-bench-installed

$(BENCH_STAMP): $(STAMP) requirements/bench.txt
	$(PIP_LOCKED) -r requirements/bench.txt
	@touch $(BENCH_STAMP)

bench: setup $(BENCH_STAMP)
	@for b in bench/*.py; do \
		case $$b in bench/_*|bench/soak.py|bench/shards_crash.py) continue;; esac; \
		echo "== $$b"; $(PY) $$b || exit 1; \
	done

# The long crash tests: a shard writer SIGKILLed 50 times, then the whole runtime
# (controller and replicas, appends and peeks) SIGKILLed 200 times.
soak: setup
	HYPOTHESIS_PROFILE=$(HYPOTHESIS_PROFILE) $(VENV)/bin/pytest -q -n $(TEST_JOBS) -m soak
	$(PY) bench/shards_crash.py --kills 50
	$(PY) bench/soak.py --kills 200

clean:
	rm -rf $(VENV) build dist site *.egg-info .mypy_cache .ruff_cache .pytest_cache .hypothesis spark-warehouse metastore_db
