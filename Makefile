PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# aws-sam-cli's pins conflict with moto's, so SAM and cfn-lint have their own virtualenv.
SAM_VENV ?= .venv-sam
SAM_REQUIREMENTS := requirements-sam.txt
# checkov pins boto3 to a release neither aws-sam-cli nor moto accepts: its own virtualenv.
CHECKOV_VENV ?= .venv-checkov
CHECKOV_REQUIREMENTS := requirements-checkov.txt
# Every install takes its versions from the lock (`make lock` writes it).
CONSTRAINTS := constraints.txt
LOCK_VENV ?= .venv-lock
UV_VERSION := 0.13.9

.PHONY: demo test lint typecheck unit component peer-tests template-tests check-template checkov peers bench docs screenshot clean lock

# The project's virtualenv: trunkwatch (editable) with the local runtime, and the test tools,
# at the lock's versions.
$(VENV)/.installed: $(CONSTRAINTS) requirements-dev.txt pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -c $(CONSTRAINTS) \
		-r requirements-dev.txt -e '.[local]'
	touch $@

# Set up and run the pipeline on the bundled scenario.
demo: $(VENV)/.installed
	$(BIN)/trunkwatch demo

# Three workers on two cores: a fifth of the suite's time is spent waiting (on sockets, servers,
# subprocesses and the browser), which a third worker fills. One test handed out at a time,
# the long ones first (tests/conftest.py), so the workers finish together.
PYTEST := $(BIN)/python -m pytest -n 3 --maxschedchunk 1

# Everything CI runs: lint, types, template checks, checkov, the peers, then every tier of tests
# in one run (tests/unit, tests/component, tests/peers, tests/template; real peers included).
TEST_TIERS := tests/unit tests/component tests/peers tests/template
test: lint typecheck check-template checkov peers
	$(PYTEST) $(TEST_TIERS)

lint: $(VENV)/.installed
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: $(VENV)/.installed
	$(BIN)/mypy

# One tier of tests each. pytest exits non-zero (5) when it collects no test, so an empty run
# fails here too.
# The fast ones only: no AWS, no subprocess, no real peer.
unit: $(VENV)/.installed
	$(PYTEST) tests/unit

component: $(VENV)/.installed
	$(PYTEST) tests/component

peer-tests: $(VENV)/.installed peers
	$(PYTEST) tests/peers

template-tests: $(VENV)/.installed
	$(PYTEST) tests/template

# amtool, Alertmanager (Debian's prometheus-alertmanager) and chromium for the peer tests.
# TRUNKWATCH_SKIP_PEERS=1 (exactly 1, as for the tests: tests/support/peers.py) skips them.
peers:
	@if [ "$$TRUNKWATCH_SKIP_PEERS" = 1 ]; then echo "peers: skipped (TRUNKWATCH_SKIP_PEERS=1)"; else scripts/install_peers.sh; fi

# Every workload; the stand-alone ones add their sections to the summary the first one writes.
bench: $(VENV)/.installed
	$(BIN)/python -m benchmarks
	$(BIN)/python -m benchmarks local_scale
	$(BIN)/python -m benchmarks github_budget
	$(BIN)/python -m benchmarks long_history
	$(BIN)/python -m benchmarks serve_week
	$(BIN)/python -m benchmarks chaos
	$(BIN)/python -m benchmarks redtrunk
	$(BIN)/python -m benchmarks org
	$(BIN)/python -m benchmarks buildkite_poll

# docs/performance.md and its data (docs/performance.json) from the last `make bench`.
docs: $(VENV)/.installed
	$(BIN)/python -m benchmarks.docs

# Refresh the status page screenshots in docs/ (chromium + Playwright, like the browser tests):
# the README's alerts view, and the trunk overview and a trunk's grid and history.
screenshot: $(VENV)/.installed
	TRUNKWATCH_UPDATE_SCREENSHOT=1 $(BIN)/python -m pytest -q -p no:xdist tests/peers/test_status_page.py -k test_alerts_silence_from_an_alert_and_expire
	TRUNKWATCH_UPDATE_SCREENSHOT=1 $(BIN)/python -m pytest -q -p no:xdist tests/peers/test_trunk_pages.py

clean:
	rm -rf $(VENV) $(SAM_VENV) $(CHECKOV_VENV) $(LOCK_VENV) .aws-sam benchmarks/out

# Re-resolve every lock (scripts/lock.sh says which), reinstall .venv from it, and run the
# tests that hold the locks together and replay the scenarios on moto and in memory.
lock:
	test -x $(LOCK_VENV)/bin/uv || { $(PYTHON) -m venv $(LOCK_VENV) && \
		$(LOCK_VENV)/bin/python -m pip install --quiet --disable-pip-version-check uv==$(UV_VERSION); }
	UV=$(LOCK_VENV)/bin/uv scripts/lock.sh
	rm -rf $(VENV)
	$(MAKE) $(VENV)/.installed
	$(BIN)/python -m pytest -n 2 -q tests/component/test_install.py tests/component/test_scenarios.py

$(SAM_VENV): $(SAM_REQUIREMENTS)
	$(PYTHON) -m venv $(SAM_VENV)
	$(SAM_VENV)/bin/python -m pip install --quiet --disable-pip-version-check -r $(SAM_REQUIREMENTS)
	touch $(SAM_VENV)

# sam validate --lint, sam validate, cfn-lint on the translated template, sam build.
check-template: $(SAM_VENV)
	SAM_VENV=$(SAM_VENV) scripts/check_template.sh

$(CHECKOV_VENV): $(CHECKOV_REQUIREMENTS)
	$(PYTHON) -m venv $(CHECKOV_VENV)
	$(CHECKOV_VENV)/bin/python -m pip install --quiet --disable-pip-version-check -r $(CHECKOV_REQUIREMENTS)
	touch $(CHECKOV_VENV)

# checkov on template.yaml, offline; every finding must be accepted, with its reason, in
# docs/deploying.md ("Accepted checkov findings").
checkov: $(CHECKOV_VENV)
	CHECKOV_VENV=$(CHECKOV_VENV) scripts/checkov.sh
