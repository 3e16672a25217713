# The two entry points: `make demo` and `make test`. Each bootstraps .venv by itself.
VENV := .venv
PY := $(VENV)/bin/python
FLOWPROOF := $(VENV)/bin/flowproof

.PHONY: bootstrap demo test test-quick lint typecheck bench clean

bootstrap:
	@bash scripts/bootstrap.sh

# Offline on purpose: no key and no upstream reach the run; the example agents find their
# SDKs in .venv, which comes first on PATH.
demo: bootstrap
	@env -u OPENAI_API_KEY -u ANTHROPIC_API_KEY -u FLOWPROOF_AGENT_KEY -u FLOWPROOF_AGENT_UPSTREAM \
		-u OPENAI_BASE_URL -u ANTHROPIC_BASE_URL PATH="$(CURDIR)/$(VENV)/bin:$$PATH" \
		$(FLOWPROOF) run examples/

test: bootstrap lint typecheck
	$(PY) -m pytest -n 2 -q

test-quick: bootstrap
	$(PY) -m pytest -n 2 -q -m "not slow"

lint: bootstrap
	$(VENV)/bin/ruff check addons flowproof_cli tests examples benchmarks
	$(VENV)/bin/ruff format --check addons flowproof_cli tests examples benchmarks

typecheck: bootstrap
	$(VENV)/bin/mypy

# Ratios measured side by side; the egress benchmark runs in a fresh network namespace.
bench: bootstrap
	$(PY) benchmarks/run.py
	unshare -n sh -c 'ip link set lo up && $(PY) benchmarks/egress.py'

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
