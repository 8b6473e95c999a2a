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

install: $(STAMP) legacy-venv

# torch first, from its pin (a CPU build on this machine's disk); then the rest under the lock; then
# every first-party package in editable mode, without build isolation so no network is needed.
$(STAMP): requirements/main.txt requirements/constraints.txt $(PACKAGE_FILES)
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --disable-pip-version-check -c requirements/constraints.txt torch==2.13.0
	$(BIN)/pip install -q --disable-pip-version-check -c requirements/constraints.txt -r requirements/main.txt
	$(BIN)/pip install -q --disable-pip-version-check --no-deps --no-build-isolation \
		$(foreach p,$(PACKAGES),-e $(p))
	touch $(STAMP)

# Debian packages, once per venv, in one apt-get call (two at once would fight over dpkg's lock):
# headless Chromium for the web UI's browser tests (tests/webui; Playwright drives /usr/bin/chromium,
# `playwright install`, a download, is never needed) and a real single-host Slurm for the slurm
# resource manager's tests (tests/slurm; they configure and start their own munged/slurmctld/slurmd
# in a temporary directory).
SYSTEM_STAMP := $(VENV)/.det-system
install: $(SYSTEM_STAMP)
$(SYSTEM_STAMP):
	@missing=; \
	[ -x /usr/bin/chromium ] || missing="$$missing chromium chromium-driver"; \
	if [ ! -x /usr/sbin/slurmctld ] || [ ! -x /usr/sbin/slurmd ] || [ ! -x /usr/sbin/munged ] || \
		[ ! -x /usr/bin/sbatch ]; then missing="$$missing slurmctld slurmd slurm-client munge"; fi; \
	if [ -n "$$missing" ]; then \
		if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO=sudo; fi; \
		$$SUDO apt-get update -q && $$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q \
			--no-install-recommends $$missing; \
	fi
	mkdir -p $(VENV) && touch $(SYSTEM_STAMP)

# The legacy venv (ENV.md): TensorFlow 2.15 with tf.keras (Keras 2) and tf.estimator, which
# TensorFlow >= 2.16 dropped. `make test` runs the tests that need it (tests/keras/legacy) through it.
# Add a distribution to LEGACY_PACKAGES (and its third-party needs to LEGACY_REQUIREMENTS) to test it there.
LEGACY_VENV := .venv-legacy
LEGACY_STAMP := $(LEGACY_VENV)/.det-installed
LEGACY_REQUIREMENTS := tensorflow==2.15.1 tensorflow-estimator==2.15.0 keras==2.15.0 numpy==1.26.4 \
	protobuf==4.25.9 torch==2.13.0 pytest==9.2.0 pytest-timeout==2.4.0 pluggy==1.7.0 \
	requests==2.34.2 PyYAML==6.0.3 platformdirs==4.14.7 psutil==7.2.2 fsspec==2026.9.0 \
	hatchling==1.33.0 editables==0.6 scikit-learn==1.9.1
LEGACY_PACKAGES := packages/core packages/plugin-keras packages/plugin-estimator

.PHONY: legacy-venv
legacy-venv: $(LEGACY_STAMP)

$(LEGACY_STAMP): Makefile $(foreach p,$(LEGACY_PACKAGES),$(p)/pyproject.toml)
	test -x $(LEGACY_VENV)/bin/python || $(PYTHON) -m venv $(LEGACY_VENV)
	$(LEGACY_VENV)/bin/pip install -q --disable-pip-version-check $(LEGACY_REQUIREMENTS)
	$(LEGACY_VENV)/bin/pip install -q --disable-pip-version-check --no-deps --no-build-isolation \
		$(foreach p,$(LEGACY_PACKAGES),-e $(p))
	touch $(LEGACY_STAMP)

# The install steps (.venv, the legacy venv, Debian packages) are independent and mostly unpack
# archives on one core each: `make test` and `make demo` run them side by side.
INSTALL_JOBS ?= 4

# Venvs that tests install det's wheels or upstream's client into (cached under .cache/, keyed by
# what they hold; a test builds its own when it is missing): `make test` builds them beside the
# install steps (on the core that installing .venv leaves idle), not inside the test run.
.PHONY: test-caches
test-caches:
	$(PYTHON) tests/keras/alone_venv.py
	$(PYTHON) tests/upstream_venv.py

# Bytecode is written during the run (PYTHONDONTWRITEBYTECODE, which some images set, unset): every
# master, CLI call and trial would otherwise compile det's own modules again (~0.4 s a master).
test:
	$(MAKE) --no-print-directory -j$(INSTALL_JOBS) install test-caches
	env -u PYTHONDONTWRITEBYTECODE $(BIN)/python -m pytest -n $(WORKERS) -q

demo:
	$(MAKE) --no-print-directory -j$(INSTALL_JOBS) install
	$(BIN)/python examples/demo.py

lint: install
	$(BIN)/ruff check packages tests examples benchmarks
	$(BIN)/ruff format --check packages tests examples benchmarks docs README.md
	$(BIN)/mypy packages/core/src packages/master/src

format: install
	$(BIN)/ruff format packages tests examples benchmarks docs README.md
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
