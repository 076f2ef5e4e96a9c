# The README's two commands: `make demo` and `make test`. Only Python 3.11+ and the package index are needed.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PORT ?= 8000
DEMO_DB ?= demo.sqlite3
export MCP_DEMO_DB := $(abspath $(DEMO_DB))

# `make token` and `make manage` run against the database and port of `make demo`, from a second terminal. USER is
# taken from the command line only (the shell's own $USER is the login name); SCOPE is a space-separated list.
SCOPE ?= documents:read
TOKEN_USER := $(if $(filter command line,$(origin USER)),$(USER),alice)
DEMO_ARGS := $(strip $(if $(filter-out 8000,$(PORT)),PORT=$(PORT)) $(if $(filter-out demo.sqlite3,$(DEMO_DB)),DEMO_DB=$(DEMO_DB)))
DEMO_ENV := MCP_RESOURCE_URI=http://127.0.0.1:$(PORT)/mcp
NEEDS_DEMO_DB = @[ "$$MCP_TEST_DB" = postgres ] || [ -f "$(MCP_DEMO_DB)" ] || { \
	echo "No demo database at $(MCP_DEMO_DB): run '$(strip make demo $(DEMO_ARGS))' first." >&2; exit 1; }

.PHONY: browser-install install demo token manage test lint typecheck docs pytest pytest-postgres dist conformance benchmarks clean \
	ts-install teams-wheel teams-install pytest-teams pytest-teams-postgres properties

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e ".[dev]"
	touch $@

install: $(VENV)/.installed

demo: install
	$(PY) testproject/manage.py migrate --verbosity 0
	$(PY) testproject/manage.py load_demo_data
	@set -e; export MCP_RESOURCE_URI=http://127.0.0.1:$(PORT)/mcp; \
	TOKEN=$$($(PY) testproject/manage.py mcp_token --user alice --scope documents:read); \
	DOC=$$($(PY) testproject/manage.py shell --no-imports -c "from testproject.library.models import Document; \
	print(Document.objects.filter(owner__username='alice').order_by('pk').values_list('pk', flat=True).first())" | tail -1); \
	META='"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}'; \
	BODY='{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"learn://documents/'$$DOC'",'$$META'}}'; \
	echo ""; \
	echo "MCP endpoint: $$MCP_RESOURCE_URI   (admin: http://127.0.0.1:$(PORT)/admin/)"; \
	echo "OAuth 2.1: metadata at http://127.0.0.1:$(PORT)/.well-known/oauth-protected-resource/mcp; MCP clients"; \
	echo "register themselves and sign in as alice/alice or bob/bob (docs/oauth.md)."; \
	echo ""; \
	echo "A ready access token for alice (scope documents:read, valid for an hour):"; \
	echo ""; \
	echo "  $$TOKEN"; \
	echo ""; \
	echo "Another token, in a second terminal: make token USER=bob $(DEMO_ARGS)"; \
	echo ""; \
	echo "Read alice's document learn://documents/$$DOC with it (once the server below is up):"; \
	echo ""; \
	echo "  curl -s $$MCP_RESOURCE_URI -H 'Authorization: Bearer $$TOKEN' -H 'Content-Type: application/json' \\"; \
	echo "    -H 'MCP-Protocol-Version: 2026-07-28' -H 'Mcp-Method: resources/read' \\"; \
	echo "    -H 'Mcp-Name: learn://documents/$$DOC' -d '$$BODY'"; \
	echo ""
	MCP_RESOURCE_URI=http://127.0.0.1:$(PORT)/mcp $(VENV)/bin/uvicorn testproject.asgi:application --host 127.0.0.1 --port $(PORT)

token: install
	$(NEEDS_DEMO_DB)
	@$(DEMO_ENV) $(PY) testproject/manage.py mcp_token --user "$(TOKEN_USER)" --scope "$(SCOPE)"

manage: install
	$(NEEDS_DEMO_DB)
	@$(DEMO_ENV) $(PY) testproject/manage.py $(ARGS)

lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports

typecheck: install
	$(VENV)/bin/mypy

pytest: install ts-install browser-install
	$(VENV)/bin/pytest

# The query paths run again on persistent connections (as in production), and with psycopg's server-side parameter
# binding (where the statement timeout takes its other path and psycopg prepares repeated statements).
PG_QUERY_TESTS := tests/test_inventory.py tests/test_listing_plan.py tests/test_ownership.py tests/test_auth.py \
	tests/test_scoping.py tests/test_traversal_concurrency.py tests/test_e2e.py

pytest-postgres: install ts-install browser-install
	MCP_TEST_DB=postgres $(VENV)/bin/pytest
	MCP_TEST_DB=postgres MCP_TEST_CONN_MAX_AGE=none $(VENV)/bin/pytest $(PG_QUERY_TESTS)
	MCP_TEST_DB=postgres MCP_TEST_CONN_MAX_AGE=none MCP_TEST_PG_BINDING=server $(VENV)/bin/pytest $(PG_QUERY_TESTS)

# The documentation site (docs/, Sphinx + MyST + Furo) into docs/_build/html, from scratch (-E), warnings as errors and
# nitpicky: a link to a missing page or heading anchor, a reference to an undocumented object or a broken docstring
# fails it. That is the internal link check; external links are not checked (no network; Sphinx's linkcheck is not
# run). Every snippet of the pages is compiled or run by tests/test_docs_snippets.py (in `pytest`).
DOCS_OUT ?= docs/_build/html

docs: install
	$(VENV)/bin/sphinx-build -E -b html -n -W --keep-going -q docs $(DOCS_OUT)

test: lint typecheck docs pytest pytest-postgres pytest-teams pytest-teams-postgres

# The agreement property suite with many more examples than `make test` runs (hypothesis profile "agreement-long").
properties: install
	MCP_HYPOTHESIS_PROFILE=long $(VENV)/bin/pytest tests/test_agreement.py
	MCP_HYPOTHESIS_PROFILE=long MCP_TEST_DB=postgres $(VENV)/bin/pytest tests/test_agreement.py

# Headless Chromium and its chromedriver from the system's packages (Debian's chromium and chromium-driver), for
# tests/test_browser.py (Selenium drives them; nothing is downloaded besides the packages). Installed with apt-get
# when missing and this is root (CI runs as root on a fresh machine); otherwise the browser tests are skipped with
# the reason, except under CI, where they fail.
browser-install:
	@if command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1; then :; \
	elif command -v apt-get >/dev/null 2>&1 && [ "$$(id -u)" = 0 ]; then \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver; \
	elif [ -n "$$CI" ]; then echo "browser-install: CI requires chromium and chromedriver (apt-get install chromium chromium-driver)" >&2; exit 1; \
	else echo "browser-install: chromium or chromedriver not found, the browser tests will be skipped"; fi

# The TypeScript SDK (latest @modelcontextprotocol/sdk 1.x; @modelcontextprotocol/client 2.x for the guide's examples)
# on Node 22 (the npm package node@22, as the conformance suite installs it), into tests/ts/node_modules/ (gitignored).
# Without npm its tests are skipped, except under CI.
TS_DIR := tests/ts
TS_STAMP := $(TS_DIR)/node_modules/.installed

$(TS_STAMP): $(TS_DIR)/package.json
	cd $(TS_DIR) && npm install --no-audit --no-fund --no-package-lock --loglevel=error
	@[ -x $(TS_DIR)/node_modules/node/bin/node ] || (cd $(TS_DIR) && npm rebuild node --ignore-scripts=false --loglevel=error)
	$(TS_DIR)/node_modules/node/bin/node --version | grep -q '^v22\.'
	touch $@

ts-install:
	@if command -v npm >/dev/null 2>&1; then $(MAKE) --no-print-directory $(TS_STAMP); \
	elif [ -n "$$CI" ]; then echo "ts-install: CI requires npm" >&2; exit 1; \
	else echo "ts-install: npm not found, the TypeScript SDK tests will be skipped"; fi

# The teams project (tests/projects/teams), used as an outside team would: its own suite runs against the package
# installed from the built wheel, in a virtualenv of its own, from its own directory (the source tree is not on the
# path there). The wheel is rebuilt on every run; the virtualenv's other packages only when requirements change.
TEAMS_DIR := tests/projects/teams
TEAMS_VENV ?= .venv-teams
TEAMS_PY := $(abspath $(TEAMS_VENV))/bin/python
TEAMS_WHEELHOUSE := build/teams-wheelhouse

$(TEAMS_VENV)/.deps: $(TEAMS_DIR)/requirements.txt
	$(PYTHON) -m venv $(TEAMS_VENV)
	$(TEAMS_PY) -m pip install --quiet --upgrade pip
	$(TEAMS_PY) -m pip install --quiet -r $(TEAMS_DIR)/requirements.txt
	touch $@

teams-wheel: install
	rm -rf $(TEAMS_WHEELHOUSE)
	$(PY) -m pip wheel --quiet --no-deps --wheel-dir $(TEAMS_WHEELHOUSE) .

teams-install: teams-wheel $(TEAMS_VENV)/.deps
	$(TEAMS_PY) -m pip install --quiet --force-reinstall --no-deps $(TEAMS_WHEELHOUSE)/*.whl
	$(TEAMS_PY) -m pip install --quiet "$$(ls $(TEAMS_WHEELHOUSE)/*.whl)[channels]"

pytest-teams: teams-install ts-install
	cd $(TEAMS_DIR) && $(TEAMS_PY) -m pytest $(TEAMS_ARGS)

pytest-teams-postgres: teams-install ts-install
	cd $(TEAMS_DIR) && MCP_TEST_DB=postgres PGDATABASE=$${PGDATABASE:-teams} $(TEAMS_PY) -m pytest $(TEAMS_ARGS)

# The release artefacts as the package index gets them: an isolated `python -m build` (sdist, then the wheel from the
# sdist), `twine check`, and scripts/check_dist.py (py.typed, templates, migrations, metadata, no tests in the sdist).
dist: install
	rm -rf dist
	$(PY) -m build --outdir dist .
	$(VENV)/bin/twine check --strict dist/*
	$(PY) scripts/check_dist.py dist

conformance: install
	bash scripts/conformance.sh

benchmarks: install
	$(PY) benchmarks/run.py $(BENCH_ARGS)

# Not part of `make test`: ten minutes of mixed requests at a steady rate against one uvicorn server of the demo
# (PostgreSQL, Redis), with 1,000 listeners and document updates from another process (docs/performance.md, "Soak").
SOAK_SECONDS ?= 600
SOAK_RATE ?= 50
SOAK_LISTENERS ?= 1000
SOAK_UPDATE_RATE ?= 1

.PHONY: soak
soak: install
	$(PY) benchmarks/soak.py --seconds $(SOAK_SECONDS) --rate $(SOAK_RATE) --listeners $(SOAK_LISTENERS) \
		--update-rate $(SOAK_UPDATE_RATE) $(SOAK_ARGS)

clean:
	rm -rf $(VENV) .conformance demo.sqlite3 docs/_build .pytest_cache .mypy_cache .ruff_cache $(TS_DIR)/node_modules \
		$(TEAMS_VENV) build dist
