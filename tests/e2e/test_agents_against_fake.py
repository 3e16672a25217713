"""Every real agent in tests/e2e/agents/ against the fake model upstream (no flowproof).

Proves each agent (real SDK or framework, real tool loop) talks its dialect to whatever the
environment points it at, so the flowproof end-to-end tests can rely on them: the agent
exits 0 with the weather answer, the fake saw >= 2 model calls in the expected dialect, and
streamed agents really asked for a stream.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import REPO, clean_environ
from tests.fakes.fake_upstream import (
    DIALECT_ANTHROPIC,
    DIALECT_CHAT,
    DIALECT_RESPONSES,
    FakeUpstream,
    RecordedRequest,
)
from tests.namespace_run import run_captured

pytestmark = pytest.mark.slow

AGENTS = Path(__file__).resolve().parent / "agents"
NODE_MODULES = REPO / "tests" / "node_modules"
PROMPT = "What's the weather in Nairobi right now?"


@dataclass(frozen=True)
class AgentCase:
    script: str
    dialect: str
    stream: bool

    @property
    def is_node(self) -> bool:
        return self.script.endswith(".mjs")


CASES = [
    AgentCase("py_openai_chat.py", DIALECT_CHAT, stream=False),
    AgentCase("py_openai_chat_stream.py", DIALECT_CHAT, stream=True),
    AgentCase("py_openai_responses.py", DIALECT_RESPONSES, stream=False),
    AgentCase("py_openai_responses_stream.py", DIALECT_RESPONSES, stream=True),
    AgentCase("py_anthropic.py", DIALECT_ANTHROPIC, stream=False),
    AgentCase("py_anthropic_stream.py", DIALECT_ANTHROPIC, stream=True),
    AgentCase("py_openai_agents.py", DIALECT_RESPONSES, stream=False),
    AgentCase("py_openai_agents_stream.py", DIALECT_RESPONSES, stream=True),
    AgentCase("py_langchain.py", DIALECT_CHAT, stream=False),
    AgentCase("py_pydantic_ai_responses.py", DIALECT_RESPONSES, stream=False),
    AgentCase("py_pydantic_ai_chat.py", DIALECT_CHAT, stream=False),
    AgentCase("py_goose_like.py", DIALECT_CHAT, stream=False),
    AgentCase("node_openai_chat_stream.mjs", DIALECT_CHAT, stream=True),
    AgentCase("node_anthropic_stream.mjs", DIALECT_ANTHROPIC, stream=True),
    AgentCase("node_ai_sdk_openai.mjs", DIALECT_RESPONSES, stream=False),
    AgentCase("node_ai_sdk_anthropic.mjs", DIALECT_ANTHROPIC, stream=False),
]


def agent_argv(case: AgentCase) -> list[str]:
    if not case.is_node:
        return [sys.executable, str(AGENTS / case.script)]
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not on PATH: the Node agents need Node.js >= 20")
    if not NODE_MODULES.is_dir():
        pytest.skip("tests/node_modules is missing: run `npm ci` in tests/ (make bootstrap does)")
    return [node, str(AGENTS / case.script)]


def run_agent(case: AgentCase, fake: FakeUpstream) -> subprocess.CompletedProcess[str]:
    argv = agent_argv(case)
    environ = clean_environ(
        {
            "OPENAI_BASE_URL": f"{fake.base_url}/v1",
            # The AI SDK's Anthropic provider wants the base WITH /v1, the Anthropic SDKs without.
            "ANTHROPIC_BASE_URL": fake.base_url + ("/v1" if "ai_sdk" in case.script else ""),
            "OPENAI_API_KEY": "sk-placeholder",
            "ANTHROPIC_API_KEY": "sk-ant-placeholder",
            "OPENAI_AGENTS_DISABLE_TRACING": "1",
            "FLOWPROOF_PROMPT": PROMPT,
        }
    )
    for leaking in ("OPENAI_API_BASE", "ANTHROPIC_API_URL", "ANTHROPIC_AUTH_TOKEN"):
        environ.pop(leaking, None)
    return run_captured(argv, timeout=120, env=environ)


def has_tool_result(request: RecordedRequest) -> bool:
    body = request.body
    if request.dialect == DIALECT_CHAT:
        return any(m.get("role") == "tool" for m in body.get("messages", []))
    if request.dialect == DIALECT_RESPONSES:
        items = body.get("input")
        return isinstance(items, list) and any(
            isinstance(i, dict) and i.get("type") == "function_call_output" for i in items
        )
    return any(
        isinstance(block, dict) and block.get("type") == "tool_result"
        for message in body.get("messages", [])
        if isinstance(message.get("content"), list)
        for block in message["content"]
    )


def offered_tools(request: RecordedRequest) -> set[str]:
    names = set()
    for spec in request.body.get("tools") or []:
        function = spec.get("function") if isinstance(spec.get("function"), dict) else spec
        names.add(function.get("name"))
    return names


def is_title_call(request: RecordedRequest) -> bool:
    messages = request.body.get("messages", [])
    return any(m.get("role") == "system" and "title" in str(m.get("content")) for m in messages)


@pytest.mark.parametrize("case", CASES, ids=[c.script for c in CASES])
def test_agent_runs_its_tool_loop_against_the_fake(case: AgentCase) -> None:
    with FakeUpstream() as fake:
        done = run_agent(case, fake)
        requests = fake.model_requests()
        others = [r for r in fake.requests if r.dialect is None]

    assert done.returncode == 0, f"exit {done.returncode}\n{done.stdout}\n{done.stderr}"
    assert "sunny" in done.stdout, done.stdout + done.stderr
    assert "Nairobi" in done.stdout, done.stdout + done.stderr
    assert not others, [(r.method, r.path) for r in others]

    assert len(requests) >= 2, [r.path for r in requests]
    assert {r.dialect for r in requests} == {case.dialect}, [r.path for r in requests]
    for request in requests:
        assert (request.body.get("stream") is True) == case.stream, (request.path, request.body)
        if case.dialect == DIALECT_ANTHROPIC:
            # Every client (the Vercel one included) must end up on the real path.
            assert request.path.split("?")[0] == "/v1/messages", request.path
        else:
            assert request.path.startswith("/v1/"), request.path

    main = [r for r in requests if not is_title_call(r)]
    assert all({"get_weather", "get_time"} <= offered_tools(r) for r in main), [
        offered_tools(r) for r in main
    ]
    assert not has_tool_result(main[0])
    assert has_tool_result(main[-1])

    if case.script == "py_openai_chat_stream.py" or case.script.startswith("node_openai_chat"):
        assert all(r.body["stream_options"] == {"include_usage": True} for r in requests)
    if case.script == "py_openai_responses_stream.py":
        # previous_response_id chaining: the follow-up carries only the new tool output.
        assert "previous_response_id" not in main[0].body
        follow_up = main[-1].body
        assert str(follow_up.get("previous_response_id", "")).startswith("resp_")
        assert [i["type"] for i in follow_up["input"]] == ["function_call_output"]
    if case.script == "py_openai_responses.py":
        # Full-history style: the follow-up resends the user turn and the function_call.
        follow_up = main[-1].body
        assert "previous_response_id" not in follow_up
        kinds = [i.get("type", "message") for i in follow_up["input"]]
        assert kinds == ["message", "function_call", "function_call_output"], kinds
    if case.script == "py_goose_like.py":
        titles = [r for r in requests if is_title_call(r)]
        assert len(titles) == 1, [r.body for r in requests]
        assert not titles[0].body.get("tools")
        assert len(main) >= 2
        assert not any(is_title_call(r) for r in main)
