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
	@echo ""
	@echo "MCP endpoint: http://127.0.0.1:$(PORT)/mcp   (admin: http://127.0.0.1:$(PORT)/admin/)"
	@echo "Connect an MCP client to it, e.g. python -m mcp.client http://127.0.0.1:$(PORT)/mcp"
	@echo ""
	$(VENV)/bin/uvicorn testproject.asgi:application --host 127.0.0.1 --port $(PORT)

lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .

typecheck: install
	$(VENV)/bin/mypy

pytest: install
	$(VENV)/bin/pytest

pytest-postgres: install
	MCP_TEST_DB=postgres $(VENV)/bin/pytest

test: lint typecheck pytest pytest-postgres

conformance: install
	bash scripts/conformance.sh

benchmarks: install
	$(PY) benchmarks/run.py

clean:
	rm -rf $(VENV) .conformance demo.sqlite3 .pytest_cache .mypy_cache .ruff_cache
