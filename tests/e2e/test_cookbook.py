"""The wiring cookbook (docs/agents.md), tested with the real frameworks and CLI it shows.

Each agent and flow under tests/e2e/cookbook/ (eight Python frameworks, an Azure OpenAI
deployment through LiteLLM, a LlamaIndex RAG agent, the `ollama` client, Mastra on Node,
and aider) records against the scripted fake
upstream, replays with no upstream, and fails on an edited prompt; the committed traces
replay as they are. Every flowproof run here (fake upstream included) happens in a network
namespace with only loopback up, and every spec certifies `assert_no_egress` under
flowproof's own containment, so a framework that phones home fails instead of leaking.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from flowproof_cli import trace as traces
from tests.conftest import NODE_MODULES, REPO, CliResult, clean_environ
from tests.e2e.cookbook.fake_model import COOKBOOK, FRAMEWORKS, netns_argv

pytestmark = pytest.mark.slow

COOKBOOK_VENV = REPO / ".deps" / "cookbook"
#: aider pins its whole dependency tree, so it has a virtualenv of its own.
AIDER_VENV = REPO / ".deps" / "aider"
SPEC_NAME = "weather.flow.yaml"
TRACE_NAME = "weather.trace.yaml"
#: What each spec's `name:` starts with (the PASS line names the flow).
FLOW_NAMES = {
    "smolagents": "smolagents ToolCallingAgent",
    "litellm": "LiteLLM tool loop",
    "llamaindex": "LlamaIndex FunctionAgent",
    "crewai": "CrewAI crew",
    "llm": "llm CLI with a tool",
    "adk": "Google ADK agent",
    "adk-vertex": "Google ADK agent on Vertex AI",
    "autogen": "AutoGen AssistantAgent",
    "strands": "Strands agent reports",
    "strands-bedrock": "Strands agent on Amazon Bedrock",
    "mastra": "Mastra agent",
    "aider": "aider edits the forecast",
    "azure": "Azure OpenAI deployment through LiteLLM",
    "rag": "LlamaIndex RAG agent",
    "ollama": "Ollama chat with a tool",
}
#: The wire format each one speaks: OpenAI Chat Completions unless named here.
PROTOCOLS = {
    "adk": "gemini",
    "adk-vertex": "vertex-gemini",
    "mastra": "openai-responses",
    "azure": "azure-chat",
    "strands-bedrock": "bedrock-converse",
    "ollama": "ollama-chat",
}
#: The endpoints around chat each one calls too: the RAG agent embeds its corpus and queries.
ENDPOINTS = {"rag": {"openai-embeddings"}}
#: Which turn holds the task: the first, but the RAG agent's index embeds its corpus first.
TASK_TURN = {"rag": 2}
#: Which message of the first request holds the edited task: the one after the system
#: prompt (Gemini's systemInstruction and the Responses API's system item count as one),
#: the first for llm (no system prompt), the tenth for aider (after its example exchange
#: and the files of the chat).
TASK_MESSAGE = {"llm": 0, "aider": 9}


def _unavailable() -> str | None:
    """Why the cookbook cannot run here, or None."""
    for venv in (COOKBOOK_VENV, AIDER_VENV):
        if not (venv / ".stamp").is_file():
            return (
                f".deps/{venv.name} is missing or half-installed: scripts/bootstrap.sh "
                f"installs tests/{venv.name}-requirements.txt there"
            )
    if not (NODE_MODULES / "@mastra" / "core").is_dir():
        return "tests/node_modules has no @mastra/core: scripts/bootstrap.sh runs npm ci"
    from flowproof_cli.egress import unavailable_reason

    if (reason := unavailable_reason()) is not None:
        return f"the specs assert_no_egress, and containment is unavailable here: {reason}"
    if shutil.which("unshare") is None or shutil.which("ip") is None:
        return "`unshare` and `ip` are needed for a loopback-only network namespace"
    probe = subprocess.run(["unshare", "-n", "true"], capture_output=True, check=False)
    if probe.returncode != 0:
        return "cannot create a network namespace here (needs root)"
    return None


@pytest.fixture(scope="module")
def cookbook() -> None:
    if (reason := _unavailable()) is not None:
        pytest.skip(reason)


def project_copy(tmp_path: Path, *, with_venv: bool = True) -> Path:
    """The cookbook at the same depth in a fresh tree, `.deps`, `.venv` and `tests/node_modules`
    linked in: what a clean checkout at another path looks like to the suites' env_from
    and to Node's module resolution."""
    target = tmp_path / "tests" / "e2e" / "cookbook"
    shutil.copytree(
        COOKBOOK, target, ignore=shutil.ignore_patterns("__pycache__", ".flowproof", ".llm")
    )
    (tmp_path / "tests" / "node_modules").symlink_to(NODE_MODULES)
    if with_venv:
        (tmp_path / ".deps").symlink_to(REPO / ".deps")
        (tmp_path / ".venv").symlink_to(REPO / ".venv")  # the Ollama agent's `ollama`
    return target


def in_netns(*args: str | Path, timeout: float = 240) -> CliResult:
    """`python ARGS` inside a new network namespace with only loopback up."""
    completed = subprocess.run(
        netns_argv([sys.executable, *map(str, args)]),
        env=clean_environ(),
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    return CliResult(completed.returncode, completed.stdout, completed.stderr)


def record(spec: Path) -> CliResult:
    return in_netns("-m", "tests.e2e.cookbook.fake_model", "record", spec)


def replay(target: Path) -> CliResult:
    return in_netns("-m", "flowproof_cli", "run", target)


def edit_spec(spec: Path, old: str, new: str) -> None:
    text = spec.read_text()
    assert old in text, f"{spec} has no {old!r}"
    spec.write_text(text.replace(old, new))


@pytest.mark.egress
@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_records_replays_offline_and_diverges_on_an_edited_prompt(
    cookbook: None, tmp_path: Path, framework: str
) -> None:
    folder = project_copy(tmp_path) / framework
    spec, trace = folder / SPEC_NAME, folder / TRACE_NAME
    trace.unlink()

    recorded = record(spec)
    assert recorded.code == 0, recorded.output
    assert recorded.stdout.startswith(f"PASS: {FLOW_NAMES[framework]}"), recorded.output
    turns = traces.load(trace).turns
    assert len(turns) >= (1 if framework == "aider" else 2)  # aider edits in one answer
    protocols = {PROTOCOLS.get(framework, "openai-chat"), *ENDPOINTS.get(framework, ())}
    assert {turn.protocol for turn in turns} == protocols
    assert "sk-cookbook" not in trace.read_text()  # the record key stays out of the trace

    # The fake upstream is gone: the edited prompt replays against the fresh trace and fails
    # at its turn. Each framework's whole replay, contained, is the committed traces' test.
    edit_spec(spec, "in Nairobi right now", "in Paris right now")
    diverged = replay(spec)
    assert diverged.code == 1, diverged.output
    message = TASK_MESSAGE.get(framework, 1)
    turn = TASK_TURN.get(framework, 1)
    assert f"divergence at turn {turn}: message {message} (user) content changed" in diverged.stdout
    assert "Paris" in diverged.stdout and "Nairobi" in diverged.stdout


@pytest.mark.egress
def test_committed_traces_replay_from_a_clean_checkout(cookbook: None, tmp_path: Path) -> None:
    """Every framework's flow replays with no upstream, its egress contained: the traces the
    docs show, and the replay half of each framework's record-and-replay test above."""
    result = in_netns("-m", "flowproof_cli", "run", "--verbose", project_copy(tmp_path))
    assert result.code == 0, result.output
    assert f"{len(FLOW_NAMES)} passed, 0 failed, 0 skipped" in result.stdout
    for name in FLOW_NAMES.values():
        assert f"PASS: {name}" in result.stdout
    assert result.stdout.count("egress containment: enforced") == len(FLOW_NAMES), result.stdout


@pytest.mark.egress
def test_an_edited_corpus_document_diverges_at_its_embedding(
    cookbook: None, tmp_path: Path
) -> None:
    """The RAG agent's index embeds every report of its corpus first: an edited report is a
    changed embedding input, and replay names the report's text before any chat call."""
    folder = project_copy(tmp_path) / "rag"
    report = folder / "corpus" / "nairobi.txt"
    report.write_text(report.read_text().replace("highs near 24 C", "highs near 31 C"))
    diverged = replay(folder / SPEC_NAME)
    assert diverged.code == 1, diverged.output
    assert "divergence at turn 1: the openai-embeddings `input` content changed" in diverged.stdout
    assert "content.1: differs at char" in diverged.stdout  # the second report, nairobi.txt
    assert "highs near 24 C" in diverged.stdout and "highs near 31 C" in diverged.stdout


def _resolver_is_off_host() -> bool:
    """Containment exempts a loopback resolver, so a blocked lookup shows only without one."""
    try:
        lines = Path("/etc/resolv.conf").read_text().splitlines()
    except OSError:
        return False
    servers = [line.split()[1] for line in lines if line.startswith("nameserver ")]
    return any(not server.startswith(("127.", "::1")) for server in servers)


@pytest.mark.egress
@pytest.mark.parametrize(
    ("framework", "switches", "home_host"),
    [
        ("litellm", ["LITELLM_LOCAL_MODEL_COST_MAP"], "raw.githubusercontent.com"),
        ("crewai", ["CREWAI_DISABLE_TELEMETRY", "OTEL_SDK_DISABLED"], "crewai.com"),
    ],
)
def test_without_its_switches_a_framework_phones_home_and_fails(
    cookbook: None, tmp_path: Path, framework: str, switches: list[str], home_host: str
) -> None:
    """The specs' telemetry switches are what keeps them on loopback: without them the
    framework looks up its home host, which containment refuses and reports."""
    if not _resolver_is_off_host():
        pytest.skip("this machine's resolver is on loopback, which containment exempts")
    spec = project_copy(tmp_path) / framework / SPEC_NAME
    document = yaml.safe_load(spec.read_text())
    for name in switches:
        del document["agent"]["env"][name]
    spec.write_text(yaml.safe_dump(document, sort_keys=False))

    result = replay(spec)
    assert result.code == 1, result.output
    assert "- assert_no_egress: the agent attempted" in result.stdout
    # the lookup of the framework's home host, named with the resolver it was sent to
    names = re.findall(r"dns ([\w.-]+)[^(]*\(udp [0-9.]+:53, connect at", result.stdout)
    assert any(name.endswith(home_host) for name in names), result.stdout


def test_a_missing_cookbook_venv_stops_the_run_naming_the_fix(tmp_path: Path) -> None:
    """No agent starts (nothing to contain): the suite's env_from fails first, exit 2."""
    spec = project_copy(tmp_path, with_venv=False) / "llm" / SPEC_NAME
    result = in_netns("-m", "flowproof_cli", "run", spec, timeout=60)
    assert result.code == 2, result.output
    assert "env_from command `sh venv-path.sh` exited with code 1" in result.output
    assert ".deps/cookbook/bin/python is missing. Fix: run scripts/bootstrap.sh" in result.output


def test_without_the_venv_the_tests_skip_naming_the_bootstrap(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(sys.modules[__name__], "COOKBOOK_VENV", tmp_path / "cookbook")
    reason = _unavailable()
    assert reason is not None
    assert ".deps/cookbook is missing" in reason and "scripts/bootstrap.sh" in reason
