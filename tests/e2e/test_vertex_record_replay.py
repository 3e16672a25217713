"""Vertex AI through its real clients: google-genai (`vertexai=True`) and anthropic's
`AnthropicVertex`, each plain and streamed. Record against the fake Vertex endpoint (which
accepts only the OAuth bearer it was made with) through FLOWPROOF_UPSTREAM_VERTEX alone,
stop it, replay offline twice; the agent starts on flowproof's placeholder credentials and
injected base URLs, with nothing Vertex-specific in the spec but its project and region."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from flowproof_cli import trace as traces
from tests.conftest import REPO, CliResult, clean_environ, run_cli
from tests.e2e.cookbook.fake_model import netns_argv
from tests.e2e.flows import AGENTS, set_agent_env, write_flow
from tests.fakes.vertex_upstream import VertexUpstream

pytestmark = pytest.mark.slow

pytest.importorskip("google.genai")
pytest.importorskip("anthropic.lib.vertex")

TOKEN = "ya29.vertex-record-token-7f3a"
GENAI = "py_vertex_genai.py"
CLAUDE = "py_anthropic_vertex.py"
#: The agent's own Vertex configuration (its project and region), as its code reads it.
AGENT_ENV = {
    "AGENT_PROJECT": "proj-a",
    "AGENT_LOCATION": "us-central1",
    "ANTHROPIC_VERTEX_PROJECT_ID": "proj-a",
    "CLOUD_ML_REGION": "us-east5",
}
PLAIN_PATHS = {
    GENAI: (
        "/v1beta1/projects/proj-a/locations/us-central1/publishers/google/models/"
        "gemini-2.5-flash:generateContent"
    ),
    CLAUDE: (
        "/v1/projects/proj-a/locations/us-east5/publishers/anthropic/models/"
        "claude-sonnet-4@20250514:rawPredict"
    ),
}
PROTOCOLS = {GENAI: "vertex-gemini", CLAUDE: "vertex-anthropic"}


def flow_for(folder: Path, script: str, stream: bool, **env: str) -> Path:
    agent_env = {**AGENT_ENV, "AGENT_STREAM": "1" if stream else "0", **env}
    return write_flow(folder, command=f"{sys.executable} {AGENTS / script}", env=agent_env)


def record(spec: Path, fake: VertexUpstream, key: str = TOKEN) -> tuple[int, str]:
    result = run_cli(
        "record",
        spec,
        env={"FLOWPROOF_UPSTREAM_VERTEX": fake.base_url, "FLOWPROOF_KEY_VERTEX": key},
    )
    return result.code, result.output


@pytest.mark.parametrize("stream", [False, True], ids=["plain", "streamed"])
@pytest.mark.parametrize("script", [GENAI, CLAUDE])
def test_records_through_the_vertex_upstream_and_replays_offline_twice(
    tmp_path: Path, script: str, stream: bool
) -> None:
    spec = flow_for(tmp_path, script, stream)
    with VertexUpstream(token=TOKEN) as fake:
        code, output = record(spec, fake)
    assert code == 0, output
    assert TOKEN not in output

    upstream = fake.model_requests()
    assert len(upstream) == 2
    for request in upstream:  # record asks for the plain answer, with the bearer only
        assert request.path == PLAIN_PATHS[script]
        assert request.headers["authorization"] == f"Bearer {TOKEN}"
        assert "x-goog-api-key" not in request.headers and "x-api-key" not in request.headers
        assert not {"model", "project", "location", "stream"} & set(request.body)

    trace_file = spec.with_name("weather.trace.yaml")
    trace = traces.load(trace_file)
    assert [turn.protocol for turn in trace.turns] == [PROTOCOLS[script]] * 2
    assert all(turn.request["project"] == "proj-a" for turn in trace.turns)
    text = trace_file.read_text()
    assert TOKEN not in text and "PRIVATE KEY" not in text

    for _ in range(2):  # the fake is stopped: replay must need nothing
        result = run_cli("run", spec)
        assert result.code == 0, result.output
        assert result.stdout.startswith("PASS: weather flow")
    if not stream:  # the stream is synthesized: a plain recording serves a streaming client
        flow_for(tmp_path, script, stream=True)
        result = run_cli("run", spec)
        assert result.code == 0, result.output


# -- red paths -------------------------------------------------------------------------------


def test_a_wrong_token_fails_the_record_with_vertex_s_own_error(tmp_path: Path) -> None:
    spec = flow_for(tmp_path, GENAI, stream=False)
    with VertexUpstream(token=TOKEN) as fake:
        code, output = record(spec, fake, key="ya29.some-other-token-0000")
    assert code == 1, output
    assert "the upstream model answered turn 1 with HTTP 401" in output
    assert "Request had invalid authentication credentials" in output
    assert not spec.with_name("weather.trace.yaml").exists()


def test_no_vertex_upstream_fails_the_record_naming_the_variable(tmp_path: Path) -> None:
    spec = flow_for(tmp_path, CLAUDE, stream=False)
    with VertexUpstream(token=TOKEN) as fake:
        result = run_cli("record", spec, env={"FLOWPROOF_UPSTREAM_OPENAI": fake.base_url})
    assert result.code == 1, result.output
    assert "record has no upstream for vertex requests: set FLOWPROOF_UPSTREAM_VERTEX" in (
        result.output
    )
    assert fake.model_requests() == []


def test_google_genai_vertex_from_the_environment_alone_is_told_how_to_fix_it(
    tmp_path: Path,
) -> None:
    """google-genai drops the path when the project comes only from the environment: the
    flow fails, and the agent's error says what to pass in code."""
    spec = write_flow(
        tmp_path,
        command=f"{sys.executable} {AGENTS / 'py_vertex_genai_env_only.py'}",
        env={
            "GOOGLE_GENAI_USE_VERTEXAI": "true",
            "GOOGLE_CLOUD_PROJECT": "proj-a",
            "GOOGLE_CLOUD_LOCATION": "us-central1",
        },
        steps=[{"prompt": "hi"}, {"assert": "reply contains hi"}],
        tools=[],
    )
    with VertexUpstream(token=TOKEN) as fake:
        code, output = record(spec, fake)
    assert code == 1, output
    assert "POST / is not a model endpoint flowproof records" in output
    assert "genai.Client(vertexai=True, project=..., location=...)" in output
    assert fake.model_requests() == []


# -- a real coding CLI: Claude Code on Vertex (CLAUDE_CODE_USE_VERTEX) -----------------------

CLAUDE_CODE = REPO / "tests" / "node_modules" / ".bin" / "claude"


def _in_loopback_namespace(*args: str, cwd: Path, home: Path) -> CliResult:
    """`python ARGS` in a new network namespace with only loopback up (Claude Code phones
    home otherwise), HOME the same at record and replay."""
    completed = subprocess.run(
        netns_argv([sys.executable, *args]),
        env={**clean_environ(), "HOME": str(home), "PATH": f"{CLAUDE_CODE.parent}:/usr/bin:/bin"},
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    return CliResult(completed.returncode, completed.stdout, completed.stderr)


def test_claude_code_on_vertex_records_and_replays_in_a_loopback_namespace(
    tmp_path: Path,
) -> None:
    """Claude Code with CLAUDE_CODE_USE_VERTEX reads ANTHROPIC_VERTEX_BASE_URL and signs in
    with the placeholder credentials (google-auth-library); its `claude-code` preset holds.

    On Vertex, Claude Code first probes three models (`max_tokens: 1`): those three turns
    outnumber the two of the task, and `reply` used to read a probe's answer. A probe never
    stands for the conversation now, so the flow's `assert: reply contains pelican` holds."""
    if not CLAUDE_CODE.exists():
        pytest.skip("tests/node_modules has no Claude Code: scripts/bootstrap.sh runs npm ci")
    if subprocess.run(["unshare", "-n", "true"], capture_output=True, check=False).returncode:
        pytest.skip("cannot create a network namespace here (needs root)")
    project, home = tmp_path / "app", tmp_path / "home"
    shutil.copytree(REPO / "tests" / "e2e" / "cli_agents" / "claude-code", project)
    home.mkdir()
    spec = project / "read-notes.flow.yaml"
    set_agent_env(
        spec,
        CLAUDE_CODE_USE_VERTEX="1",
        ANTHROPIC_VERTEX_PROJECT_ID="proj-a",
        CLOUD_ML_REGION="us-east5",
    )
    recorded = _in_loopback_namespace(
        "-m",
        "tests.fakes.vertex_upstream",
        "record",
        str(spec),
        "claude-code",
        cwd=REPO,
        home=home,
    )
    assert recorded.code == 0, recorded.output
    trace = traces.load(spec.with_name("read-notes.trace.yaml"))
    assert {turn.protocol for turn in trace.turns} == {"vertex-anthropic"}
    assert {turn.request["project"] for turn in trace.turns} == {"proj-a"}
    probes = [turn for turn in trace.turns if turn.request.get("max_tokens") == 1]
    assert len(probes) == 3 and len(trace.turns) - len(probes) < len(probes)  # outnumbered
    for _ in range(2):  # no upstream inside the namespace now: replay needs nothing
        replayed = _in_loopback_namespace(
            "-m", "flowproof_cli", "run", str(spec), cwd=REPO, home=home
        )
        assert replayed.code == 0, replayed.output
        assert replayed.stdout.startswith("PASS: Claude Code reads the notes")
