# The two commands of the README: `make demo` and `make test`. Both install what is missing first.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.det-installed
# det-plugin-estimator needs TensorFlow < 2.16 and lives in its own legacy venv (ENV.md), not in .venv.
PACKAGES := $(filter-out packages/plugin-estimator,$(sort $(wildcard packages/*)))
PACKAGE_FILES := $(wildcard packages/*/pyproject.toml)
# pytest-xdist workers: every core of the machine (2 in CI).
WORKERS ?= auto

.PHONY: install test demo lint format lock clean bench

install: $(STAMP)

# torch first, from its pin (a CPU build on this machine's disk); then the rest under the lock; then
# every first-party package in editable mode, without build isolation so no network is needed.
$(STAMP): requirements/main.txt requirements/constraints.txt $(PACKAGE_FILES)
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --disable-pip-version-check -c requirements/constraints.txt torch==2.13.0
	$(BIN)/pip install -q --disable-pip-version-check -c requirements/constraints.txt -r requirements/main.txt
	$(BIN)/pip install -q --disable-pip-version-check --no-deps --no-build-isolation \
		$(foreach p,$(PACKAGES),-e $(p))
	touch $(STAMP)

test: install
	$(BIN)/python -m pytest -n $(WORKERS) -q

demo: install
	$(BIN)/python examples/demo.py

lint: install
	$(BIN)/ruff check packages tests examples benchmarks
	$(BIN)/ruff format --check packages tests examples benchmarks
	$(BIN)/mypy packages/core/src packages/master/src

format: install
	$(BIN)/ruff format packages tests examples benchmarks
	$(BIN)/ruff check --fix packages tests examples benchmarks

# Rewrite the lock from the current environment (run after editing requirements/main.txt).
lock: install
	{ echo "# The lock: exact versions of every third-party package of the development environment."; \
	  echo "# Regenerate with 'make lock' after changing requirements/main.txt."; \
	  $(BIN)/pip freeze | grep -v -E '^(det-|-e |# Editable)'; } > requirements/constraints.txt

bench: install
	for f in benchmarks/bench_*.py; do $(BIN)/python $$f || exit 1; done

clean:
	rm -rf $(VENV) build dist .pytest_cache
