# The two entry points: `make demo` and `make test`. Each bootstraps .venv by itself.
VENV := .venv
PY := $(VENV)/bin/python
FLOWPROOF := $(VENV)/bin/flowproof

.PHONY: bootstrap bootstrap-demo demo test test-quick test-stress lint typecheck bench mutate clean

# Everything `make test` needs (scripts/bootstrap.sh): .venv with the dev and agents extras,
# tests/node_modules, the cookbook venvs in .deps/ and, when root, the egress tests' apt tools.
bootstrap:
	@bash scripts/bootstrap.sh

# Only what the demo needs: .venv with flowproof and the examples' SDKs (the `demo` extra),
# examples/node_modules where npm exists. One line per step; pip's and npm's logs in .venv/logs/.
bootstrap-demo:
	@bash scripts/bootstrap.sh demo

# Offline on purpose: no key and no upstream reach a replay; the agents find their SDKs in
# .venv, which comes first on PATH.
OFFLINE := env -u OPENAI_API_KEY -u ANTHROPIC_API_KEY -u FLOWPROOF_AGENT_KEY \
	-u FLOWPROOF_AGENT_UPSTREAM -u OPENAI_BASE_URL -u ANTHROPIC_BASE_URL \
	-u GOOGLE_GEMINI_BASE_URL -u GEMINI_API_KEY -u GOOGLE_API_KEY PATH="$(CURDIR)/$(VENV)/bin:$$PATH"

# The Node and Claude Code examples use tests/node_modules when `make test` filled it, else
# examples/node_modules (the demo's bootstrap fills it when npm is installed); without either
# those two flows report SKIP. Looked up when the recipe runs, after the bootstrap: on a fresh
# clone neither folder exists yet when make reads this file.
NODE_MODULES_IF_READY := $$(for d in tests examples; do \
	[ -x $$d/node_modules/.bin/claude ] && echo "$(CURDIR)/$$d/node_modules" && break; done)

# Byte-compiled once here, not by every flowproof process: an environment that sets
# PYTHONDONTWRITEBYTECODE (CI images often do) never caches a checkout's modules, and each
# process then compiles its ~160 modules again (about 0.3 s of every flow's start).
COMPILE := $(PY) -m compileall -q -j 0 -x '/(node_modules|\.deps)/' flowproof_cli addons flowproof

# pytest-xdist workers: one more than the cores. Each test spends part of its time waiting on
# the agents, servers and CLI runs it starts; a third worker on two cores keeps both busy
# (tests/README.md: the suite took 18.5 min at -n 3 against 23.2 min at -n 2, same machine).
TEST_WORKERS ?= $(shell echo $$(( $$(nproc) + 1 )))

# Two flows at once (each its own process and proxy; the verdicts keep their order).
demo: bootstrap-demo
	@$(COMPILE) >/dev/null
	@$(OFFLINE) EXAMPLES_NODE_MODULES="$(NODE_MODULES_IF_READY)" $(FLOWPROOF) run -j 2 examples/

# The test suite, then the project's own flows (specs/README.md) replayed from their traces.
test: bootstrap lint typecheck
	@$(COMPILE) tests benchmarks >/dev/null
	$(PY) -m pytest -n $(TEST_WORKERS) --dist worksteal -q --durations=25
	$(OFFLINE) $(FLOWPROOF) run specs/

# The long probes (marker `stress`) at their full counts: 100 kill moments, every exit point.
test-stress: bootstrap
	FLOWPROOF_KILL_CASES=100 FLOWPROOF_SILENT_GREEN_POINTS=1000 FLOWPROOF_COMMIT_CASES=20 \
		FLOWPROOF_SIDE_CALL_RUNS=20 FLOWPROOF_LOAD_PLACES=30 \
		$(PY) -m pytest -n $(TEST_WORKERS) --dist worksteal -q -m stress

test-quick: bootstrap
	$(PY) -m pytest -n $(TEST_WORKERS) --dist worksteal -q -m "not slow"

lint: bootstrap
	$(VENV)/bin/ruff check addons flowproof flowproof_cli tests examples benchmarks specs
	$(VENV)/bin/ruff format --check addons flowproof flowproof_cli tests examples benchmarks specs

typecheck: bootstrap
	$(VENV)/bin/mypy

# Every benchmark side by side in one run, one ratio table (docs/performance.md); its
# containment group runs benchmarks/egress.py in a fresh network namespace (unshare -n).
# FLOWPROOF_BENCH_QUICK=1 for a smoke run; `$(PY) benchmarks/run.py --only per-turn` for one group.
bench: bootstrap
	@$(COMPILE) benchmarks >/dev/null
	@$(OFFLINE) $(PY) benchmarks/run.py

# Mutation testing of the matching core, the assertion evaluator and the prose grammar
# ([tool.mutmut] in pyproject.toml; docs/falsifiability.md). A quarter of an hour or more on
# two cores, so never part of `make test`. A fresh run each time (mutmut keeps stale copies in
# mutants/); fails when a mutant survives that docs/falsifiability.md does not name as
# equivalent. mutmut copies all of tests/: its copy of tests/node_modules goes after the run.
MUTATE_CHILDREN ?= 2
mutate: bootstrap
	@$(PY) -c "import mutmut" 2>/dev/null || $(PY) -m pip install --quiet -e ".[mutate]"
	rm -rf mutants && mkdir mutants
	@echo "mutate: running mutmut ($(MUTATE_CHILDREN) workers, nice 19); log in mutants/run.log"
	@nice -n 19 $(VENV)/bin/mutmut run --max-children $(MUTATE_CHILDREN) > mutants/run.log 2>&1 \
		|| { tail -n 40 mutants/run.log; exit 1; }
	@rm -rf mutants/tests/node_modules
	@$(PY) scripts/mutation_report.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache mutants
