"""`results: [...]`: one mocked value per call, at the model boundary (every dialect) and the
MCP boundary, with a clear failure for a call beyond the list, and the trace's snapshot."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from typing import Any

import pytest
import yaml

from flowproof_cli.cassette.session import (
    MOCKS_EXHAUSTED_STATUS,
    CassetteSession,
    Forward,
    Upstream,
    mock_text,
)
from flowproof_cli.cassette.turn import Turn
from flowproof_cli.dialects import dialect_named
from flowproof_cli.dialects.base import ResultSequence, ResultsExhausted
from flowproof_cli.errors import SpecError, TraceError
from flowproof_cli.mcp.http import Reply
from flowproof_cli.mcp.http_record import HttpRecordSession
from flowproof_cli.mcp.lane import Lane
from flowproof_cli.mcp.mocks import mock_answer, schema_problems
from flowproof_cli.mcp.recorder import LaneRecorder
from flowproof_cli.mcp.replayer import Replayer
from flowproof_cli.mcp.stdio import StandinSession
from flowproof_cli.mode import Mode
from flowproof_cli.spec import parse_spec
from flowproof_cli.trace.envelope import Trace, from_document, to_document
from tests.conftest import run_cli

HEAD = "name: t\napp: agent\nagent:\n  command: run\n"
STEPS = "steps:\n  - prompt: go\n"
EXHAUSTED = (
    "tool `get_time` was called 3 times but its `results` lists 2. Fix: add a result for call 3 "
    "to `results`, or make the agent call `get_time` at most 2 time(s)"
)


def spec_with(tools: str) -> Any:
    return parse_spec(HEAD + textwrap.dedent(tools) + STEPS, "t.flow.yaml")


# --- the spec ---------------------------------------------------------------------------------


def test_results_become_a_sequence_distinct_from_a_list_result() -> None:
    spec = spec_with(
        "tools:\n  - name: get_time\n    results: [a, {b: 1}]\n  - name: l\n    result: [a]\n"
    )
    assert spec.mocks == {"get_time": ResultSequence(["a", {"b": 1}]), "l": ["a"]}
    assert isinstance(spec.mocks["get_time"], ResultSequence)
    assert ResultSequence(["a"]) != ["a"]
    assert {"t": ResultSequence(["a"])} != {"t": ["a"]}  # the reflected comparison too
    assert spec.tools[0].is_mocked
    dumped = spec.model_dump(by_alias=True, exclude_defaults=True)["tools"]
    assert dumped == [
        {"name": "get_time", "results": ["a", {"b": 1}]},
        {"name": "l", "result": ["a"]},
    ]


def test_mcp_tools_take_results_too() -> None:
    spec = spec_with(
        "mcp:\n  - name: files\n    command: srv\n    tools:\n      - name: read\n"
        "        results: [one, two]\n"
    )
    assert spec.mcp_mocks == {"files": {"read": ResultSequence(["one", "two"])}}


@pytest.mark.parametrize(
    ("tool", "line", "message"),
    [
        (
            "  - name: get_time\n    results: []\n",
            7,
            "`results` is empty, so no call of the tool could be answered. Fix: list at least one "
            "value, or remove `results` to declare the tool without mocking it",
        ),
        (
            "  - name: get_time\n    result: 1\n    results: [1]\n",
            8,
            "tool `get_time` has both `result` and `results`. Fix: keep `result` for one value "
            "every call gets, or `results` for one value per call",
        ),
        (
            "  - name: get_time\n    results: 1\n",
            7,
            "`results` must be a list of the values the tool returns call by call, got int.",
        ),
        (
            "  - name: get_time\n    results: null\n",
            7,
            "`results` must be a list of the values the tool returns call by call, got NoneType.",
        ),
        (
            "  - name: get_time\n    results: [1, !!set {a}]\n",
            7,
            "result 2 of `results` is not JSON (a YAML tag or a set?).",
        ),
        (
            "  - name: get_time\n    resutls: [1]\n",
            7,
            "unknown key `resutls` in `tools.0`. Did you mean `results`?",
        ),
    ],
)
def test_bad_results_name_the_line_and_the_fix(tool: str, line: int, message: str) -> None:
    with pytest.raises(SpecError) as caught:
        spec_with("tools:\n" + tool)
    assert caught.value.line == line, str(caught.value)
    assert message in caught.value.detail


def test_the_cli_exits_2_for_results_and_result_together(tmp_path: Path) -> None:
    path = tmp_path / "bad.flow.yaml"
    path.write_text(HEAD + "tools:\n  - name: get_time\n    result: 1\n    results: [1]\n" + STEPS)
    result = run_cli("run", path)
    assert result.code == 2, result.output
    assert f"{path}:8: tool `get_time` has both `result` and `results`. Fix:" in result.stderr


# --- the model boundary: the k-th result of the tool in the conversation ---------------------


def chat_body(results: int, name: str = "get_time") -> dict[str, Any]:
    messages: list[dict[str, Any]] = [{"role": "user", "content": "go"}]
    for k in range(results):
        call = {"id": f"c{k}", "type": "function", "function": {"name": name, "arguments": "{}"}}
        messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        messages.append({"role": "tool", "tool_call_id": f"c{k}", "content": "real"})
    return {"model": "m", "messages": messages}


def chat_results(body: dict[str, Any]) -> list[str]:
    return [m["content"] for m in body["messages"] if m["role"] == "tool"]


SEQUENCE = {"get_time": ("first", "second")}


def test_chat_results_are_answered_in_conversation_order() -> None:
    dialect = dialect_named("openai-chat")
    assert chat_results(dialect.apply_mocks(chat_body(1), SEQUENCE, {})) == ["first"]
    assert chat_results(dialect.apply_mocks(chat_body(2), SEQUENCE, {})) == ["first", "second"]
    other = chat_body(2, name="get_weather")
    assert chat_results(dialect.apply_mocks(other, SEQUENCE, {})) == ["real", "real"]
    with pytest.raises(ResultsExhausted) as caught:
        dialect.apply_mocks(chat_body(3), SEQUENCE, {})
    assert str(caught.value) == EXHAUSTED


def test_anthropic_results_in_order() -> None:
    messages: list[dict[str, Any]] = []
    for k in range(2):
        use = {"type": "tool_use", "id": f"t{k}", "name": "get_time", "input": {}}
        messages.append({"role": "assistant", "content": [use]})
        result = {"type": "tool_result", "tool_use_id": f"t{k}", "content": "real"}
        messages.append({"role": "user", "content": [result]})
    out = dialect_named("anthropic").apply_mocks({"messages": messages}, SEQUENCE, {})
    assert [m["content"][0]["content"] for m in out["messages"][1::2]] == ["first", "second"]


def test_gemini_results_by_name_in_order() -> None:
    contents = []
    for _ in range(2):
        contents.append({"role": "model", "parts": [{"functionCall": {"name": "get_time"}}]})
        answer = {"functionResponse": {"name": "get_time", "response": {"output": "real"}}}
        contents.append({"role": "user", "parts": [answer]})
    mocks = {"get_time": mock_text(ResultSequence(["09:00", {"at": 2}]))}
    assert mocks == {"get_time": ("09:00", '{"at":2}')}  # text as written, JSON otherwise
    out = dialect_named("gemini").apply_mocks({"contents": contents}, mocks, {})
    responses = [c["parts"][0]["functionResponse"]["response"] for c in out["contents"][1::2]]
    assert responses == [{"output": "09:00"}, {"at": 2}]


def test_a_responses_chain_counts_after_the_calls_of_earlier_responses() -> None:
    """`previous_response_id`: the request carries only the new output; its call was seen in
    an earlier response, so its number comes from the run's calls of that tool."""
    dialect = dialect_named("openai-responses")
    known = {"fc_1": "get_time", "fc_2": "get_time"}
    second = {"input": [{"type": "function_call_output", "call_id": "fc_2", "output": "x"}]}
    out = dialect.apply_mocks(second, SEQUENCE, known)
    assert out["input"][0]["output"] == "second"
    third = {"input": [{"type": "function_call_output", "call_id": "fc_3", "output": "x"}]}
    with pytest.raises(ResultsExhausted):
        dialect.apply_mocks(third, SEQUENCE, {**known, "fc_3": "get_time"})


def chat_response(call_id: str | None) -> bytes:
    message: dict[str, Any] = {"role": "assistant", "content": None if call_id else "done"}
    if call_id:
        function = {"name": "get_time", "arguments": "{}"}
        message["tool_calls"] = [{"id": call_id, "type": "function", "function": function}]
    choice = {"index": 0, "message": message, "finish_reason": "stop"}
    return json.dumps({"id": "r", "object": "chat.completion", "choices": [choice]}).encode()


PATH = "/v1/chat/completions"
MOCKS = {"get_time": ResultSequence(["first", {"n": 2}])}


def test_record_rewrites_each_request_and_refuses_the_third_result() -> None:
    session = CassetteSession(Mode.RECORD, mocks=MOCKS, upstream=Upstream("http://127.0.0.1:9/v1"))
    for results in (1, 2):
        forward = session.on_request(PATH, json.dumps(chat_body(results)).encode())
        assert isinstance(forward, Forward)
        assert chat_results(json.loads(forward.body))[-1] == ["first", '{"n":2}'][results - 1]
        session.on_upstream_response(forward.pending, 200, chat_response(f"c{results}"))
    refused = session.on_request(PATH, json.dumps(chat_body(3)).encode())
    assert not isinstance(refused, Forward)
    assert refused.status == MOCKS_EXHAUSTED_STATUS
    message = json.loads(refused.body)["error"]["message"]
    assert message == f"flowproof: {EXHAUSTED}"
    assert session.errors == [f"flowproof: {EXHAUSTED}"]
    assert len(session.recorded) == 2


def test_replay_matches_the_rewritten_requests_and_refuses_the_third_result() -> None:
    dialect = dialect_named("openai-chat")
    texts = {"get_time": ("first", '{"n":2}')}
    requests = [dialect.apply_mocks(chat_body(n), texts, {}) for n in (1, 2)]
    response = json.loads(chat_response("c1"))
    recorded = [Turn("openai-chat", dialect.canonical_request(r), 200, response) for r in requests]
    session = CassetteSession(Mode.REPLAY, mocks=MOCKS, recorded=recorded)
    for results in (1, 2):
        answer = session.on_request(PATH, json.dumps(chat_body(results)).encode())
        assert not isinstance(answer, Forward) and answer.status == 200, answer
    assert session.divergence is None
    refused = session.on_request(PATH, json.dumps(chat_body(3)).encode())
    assert not isinstance(refused, Forward) and refused.status == MOCKS_EXHAUSTED_STATUS
    assert session.errors == [f"flowproof: {EXHAUSTED}"]
    assert session.divergence is None  # a spec problem, reported as itself


# --- the trace's snapshot -------------------------------------------------------------------


def test_the_trace_snapshots_sequences_apart_and_reads_them_back() -> None:
    trace = Trace(flow="f", mocks={"get_time": ResultSequence([1, 2]), "w": [1, 2]})
    document = to_document(trace)
    assert document["mocks"] == {"w": [1, 2]}
    assert document["mock_results"] == {"get_time": [1, 2]}
    text = yaml.safe_dump(document)
    back = from_document(yaml.safe_load(text), "t.trace.yaml")
    assert back.mocks == trace.mocks
    assert isinstance(back.mocks["get_time"], ResultSequence)
    assert "mock_results" not in to_document(Trace(flow="f", mocks={"w": 1}))


def test_a_malformed_mock_results_section_is_a_trace_error() -> None:
    document = to_document(Trace(flow="f"))
    document["mock_results"] = {"get_time": "x"}
    with pytest.raises(TraceError, match="the mock_results section is malformed"):
        from_document(document, "t.trace.yaml")


# --- the MCP boundary: the k-th tools/call of the tool ---------------------------------------


def tools_call(request_id: int, tool: str = "read") -> dict[str, Any]:
    params = {"name": tool, "arguments": {}}
    return {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": params}


def first_text(answer: dict[str, Any] | None) -> str:
    assert answer is not None
    return str(answer["result"]["content"][0]["text"])


def test_mock_answer_walks_the_sequence_per_session() -> None:
    mocks = {"read": ResultSequence(["one", {"n": 2}])}
    counts: dict[str, int] = {}
    assert first_text(mock_answer(tools_call(1), mocks, None, counts)) == "one"
    assert first_text(mock_answer(tools_call(2), mocks, None, counts)) == '{"n":2}'
    with pytest.raises(
        ResultsExhausted, match=r"tool `read` was called 3 times but its `results` lists 2"
    ):
        mock_answer(tools_call(3), mocks, None, counts)


def test_the_replayer_refuses_a_call_beyond_the_list() -> None:
    recorder = LaneRecorder()
    for request_id in (1, 2):
        recorder.client(tools_call(request_id), mocked=True)
        recorder.server({"jsonrpc": "2.0", "id": request_id, "result": {}})
    recorder.client(tools_call(3))
    lane: Lane = recorder.lane
    replayer = Replayer("files", lane, mocks={"read": ResultSequence(["one", "two"])})
    assert first_text(replayer.receive(tools_call(1))[0].message) == "one"
    assert first_text(replayer.receive(tools_call(2))[0].message) == "two"
    (refused,) = replayer.receive(tools_call(3))
    assert (
        "tool `read` was called 3 times but its `results` lists 2"
        in refused.message["error"]["message"]
    )
    assert replayer.failures() and "tool `read` was called 3 times" in replayer.failures()[0]


def test_schema_problems_check_every_result() -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
    problems = schema_problems(
        "files", {"read": ResultSequence([{"n": 1}, {"n": "x"}])}, {"read": schema}
    )
    assert len(problems) == 1 and "the `result:` mock of `read`" in problems[0]


def test_the_standin_session_file_keeps_sequences(tmp_path: Path) -> None:
    session = StandinSession(
        server="files",
        mode=Mode.RECORD,
        capture=str(tmp_path / "c.jsonl"),
        mocks={"read": ResultSequence(["one"]), "list": ["a"]},
    )
    path = tmp_path / "s.json"
    session.write(path)
    back = StandinSession.read(path)
    assert back.mocks == session.mocks
    assert isinstance(back.mocks["read"], ResultSequence) and not isinstance(
        back.mocks["list"], ResultSequence
    )


def test_http_record_answers_call_by_call_and_fails_beyond_the_list() -> None:
    session = HttpRecordSession(
        "notes", url="http://real/mcp", mocks={"read": ResultSequence(["one"])}
    )
    first = session.on_request("POST", {}, json.dumps(tools_call(1)).encode())
    assert isinstance(first, Reply) and first_text(json.loads(first.body)) == "one"
    second = session.on_request("POST", {}, json.dumps(tools_call(2)).encode())
    assert isinstance(second, Reply)
    assert (
        "tool `read` was called 2 times but its `results` lists 1"
        in (json.loads(second.body)["error"]["message"])
    )
    assert session.errors == [
        "the MCP server 'notes': tool `read` was called 2 times but its `results` lists 1. Fix: "
        "add a result for call 2 to `results`, or make the agent call `read` at most 1 time(s)"
    ]
