"""Faults on purpose with the real SDKs and their default retries: each fault applied at
record and at replay alike (the upstream model is the only fake), what each client does with
it, and the red path of each."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import REPO, CliResult, run_cli
from tests.e2e.flows import AGENTS, replay_fails, write_flow
from tests.fakes.fake_upstream import FakeUpstream

pytestmark = pytest.mark.slow

FAULT_AGENTS = Path(__file__).resolve().parent / "fault_agents"
#: The SDK agents of the other tests, with their SDK's own retries (AGENT_RETRIES=default).
DEFAULT_RETRIES = {"AGENT_RETRIES": "default"}
PROMPT = "What's the weather in Nairobi right now? Use both tools."
WEATHER = [
    {"prompt": PROMPT},
    {"assert_tool_call": "get_weather where city equals Nairobi"},
    {"assert": "reply contains sunny"},
]


def dying_steps(said: str, *more: str) -> list[dict[str, str]]:
    """The steps of an agent the fault kills: the prompt, exit 1, `said` in its output, and
    `more` assertions."""
    return [
        {"prompt": PROMPT},
        {"assert": "exit code equals 1"},
        {"assert": f"output contains {said}"},
        *({"assert": text} for text in more),
    ]


ANTHROPIC_ENV = {"ANTHROPIC_BASE_URL": "${flowproof.proxy_url}", **DEFAULT_RETRIES}


def command(script: str) -> str:
    path = FAULT_AGENTS / script if (FAULT_AGENTS / script).exists() else AGENTS / script
    if script.endswith(".mjs"):
        if not (REPO / "tests" / "node_modules").exists() or shutil.which("node") is None:
            pytest.skip("Node agents need `npm ci` in tests/ (make test runs it) and node on PATH")
        return f"node {path}"
    return f"{sys.executable} {path}"


def faulted_flow(
    folder: Path,
    script: str,
    faults: list[dict[str, Any]],
    steps: list[dict[str, Any]] | None = None,
    **env: str,
) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    return write_flow(
        folder,
        command=command(script),
        env=env,
        steps=steps or WEATHER,
        faults=faults,
    )


def record(spec: Path) -> CliResult:
    with FakeUpstream() as fake:
        return run_cli(
            "record",
            spec,
            env={"FLOWPROOF_AGENT_UPSTREAM": f"{fake.base_url}/v1", "FLOWPROOF_AGENT_KEY": "sk-x"},
        )


def trace_of(spec: Path) -> dict[str, Any]:
    return yaml.safe_load(spec.with_name(spec.name.replace(".flow", ".trace")).read_text())


def edit(spec: Path, **changes: Any) -> None:
    document = yaml.safe_load(spec.read_text())
    for key, value in changes.items():
        if key == "env":
            document["agent"]["env"].update(value)
        else:
            document[key] = value
    spec.write_text(yaml.safe_dump(document, sort_keys=False))


def recorded_and_replayed(spec: Path) -> CliResult:
    recorded = record(spec)
    assert recorded.code == 0, recorded.output
    replayed = run_cli("run", spec)
    assert replayed.code == 0, replayed.output
    return replayed


RATE_LIMITED = [
    {"at": "model call 1", "answer": 429, "retry_after": 0.1},
    {"at": "model call 2", "answer": 500},
]


def fails_after(spec: Path, *said: str, **change: Any) -> None:
    """The flow edited as `change` says (`edit`): its replay fails, saying each of `said`."""
    edit(spec, **change)
    replay_fails(spec, *said, stream="output")


def test_openai_python_absorbs_a_429_and_a_500_and_each_travels_in_the_trace(
    tmp_path: Path,
) -> None:
    steps = [*WEATHER, {"assert": "model calls equals 4"}]
    spec = faulted_flow(tmp_path, "py_openai_resilient.py", RATE_LIMITED, steps)
    recorded_and_replayed(spec)
    trace = trace_of(spec)
    assert [turn.get("fault") for turn in trace["turns"]] == [
        "model call 1: answer: 429, retry_after: 0.1",
        "model call 2: answer: 500",
    ]
    assert [turn["response"]["status"] for turn in trace["turns"]] == [200, 200]
    assert trace["faults"][0] == {
        "at": "model call 1",
        "kind": "answer",
        "value": 429,
        "retry_after": 0.1,
    }
    # Red: the same agent without retries dies on the 429 it absorbed before.
    fails_after(spec, "RateLimitError", "Rate limit reached", env={"AGENT_RETRIES": "0"})


def test_openai_node_absorbs_a_429_and_a_500(tmp_path: Path) -> None:
    steps = [*WEATHER, {"assert": "model calls equals 4"}]
    spec = faulted_flow(
        tmp_path, "node_openai_chat_stream.mjs", RATE_LIMITED, steps, **DEFAULT_RETRIES
    )
    recorded_and_replayed(spec)
    # Red: the count of requests is what the SDK really sent, retries included.
    fails_after(spec, "model calls", "4", steps=[*WEATHER, {"assert": "model calls equals 2"}])


def test_anthropic_absorbs_an_overloaded_529(tmp_path: Path) -> None:
    faults = [{"at": "model call 1", "answer": 529}]
    spec = faulted_flow(tmp_path, "py_anthropic.py", faults, **ANTHROPIC_ENV)
    recorded_and_replayed(spec)
    assert trace_of(spec)["turns"][0]["fault"] == "model call 1: answer: 529"
    # Red: a trace recorded with one fault cannot judge a spec with another.
    edit(spec, faults=[{"at": "model call 1", "answer": 429}])
    refused = run_cli("run", spec)
    assert refused.code == 2, refused.output
    assert "recorded with other faults than the spec's" in refused.output
    assert "model call 1: answer: 529" in refused.output and "re-record" in refused.output


def test_google_genai_retries_nothing_by_default_and_absorbs_with_retry_options(
    tmp_path: Path,
) -> None:
    faults = [{"at": "model call 1", "answer": 429, "retry_after": 0.1}]
    dies = dying_steps("RESOURCE_EXHAUSTED", "model calls equals 1")
    spec = faulted_flow(tmp_path / "default", "py_google_genai.py", faults, dies)
    recorded_and_replayed(spec)  # the error path itself is the flow, and it passes
    # Red: the same flow asserting the agent came through fails, naming the exit code.
    fails_after(
        spec, "exit code", "1", steps=[{"prompt": PROMPT}, {"assert": "exit code equals 0"}]
    )
    retrying = faulted_flow(
        tmp_path / "retrying", "py_google_genai.py", faults, GENAI_RETRY_ATTEMPTS="3"
    )
    recorded_and_replayed(retrying)


def test_vercel_ai_absorbs_a_429(tmp_path: Path) -> None:
    faults = [{"at": "model call 1", "answer": 429, "retry_after": 0.1}]
    spec = faulted_flow(tmp_path, "node_ai_sdk_openai.mjs", faults, **DEFAULT_RETRIES)
    recorded_and_replayed(spec)
    # Red: the retry is a request of its own; a flow counting one request per call fails.
    fails_after(spec, "model calls", "3", steps=[*WEATHER, {"assert": "model calls at most 2"}])


def test_a_reset_connection_is_retried_by_the_sdk(tmp_path: Path) -> None:
    faults = [{"at": "model call 2", "connection": "reset"}]
    spec = faulted_flow(tmp_path, "py_openai_resilient.py", faults)
    recorded_and_replayed(spec)
    # Red: without retries the same reset ends the agent.
    fails_after(spec, "APIConnectionError", env={"AGENT_RETRIES": "0"})


def test_an_agent_that_retries_a_cut_stream_passes_and_one_that_accepts_it_fails(
    tmp_path: Path,
) -> None:
    faults = [{"at": "model call 1", "stream": "cut after 1 chunks"}]
    retrying = faulted_flow(
        tmp_path / "retry", "py_openai_resilient.py", faults, AGENT_STREAM="1", ON_CUT="retry"
    )
    recorded_and_replayed(retrying)
    accepting = faulted_flow(
        tmp_path / "accept", "py_openai_resilient.py", faults, AGENT_STREAM="1", ON_CUT="accept"
    )
    failed = record(accepting)  # it takes the cut stream for the answer: no tool, no reply
    assert failed.code == 1, failed.output
    assert "get_weather" in failed.output and "no trace written" in failed.output


def test_a_stream_error_event_is_an_error_to_the_sdk_not_a_success(tmp_path: Path) -> None:
    faults = [{"at": "model call 1", "stream": "error event after 1 chunks"}]
    steps = dying_steps("The stream failed")
    spec = faulted_flow(tmp_path, "py_openai_resilient.py", faults, steps, AGENT_STREAM="1")
    recorded_and_replayed(spec)


def test_a_delay_beyond_the_clients_timeout(tmp_path: Path) -> None:
    faults = [{"at": "model call 1", "delay": 3}]
    steps = [*WEATHER, {"assert": "model calls equals 3"}]
    spec = faulted_flow(
        tmp_path / "retries", "py_openai_resilient.py", faults, steps, AGENT_TIMEOUT="1"
    )
    recorded_and_replayed(spec)  # timed out after 1 s, retried, served at once
    dies = dying_steps("APITimeoutError")
    no_retry = faulted_flow(
        tmp_path / "none",
        "py_openai_resilient.py",
        faults,
        dies,
        AGENT_TIMEOUT="1",
        AGENT_RETRIES="0",
    )
    recorded_and_replayed(no_retry)


def test_a_malformed_unknown_tool_crashes_an_agent_that_trusts_the_model(tmp_path: Path) -> None:
    faults = [{"at": "model call 1", "malformed": "unknown_tool"}]
    steps = dying_steps("unknown tool 'flowproof_unknown_tool'")
    spec = faulted_flow(tmp_path, "py_openai_resilient.py", faults, steps)
    recorded_and_replayed(spec)


def test_a_fault_whose_call_never_came_fails_the_flow_naming_it(tmp_path: Path) -> None:
    faults = [{"at": "model call 9", "answer": 429}]
    spec = faulted_flow(tmp_path, "py_openai_resilient.py", faults)
    failed = record(spec)
    assert failed.code == 1, failed.output
    assert "the fault `model call 9: answer: 429` never applied" in failed.output
    assert "2 distinct model call(s)" in failed.output
