# tidegate -- every target sets itself up from a fresh clone and is quick when already set up.
#
#   make run     set up, then run the main job (tidegate demo) on embedded defaults
#   make test    set up, then run the whole test suite
#   make lint    ruff on everything, mypy --strict on every package
#   make bench   set up, then run every benchmark in bench/
#   make proto   regenerate runtime/wire/gen from proto/ (checked in)
#   make soak    the long crash test of the shard store

PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.tidegate-installed
HYPOTHESIS_PROFILE ?= $(if $(CI),ci,dev)

.PHONY: all setup run test lint bench soak clean proto postgres

all: test

$(STAMP): pyproject.toml setup.py
	@command -v java >/dev/null 2>&1 || { echo "tidegate needs a Java 17 runtime for Spark (apt-get install openjdk-17-jre-headless)"; exit 1; }
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip "setuptools>=77" wheel
	$(PY) -m pip install --quiet -e ".[dev]"
	@touch $(STAMP)

setup: $(STAMP) postgres

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

test: setup
	HYPOTHESIS_PROFILE=$(HYPOTHESIS_PROFILE) $(VENV)/bin/pytest -q $(PYTEST_ARGS)

lint: setup
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check spec
	$(VENV)/bin/mypy --strict spec
	@# The other packages import tidegate.spec by its installed name: check them through a link tree.
	@rm -rf .lint && mkdir -p .lint/tidegate && cp tidegate/*.py tidegate/py.typed .lint/tidegate/
	@for p in spec sim runtime replica tidegate/commands; do ln -s ../../$$p .lint/tidegate/$$(basename $$p); done
	cd .lint && MYPYPATH=. ../$(VENV)/bin/mypy --config-file ../pyproject.toml --strict \
		-p tidegate.sim -p tidegate.runtime -p tidegate.replica -p tidegate.commands -m tidegate.cli

bench: setup
	@for b in bench/*.py; do \
		case $$b in bench/_*) continue;; esac; \
		echo "== $$b"; $(PY) $$b || exit 1; \
	done

# The long crash test of the shard store: a writer SIGKILLed 50 times.
soak: setup
	$(PY) bench/shards_crash.py --kills 50

clean:
	rm -rf $(VENV) build dist *.egg-info .mypy_cache .ruff_cache .pytest_cache .hypothesis spark-warehouse metastore_db
