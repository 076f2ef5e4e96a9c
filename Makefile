# The README's two commands: `make demo` and `make test`. Only Python 3.11+ and the package index are needed.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
PORT ?= 8000
DEMO_DB ?= demo.sqlite3
export MCP_DEMO_DB := $(abspath $(DEMO_DB))

.PHONY: install demo test lint typecheck pytest pytest-postgres conformance benchmarks clean

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
	echo "Read alice's document learn://documents/$$DOC with it (once the server below is up):"; \
	echo ""; \
	echo "  curl -s $$MCP_RESOURCE_URI -H 'Authorization: Bearer $$TOKEN' -H 'Content-Type: application/json' \\"; \
	echo "    -H 'MCP-Protocol-Version: 2026-07-28' -H 'Mcp-Method: resources/read' \\"; \
	echo "    -H 'Mcp-Name: learn://documents/$$DOC' -d '$$BODY'"; \
	echo ""
	MCP_RESOURCE_URI=http://127.0.0.1:$(PORT)/mcp $(VENV)/bin/uvicorn testproject.asgi:application --host 127.0.0.1 --port $(PORT)

lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports

typecheck: install
	$(VENV)/bin/mypy

pytest: install
	$(VENV)/bin/pytest

# The query paths run again on persistent connections (as in production), and with psycopg's server-side parameter
# binding (where the statement timeout takes its other path and psycopg prepares repeated statements).
PG_QUERY_TESTS := tests/test_inventory.py tests/test_listing_plan.py tests/test_ownership.py tests/test_auth.py \
	tests/test_scoping.py tests/test_traversal_concurrency.py tests/test_e2e.py

pytest-postgres: install
	MCP_TEST_DB=postgres $(VENV)/bin/pytest
	MCP_TEST_DB=postgres MCP_TEST_CONN_MAX_AGE=none $(VENV)/bin/pytest $(PG_QUERY_TESTS)
	MCP_TEST_DB=postgres MCP_TEST_CONN_MAX_AGE=none MCP_TEST_PG_BINDING=server $(VENV)/bin/pytest $(PG_QUERY_TESTS)

test: lint typecheck pytest pytest-postgres

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
	rm -rf $(VENV) .conformance demo.sqlite3 .pytest_cache .mypy_cache .ruff_cache
