# relayflow: `make dev` runs it locally, `make test` runs every check.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp
SOURCES := shared functions infra tests examples bench docs/hooks

.PHONY: dev test lint typecheck suite unit e2e bench clean browser dist

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

dev: $(STAMP)
	$(BIN)/relayflow dev

lint: $(STAMP)
	$(BIN)/ruff check $(SOURCES)
	$(BIN)/ruff format --check $(SOURCES)

typecheck: $(STAMP)
	$(BIN)/mypy

# The run writes its reliability totals to .reliability/; the figures the docs quote are the
# recorded ones in tests/reliability/figures/, and must still describe this run.
RUN_TOTALS := .reliability
FIGURES_TOOL := $(BIN)/python tests/reliability/reliability_figures.py

# Every pytest test (unit, contract, api, aws, infra, e2e, browser, reliability, docs), with
# the reliability totals checked against the figures the docs quote.
suite: $(STAMP) browser
	$(BIN)/pytest -n auto --reliability-totals=$(RUN_TOTALS)/default.json
	$(FIGURES_TOOL) check $(RUN_TOTALS)/default.json

# Pure logic only (sdk, events, core, config): seconds, no moto, no browser.
unit: $(STAMP)
	$(BIN)/pytest -n auto tests/unit

# The dev stack over real HTTP, the CLI and the dashboard in headless Chromium.
e2e: $(STAMP) browser
	$(BIN)/pytest -n auto tests/e2e

# Headless Chromium for the dashboard tests (tests/e2e/test_dashboard.py): Debian's package,
# installed when missing (as root, or with password-less sudo). Playwright only drives it:
# its own browser downloads are never used. Without a browser those tests fail with one line
# saying how to install it.
browser:
	@command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || \
	{ if [ "$$(id -u)" = 0 ]; then SUDO=; else SUDO="sudo -n"; fi; \
	  echo "relayflow: installing chromium for the dashboard tests"; \
	  $$SUDO apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq chromium >/dev/null || \
	  echo "relayflow: chromium could not be installed (apt-get install -y chromium)"; }

test: lint typecheck docs-build suite

# ---- documentation (MkDocs Material; reference pages rendered from the code) ----------------
.PHONY: docs docs-build
DOCS_ENV = NO_MKDOCS_2_WARNING=1

docs: $(STAMP)
	$(DOCS_ENV) $(BIN)/mkdocs serve

docs-build: $(STAMP)
	$(DOCS_ENV) $(BIN)/mkdocs build --strict --site-dir .site

bench: $(STAMP)
	$(BIN)/python -m bench

# The wheel and the sdist a user installs (pip install "dist/relayflow-<version>-...whl[local]").
# `python -m build` fetches its build backend (setuptools) from the package index.
dist: $(STAMP)
	rm -rf dist
	$(BIN)/python -m build --outdir dist .

# ---- infrastructure (CDK) -------------------------------------------------------------------
# Synthesis needs no Docker and no AWS credentials. Lambda code is bundled by pip
# (--platform manylinux2014_<arch> --only-binary=:all:) into cdk.out/.relayflow-bundles,
# cached by a hash of the sources: the first synth needs the package index, or a folder of
# those wheels in RELAYFLOW_WHEELHOUSE (`make synth RELAYFLOW_WHEELHOUSE=~/wheels`).
# `.venv/bin` goes first on PATH so that cdk.json's
# `python3 infra/app.py` runs with the project's virtualenv when the CDK CLI is used.
STAGE ?= dev
CDK_VERSION ?= 2
CDK_ENV = PATH="$(CURDIR)/$(BIN):$$PATH" JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION=20
# The CDK CLI from npm, run through npx (cached under ~/.npm; writes nothing in the tree).
CDK = $(CDK_ENV) npx --yes aws-cdk@$(CDK_VERSION)

.PHONY: synth test-infra cdk-cli diff deploy destroy

# Synthesise the sample stack into cdk.out (cdk-nag AwsSolutions runs inside the synth and
# fails it on any unacknowledged finding), then cfn-lint the template (W3005 is CDK noise).
synth: $(STAMP)
	$(CDK_ENV) $(BIN)/python infra/app.py -c stage=$(STAGE)
	$(BIN)/cfn-lint --ignore-checks W3005 -- cdk.out/Relayflow-$(STAGE).template.json

# The CDK template, cdk-nag and cfn-lint tests (also part of `make suite`).
test-infra: $(STAMP)
	$(BIN)/pytest -q tests/infra

# Fetch the CDK CLI once (optional: the targets below fetch it on first use).
cdk-cli:
	$(CDK) --version

# Need AWS credentials (and `cdk bootstrap` once per account/region).
diff: $(STAMP)
	$(CDK) diff -c stage=$(STAGE)

deploy: $(STAMP)
	$(CDK) deploy -c stage=$(STAGE) --require-approval broadening

destroy: $(STAMP)
	$(CDK) destroy -c stage=$(STAGE)

# ---- reliability (faults, races, hostile input) ---------------------------------------------
# `make test` already runs tests/reliability with the default sweep (every third crash point,
# 25 generated requests per operation and mode, ~70 s on one core). `make test-reliability`
# runs the long sweep on demand: a crash at every AWS call in both phases, 200 generated
# requests per operation and mode (random, not derandomized), more cancel races.
# Both print the totals (faults injected, races run, bad inputs tried, runs lost) at the end.
RELIABILITY_SWEEP ?= full

.PHONY: test-reliability test-reliability-quick test-races reliability-figures

test-reliability: $(STAMP)
	RELAYFLOW_FAULT_SWEEP=$(RELIABILITY_SWEEP) $(BIN)/pytest -n auto -p no:cacheprovider \
		--reliability-totals=$(RUN_TOTALS)/$(RELIABILITY_SWEEP).json tests/reliability
	$(FIGURES_TOOL) write $(RUN_TOTALS)/$(RELIABILITY_SWEEP).json

# Record a run's totals (by default the last `make test`'s) and rewrite docs/reliability.md
# from them.
RELIABILITY_TOTALS ?= $(RUN_TOTALS)/default.json
reliability-figures: $(STAMP)
	$(FIGURES_TOOL) write $(RELIABILITY_TOTALS)

# The default sweep alone (what `make test` runs of it).
test-reliability-quick: $(STAMP)
	$(BIN)/pytest -n auto tests/reliability

# Every race test of the contract and reliability suites (marked `race`), RACE_REPEAT times
# each on the atomic moto (relayflow.testing.aws); prints how many runs failed (must be 0).
RACE_REPEAT ?= 30

test-races: $(STAMP)
	$(BIN)/pytest -n auto -p no:cacheprovider -m race --race-repeat=$(RACE_REPEAT) tests/contract tests/reliability

clean:
	rm -rf $(VENV) .mypy_cache .pytest_cache .ruff_cache cdk.out
