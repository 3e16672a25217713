"""`malformed: FORM`: the model's recorded answer, broken the way models break it.

- `tool_arguments`: the first tool call's arguments are not valid JSON (cut in half);
  where a dialect carries arguments as an object, Gemini answers `MALFORMED_FUNCTION_CALL`
  with no call, Anthropic's `input` becomes the cut JSON text.
- `unknown_tool`: the first tool call names a tool the request never offered.
- `empty`: no text and no tool call, a normal stop.
- `truncated`: the length stop (`length`, `max_tokens`, `MAX_TOKENS`, `incomplete`) in the
  middle of the answer: its first tool call's arguments or its text cut in half.
- `refusal`: the model declines (OpenAI's `refusal`, Anthropic's `refusal` stop, Gemini's
  `SAFETY` finish).

Built for the chat dialects of OpenAI (Chat Completions, Responses; Azure too), Anthropic and
Gemini (Vertex too); another dialect's call says the form is not built for it.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

from flowproof_cli.dialects import Rendered
from flowproof_cli.faults.kinds.call import FaultedCall
from flowproof_cli.faults.plan import Fault

UNKNOWN_TOOL = "flowproof_unknown_tool"
REFUSAL = "I'm sorry, but I can't help with that."
JSON = dict[str, Any]
Breaker = Callable[[JSON, str], str | None]  # breaks the answer in place, or says why not


def _half(text: str) -> str:
    return text[: max(1, len(text) // 2)] if text else "{"


def _no_call(form: str) -> str:
    return f"its answer has no tool call for `malformed: {form}` to break"


def _openai_chat(answer: JSON, form: str) -> str | None:
    message = answer["choices"][0]["message"]
    calls = message.get("tool_calls") or []
    choice = answer["choices"][0]
    if form in ("tool_arguments", "unknown_tool") and not calls:
        return _no_call(form)
    if form == "tool_arguments":
        calls[0]["function"]["arguments"] = _half(calls[0]["function"].get("arguments") or "")
    elif form == "unknown_tool":
        calls[0]["function"]["name"] = UNKNOWN_TOOL
    elif form == "empty":
        message.update(content="", tool_calls=None)
        message.pop("tool_calls")
        choice["finish_reason"] = "stop"
    elif form == "truncated":
        choice["finish_reason"] = "length"
        if calls:
            calls[0]["function"]["arguments"] = _half(calls[0]["function"].get("arguments") or "")
        else:
            message["content"] = _half(message.get("content") or "")
    elif form == "refusal":
        message.pop("tool_calls", None)
        message.update(content=None, refusal=REFUSAL)
        choice["finish_reason"] = "stop"
    return None


def _responses(answer: JSON, form: str) -> str | None:
    output = answer.get("output") or []
    calls = [item for item in output if item.get("type") == "function_call"]
    if form in ("tool_arguments", "unknown_tool") and not calls:
        return _no_call(form)
    if form == "tool_arguments":
        calls[0]["arguments"] = _half(calls[0].get("arguments") or "")
    elif form == "unknown_tool":
        calls[0]["name"] = UNKNOWN_TOOL
    elif form == "empty":
        answer["output"] = []
    elif form == "truncated":
        answer.update(status="incomplete", incomplete_details={"reason": "max_output_tokens"})
        if calls:
            calls[0]["arguments"] = _half(calls[0].get("arguments") or "")
    elif form == "refusal":
        part = {"type": "refusal", "refusal": REFUSAL}
        message = {
            "type": "message",
            "id": "msg_refusal",
            "role": "assistant",
            "status": "completed",
            "content": [part],
        }
        answer["output"] = [message]
    return None


def _anthropic(answer: JSON, form: str) -> str | None:
    content = answer.get("content") or []
    calls = [block for block in content if block.get("type") == "tool_use"]
    if form in ("tool_arguments", "unknown_tool") and not calls:
        return _no_call(form)
    if form == "tool_arguments":
        calls[0]["input"] = _half(json.dumps(calls[0].get("input")))
    elif form == "unknown_tool":
        calls[0]["name"] = UNKNOWN_TOOL
    elif form == "empty":
        answer.update(content=[], stop_reason="end_turn")
    elif form == "truncated":
        answer["stop_reason"] = "max_tokens"
        texts = [block for block in content if block.get("type") == "text"]
        if calls:
            calls[0]["input"] = _half(json.dumps(calls[0].get("input")))
        elif texts:
            texts[0]["text"] = _half(texts[0].get("text") or "")
    elif form == "refusal":
        answer.update(content=[], stop_reason="refusal")
    return None


def _gemini(answer: JSON, form: str) -> str | None:
    candidate = answer["candidates"][0]
    parts = (candidate.get("content") or {}).get("parts") or []
    calls = [part for part in parts if "functionCall" in part]
    if form in ("tool_arguments", "unknown_tool") and not calls:
        return _no_call(form)
    if form == "tool_arguments":
        candidate.pop("content", None)
        candidate["finishReason"] = "MALFORMED_FUNCTION_CALL"
    elif form == "unknown_tool":
        calls[0]["functionCall"]["name"] = UNKNOWN_TOOL
    elif form == "empty":
        candidate["content"] = {"role": "model", "parts": []}
        candidate["finishReason"] = "STOP"
    elif form == "truncated":
        candidate["finishReason"] = "MAX_TOKENS"
        texts = [part for part in parts if "text" in part]
        if texts:
            texts[0]["text"] = _half(texts[0]["text"])
        for call in calls:
            parts.remove(call)
    elif form == "refusal":
        candidate.pop("content", None)
        candidate["finishReason"] = "SAFETY"
    return None


_BREAKERS: dict[str, Breaker] = {
    "openai-chat": _openai_chat,
    "azure-chat": _openai_chat,
    "openai-responses": _responses,
    "azure-responses": _responses,
    "anthropic": _anthropic,
    "vertex-anthropic": _anthropic,
    "gemini": _gemini,
    "vertex-gemini": _gemini,
}


def answer(fault: Fault, call: FaultedCall) -> Rendered | str:
    breaker = _BREAKERS.get(call.dialect.name)
    if breaker is None:
        return f"`malformed:` is not built for the {call.dialect.name} dialect"
    if not isinstance(call.response, dict):
        return f"{fault.at} has no JSON answer to break"
    broken = copy.deepcopy(call.response)
    try:
        why = breaker(broken, str(fault.value))
    except (KeyError, IndexError, TypeError, AttributeError):
        return f"{fault.at}'s answer is not the {call.dialect.name} shape `malformed:` breaks"
    if why is not None:
        return f"{fault.at}: {why}"
    return call.rendered(broken)
