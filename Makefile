# tidegate -- every target sets itself up from a fresh clone and is quick when already set up.
#
#   make run        set up, then run the main job (tidegate demo) on embedded defaults
#   make test       set up, then run the whole test suite
#   make test-fast  the spec, simulator and unit tests: no Spark, no processes, no PostgreSQL
#                   (under 2 minutes on 2 cores; tests/README.md says what it leaves out)
#   make lint       ruff check and ruff format --check on everything, mypy --strict on every package
#   make docs       build the documentation site (mkdocs --strict) into site/
#   make bench      set up, then run every benchmark in bench/
#   make proto      regenerate runtime/wire/gen from proto/ (checked in)
#   make soak       the long mutant campaigns, then the crash tests: the shard store, the whole runtime

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.tidegate-installed
HYPOTHESIS_PROFILE ?= $(if $(CI),ci,dev)

.PHONY: all setup run test test-fast lint docs bench soak clean proto postgres

all: test

$(STAMP): pyproject.toml setup.py
	@command -v java >/dev/null 2>&1 || { echo "tidegate needs a Java 17 runtime for Spark (apt-get install openjdk-17-jre-headless)"; exit 1; }
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip "setuptools>=77" wheel
	$(PY) -m pip install --quiet -e ".[dev,docs]"
	@touch $(STAMP)

# An independent reader of the Iceberg sink's tables for the tests: DuckDB's iceberg extension.
# It does not load in the DuckDB the project uses (2.0), so 1.5.5 goes into a folder of its own
# (offline from PyPI; the tests run it in a subprocess with PYTHONPATH pointing there).
ICEBERG_READER := build/duckdb-iceberg/.installed

$(ICEBERG_READER): | $(STAMP)
	$(PY) -m pip install --quiet --target build/duckdb-iceberg \
		duckdb==1.5.5 duckdb-extension-iceberg==1.5.5 duckdb-extension-avro==1.5.5
	@touch $@

setup: $(STAMP) postgres $(ICEBERG_READER)

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

# Two pytest-xdist workers, one per core: the whole suite took 9.5 min so on 2 cores (stop 24;
# 23 min by the end of stop 25, with the storage simulator and the soak-marked campaigns in it),
# where one process was on course for about 33 min. TEST_JOBS=0 runs it in one process.
TEST_JOBS ?= 2

# Work stealing: the long simulator tests otherwise gather at one worker's tail. Tests marked
# soak (the mutant campaigns that take minutes to find their mutant) run in make soak.
test: setup
	HYPOTHESIS_PROFILE=$(HYPOTHESIS_PROFILE) $(VENV)/bin/pytest -q -n $(TEST_JOBS) \
		$(if $(filter 0,$(TEST_JOBS)),,--dist worksteal) -m "not soak" $(PYTEST_ARGS)

# What test-fast leaves out (tests/README.md): slow tests; Spark; replica, controller,
# orchestrator and simulator subprocesses; PostgreSQL; the mutant campaigns; tests/e2e,
# tests/replica, packaging and the docs' runtime examples (not in FAST_PATHS at all).
FAST_PATHS  := tests/spec tests/sim tests/runtime tests/test_cli.py tests/test_cli_ddl.py tests/test_docs.py \
	tests/test_exports.py
FAST_IGNORE := tests/sim/test_sim_campaign_spark.py \
	tests/sim/test_sim_determinism.py \
	tests/sim/test_sim_mutants.py \
	tests/sim/test_sim_tools_cli.py \
	tests/runtime/storage/test_shard_processes.py \
	tests/runtime/test_controller_metrics.py \
	tests/runtime/test_environment_managed.py \
	tests/runtime/test_environment_open.py \
	tests/runtime/test_orchestrator.py \
	tests/runtime/transport/test_grpc_replica_server.py \
	tests/runtime/transport/test_transport_contract.py
FAST_DESELECT := tests/sim/test_sim_controller_restart.py::test_two_processes_produce_the_same_trace_digest_with_restarts
FAST_JOBS   ?= 2

test-fast: $(STAMP)
	HYPOTHESIS_PROFILE=$(HYPOTHESIS_PROFILE) $(VENV)/bin/pytest -q -n $(FAST_JOBS) -m "not slow" -k "not postgres" \
		$(addprefix --ignore=,$(FAST_IGNORE)) $(addprefix --deselect=,$(FAST_DESELECT)) \
		$(FAST_PATHS) $(PYTEST_ARGS)

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

$(BENCH_STAMP): $(STAMP)
	$(PY) -m pip install --quiet -e ".[bench]"
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
