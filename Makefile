# `make run` and `make test` work from a fresh clone: they create .venv and install the pinned requirements.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
HOST ?= 127.0.0.1
PORT ?= 8000
# Links to the console (approval links in the thread and on the phone, createapikey's set-password link) point here
# when it is not the default: the server and the command it prints both get it.
BASE_URL := http://$(HOST):$(PORT)
BASE_URL_ENV := $(if $(filter http://127.0.0.1:8000,$(BASE_URL)),,PUBLIC_BASE_URL=$(BASE_URL) )

.PHONY: install clients run test checks lint typecheck pytest docs docs-check bench clean screenshots

$(STAMP): requirements.txt requirements-dev.txt
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	URLLIB3_NO_OVERRIDE=1 $(BIN)/python -m pip install --quiet -r requirements-dev.txt
	touch $(STAMP)

install: $(STAMP)

# The official npm client (the `poke` CLI), pinned by tests/clients/package-lock.json, for the tests that run it
# unmodified against our server. Without npm the target says so and those tests skip (.ci/run installs npm).
CLIENTS := tests/clients/node_modules/.package-lock.json
$(CLIENTS): tests/clients/package.json tests/clients/package-lock.json
	@if command -v npm >/dev/null 2>&1; then \
	  cd tests/clients && npm ci --no-audit --no-fund --ignore-scripts --loglevel=error; \
	else echo "npm not found: the tests that drive the poke CLI will skip (apt-get install nodejs npm)"; fi

clients: $(CLIENTS)

run: install
	DEBUG=$${DEBUG-1} $(BIN)/python manage.py migrate --no-input
	@echo
	@echo "  Create a key:   DEBUG=1 $(BASE_URL_ENV)$(BIN)/python manage.py createapikey --email you@example.com --name my-script"
	@echo "  Send a message: curl -X POST http://$(HOST):$(PORT)/api/v1/inbound/api-message \\"
	@echo "                    -H 'Authorization: Bearer <API_KEY>' -H 'Content-Type: application/json' \\"
	@echo "                    -d '{\"message\": \"Remind me to stretch at 3pm\"}'"
	@echo "  Admin:          DEBUG=1 $(BIN)/python manage.py createsuperuser, then http://$(HOST):$(PORT)/admin/"
	@echo
	DEBUG=$${DEBUG-1} $(BASE_URL_ENV)$(BIN)/python manage.py serve $(HOST):$(PORT)

lint: install
	$(BIN)/ruff check .
	$(BIN)/lint-imports

typecheck: install
	DEBUG=1 $(BIN)/mypy .

# The suite runs in one pytest-xdist worker per CPU, at most 4: each worker empties a Redis database of its own
# (REDIS_URL's number plus the worker's index; Redis has 16), and a test PostgreSQL database of its own (test_<name>_gw0,
# ...). Tests marked with an xdist_group run one after another on one worker. PYTEST_WORKERS=0 runs them in this
# process, one at a time (docs/howto/run-the-tests.md).
PYTEST_WORKERS ?= auto
pytest: install clients
	$(BIN)/pytest -n $(PYTEST_WORKERS) --maxprocesses 4 --dist loadgroup $(PYTEST_ARGS)

# The three checks are independent and each uses one CPU: run side by side, each one's output kept together (-O).
checks: lint typecheck docs-check

test: install clients
	$(MAKE) --no-print-directory -j3 -Otarget checks
	$(MAKE) --no-print-directory pytest

# The documentation site (Sphinx, MyST Markdown, Furo). `make docs` builds it and serves it on DOCS_PORT;
# `make docs-check` is the strict build CI runs: any warning fails it (a broken link or anchor, a page left out
# of the navigation, a reference that does not resolve). Nothing is fetched from the network.
DOCS_PORT ?= 8001
SPHINX := DEBUG=1 $(BIN)/sphinx-build
docs: install
	$(SPHINX) -q -b html docs docs/_build/html
	@echo "  Documentation: http://$(HOST):$(DOCS_PORT)/  (Ctrl-C stops)"
	$(BIN)/python -m http.server --bind $(HOST) --directory docs/_build/html $(DOCS_PORT)

docs-check: install
	$(SPHINX) -q -W --keep-going -n -E -b html docs docs/_build/check

# Not part of `make test` or CI: minutes of load, and noisy while anything else runs. Needs wrk, PostgreSQL, Redis.
# BENCH_ARGS="--seconds 2 --connections 1,32 --no-docs" for a quick look; see bench/run.py --help.
bench: install
	$(BIN)/python -m bench.run $(BENCH_ARGS)

# Rewrites docs/screenshots/*.png from a seeded console in Chromium (see tests/browser/screenshots.py).
screenshots: install
	$(BIN)/pytest tests/browser/screenshots.py -q -p no:cacheprovider

clean:
	rm -rf $(VENV) docs/_build tests/clients/node_modules .pytest_cache .mypy_cache .ruff_cache staticfiles
