"""Model faults in the session: the faulted call answered at record and at replay alike,
its identical retry answered by the recording, one turn per call kept."""

from __future__ import annotations

import json
from typing import Any

from flowproof_cli.cassette import CassetteSession, Forward, Mode, Turn, Upstream
from flowproof_cli.dialects import Rendered
from flowproof_cli.faults.model_calls import ModelCalls
from flowproof_cli.faults.plan import CallAt, Fault
from tests.unit.test_cassette_matching import PATH, reply, request
from tests.unit.trace_builders import tool_round

ANTHROPIC_PATH = "/v1/messages"


def at(call: int, kind: str, value: Any = None, **extra: Any) -> Fault:
    return Fault(CallAt("model", call), kind, value, **extra)


def replaying(turns: list[Turn], *faults: Fault) -> CassetteSession:
    return CassetteSession(Mode.REPLAY, recorded=turns, faults=ModelCalls(faults))


def recording(*faults: Fault) -> CassetteSession:
    upstream = Upstream("http://127.0.0.1:9/v1", "sk-test")
    return CassetteSession(Mode.RECORD, upstream=upstream, faults=ModelCalls(faults))


def ask(session: CassetteSession, body: dict[str, Any], path: str = PATH) -> Rendered | Forward:
    return session.on_request(path, json.dumps(body).encode())


def answered(outcome: Rendered | Forward) -> Rendered:
    assert isinstance(outcome, Rendered), outcome
    return outcome


TWO = [
    Turn("openai-chat", request("one"), 200, reply("first")),
    Turn("openai-chat", request("two"), 200, reply("second")),
]


def test_a_429_then_the_identical_retry_gets_the_recording() -> None:
    session = replaying(list(TWO), at(1, "answer", 429, retry_after=0.2))
    fault = answered(ask(session, request("one")))
    assert fault.status == 429 and fault.retryable
    assert ("retry-after-ms", "200") in fault.headers and ("retry-after", "1") in fault.headers
    assert json.loads(fault.body)["error"]["code"] == "rate_limit_exceeded"
    retry = answered(ask(session, request("one")))
    assert retry.status == 200 and b"first" in retry.body
    assert b"second" in answered(ask(session, request("two"))).body
    assert session.faults.applied == {"model call 1: answer: 429, retry_after: 0.2": 1}
    assert session.divergence is None and sorted(session.served) == [0, 1]


def test_times_answers_that_many_attempts_with_the_fault() -> None:
    session = replaying(list(TWO), at(2, "answer", 500, times=2))
    answered(ask(session, request("one")))
    assert [answered(ask(session, request("two"))).status for _ in range(3)] == [500, 500, 200]


def test_a_faulted_request_that_changed_diverges_as_any_other() -> None:
    session = replaying(list(TWO), at(1, "answer", 429))
    assert answered(ask(session, request("changed"))).status == 409
    assert session.divergence is not None
    assert session.faults.never_applied() == [at(1, "answer", 429)]


def test_anthropic_overloaded_is_its_own_error_shape() -> None:
    body = {"model": "claude", "max_tokens": 10, "messages": [{"role": "user", "content": "hi"}]}
    answer = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "claude",
        "content": [{"type": "text", "text": "hello"}],
        "stop_reason": "end_turn",
        "usage": {"input_tokens": 1, "output_tokens": 1},
    }
    session = replaying([Turn("anthropic", body, 200, answer)], at(1, "answer", 529))
    fault = answered(ask(session, body, ANTHROPIC_PATH))
    assert fault.status == 529
    assert json.loads(fault.body) == {
        "type": "error",
        "error": {"type": "overloaded_error", "message": "Overloaded"},
    }


def test_a_cut_stream_ends_after_its_chunks_without_done() -> None:
    session = replaying(list(TWO), at(1, "cut", 1))
    cut = answered(ask(session, request("one", stream=True)))
    assert cut.body.count(b"data:") == 1 and b"[DONE]" not in cut.body
    whole = answered(ask(session, request("one", stream=True)))
    assert b"[DONE]" in whole.body


def test_an_error_event_follows_the_chunks_in_the_dialects_form() -> None:
    session = replaying(list(TWO), at(1, "error_event", 1))
    body = answered(ask(session, request("one", stream=True))).body
    events = [event for event in body.split(b"\n\n") if event]
    assert len(events) == 2 and json.loads(events[1][len(b"data: ") :])["error"]["type"]


def test_a_stream_fault_on_an_answer_not_streamed_does_not_apply() -> None:
    session = replaying(list(TWO), at(1, "cut", 1))
    assert answered(ask(session, request("one"))).status == 200
    assert (
        "was not streamed"
        in session.faults.not_applicable["model call 1: stream: cut after 1 chunks"]
    )


def test_a_malformed_unknown_tool_names_no_offered_tool() -> None:
    calls = [
        Turn(
            "openai-chat",
            request("one"),
            200,
            reply("", ("c1", "get_weather", '{"city":"Nairobi"}')),
        )
    ]
    session = replaying(calls, at(1, "malformed", "unknown_tool"))
    broken = json.loads(answered(ask(session, request("one"))).body)
    assert (
        broken["choices"][0]["message"]["tool_calls"][0]["function"]["name"]
        == "flowproof_unknown_tool"
    )
    session = replaying(list(calls), at(1, "malformed", "tool_arguments"))
    arguments = json.loads(answered(ask(session, request("one"))).body)["choices"][0]["message"]
    assert arguments["tool_calls"][0]["function"]["arguments"] == '{"city":"'


def test_a_delay_is_the_recorded_answer_later() -> None:
    session = replaying(list(TWO), at(1, "delay", 3))
    delayed = answered(ask(session, request("one")))
    assert delayed.delay_s == 3 and b"first" in delayed.body


def test_a_reset_answers_nothing_and_the_retry_gets_the_recording() -> None:
    session = replaying(list(TWO), at(1, "reset"))
    assert answered(ask(session, request("one"))).reset
    assert b"first" in answered(ask(session, request("one"))).body


# --- record -------------------------------------------------------------------------------


def test_record_answers_a_status_fault_without_forwarding_and_keeps_one_turn() -> None:
    session = recording(at(1, "answer", 429))
    assert answered(ask(session, request("one"))).status == 429
    assert [turn.status for turn in session.recorded] == [429]
    retry = ask(session, request("one"))
    assert isinstance(retry, Forward) and retry.pending.replaces == 0
    session.on_upstream_response(retry.pending, 200, json.dumps(reply("first")).encode())
    assert [(turn.status, turn.fault) for turn in session.recorded] == [
        (200, "model call 1: answer: 429")
    ]
    follow = ask(session, request("two"))
    assert isinstance(follow, Forward) and follow.pending.replaces is None


def test_record_keeps_the_faults_answer_when_the_agent_never_retried() -> None:
    session = recording(at(1, "answer", 500))
    answered(ask(session, request("one")))
    fallback = ask(session, request("fallback"))
    assert isinstance(fallback, Forward)
    session.on_upstream_response(fallback.pending, 200, json.dumps(reply("x")).encode())
    assert [turn.fault_only for turn in session.recorded] == [True, False]
    replay = replaying(list(session.recorded), at(1, "answer", 500))
    assert answered(ask(replay, request("one"))).status == 500
    assert answered(ask(replay, request("fallback"))).status == 200
    retried = replaying(list(session.recorded), at(1, "answer", 500))
    answered(ask(retried, request("one")))
    assert answered(ask(retried, request("one"))).status == 409
    assert "retried the faulted call" in retried.divergence.message  # type: ignore[union-attr]


def test_record_forwards_an_altered_call_once_and_serves_the_retry_from_the_trace() -> None:
    session = recording(at(1, "cut", 1))
    first = ask(session, request("one", stream=True))
    assert isinstance(first, Forward)
    cut = session.on_upstream_response(first.pending, 200, json.dumps(reply("first")).encode())
    assert b"[DONE]" not in cut.body
    retry = answered(ask(session, request("one", stream=True)))
    assert b"[DONE]" in retry.body and len(session.recorded) == 1


def test_a_turn_fault_counts_calls_within_its_conversation_turn() -> None:
    calls = ModelCalls((Fault(CallAt("model", 2, turn=2), "reset"),))
    assert calls.step(b"a", 1) is None and calls.step(b"b", 1) is None
    assert calls.step(b"c", 2) is None
    assert calls.step(b"d", 2) is not None


def test_gemini_and_bedrock_refuse_in_their_own_shapes() -> None:
    from flowproof_cli.dialects import dialect_named
    from flowproof_cli.faults.kinds.status import status_answer

    gemini = status_answer(dialect_named("gemini"), 429, 0.2)
    error = json.loads(gemini.body)["error"]
    assert (error["code"], error["status"]) == (429, "RESOURCE_EXHAUSTED")
    assert error["details"] == [
        {"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "0.2s"}
    ]
    assert not [name for name, _ in gemini.headers if name.startswith("retry-after")]
    bedrock = status_answer(dialect_named("bedrock-converse"), 429, None)
    assert dict(bedrock.headers)["x-amzn-errortype"].startswith("ThrottlingException:")
    assert json.loads(bedrock.body) == {
        "message": "Too many requests, please wait before trying again."
    }


def test_a_mock_and_a_fault_on_one_call_both_apply() -> None:
    """The mock rewrites what the model is told (the request), the fault what it answers."""
    asked = {
        "model": "gpt-4o-mini",
        "messages": [
            {"role": "user", "content": "time?"},
            *tool_round("c1", "get_time", "{}", "the real clock"),
        ],
    }
    told = json.loads(json.dumps(asked))
    told["messages"][2]["content"] = "09:00"
    session = CassetteSession(
        Mode.REPLAY,
        mocks={"get_time": "09:00"},
        recorded=[Turn("openai-chat", told, 200, reply("nine"))],
        faults=ModelCalls((at(1, "answer", 429),)),
    )
    assert answered(ask(session, asked)).status == 429  # matched as mocked, then faulted
    assert b"nine" in answered(ask(session, asked)).body
    assert session.divergence is None
