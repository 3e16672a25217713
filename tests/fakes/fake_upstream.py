"""A scripted fake model upstream for flowproof's tests (stdlib only).

It speaks four dialects, routed by path suffix like the real proxy does:

* ``.../chat/completions``: OpenAI Chat Completions (dialect ``"chat"``)
* ``.../responses``: OpenAI Responses API (dialect ``"responses"``)
* ``.../messages``: Anthropic Messages (dialect ``"anthropic"``)
* ``.../models/<model>:generateContent`` and ``:streamGenerateContent``: Google Gemini
  (dialect ``"gemini"``; the model comes from the path; ``?alt=sse`` streams ``data:`` events,
  each a GenerateContentResponse, without ``[DONE]``; without it, one JSON array of them)

plus ``GET .../models`` (a small model list some SDKs probe) and Anthropic's
``POST .../messages/count_tokens``. Each answer is non-streaming JSON, or exact SSE when the
request says ``"stream": true`` (Gemini: the ``:streamGenerateContent`` path).

Every response mints random ids (``chatcmpl-``, ``call_``, ``resp_``, ``fc_``, ``msg_``,
``toolu_``, Gemini's ``responseId``) and the current ``created`` timestamp, so a replay that passes proves flowproof
answered from the trace. With ``seed=N`` the ids come from ``random.Random(N)`` and
``created`` is the constant ``FIXED_CREATED``: two runs give identical bytes.

The default script (``decide``) answers from the request alone: the weather tool loop, or,
when the order tools are offered, an order-support model that holds a conversation
(``decide_support``: the last user message picks the action, the history names the order).

Importable::

    with FakeUpstream(seed=1) as fake:       # or FakeUpstream(script=my_script)
        base = fake.base_url                 # "http://127.0.0.1:PORT"
        ...
        fake.requests[0].headers["authorization"], fake.requests[0].body["stream"]

As a process::

    python tests/fakes/fake_upstream.py --port 0 [--seed N]
    # first stdout line: "listening on http://127.0.0.1:PORT"; serves until killed.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import random
import re
import socketserver
import string
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any, Self

try:  # as a module of the tests package, or run as a script from tests/fakes
    from tests.fakes import endpoints_upstream as endpoints
except ImportError:  # pragma: no cover
    import endpoints_upstream as endpoints  # type: ignore[no-redef]

HOST = "127.0.0.1"
FIXED_CREATED = 1_700_000_000
DIALECT_CHAT = "chat"
DIALECT_RESPONSES = "responses"
DIALECT_ANTHROPIC = "anthropic"
DIALECT_GEMINI = "gemini"
MODELS = ("gpt-4o-mini", "gpt-4o", "claude-sonnet-4-5")

_ALNUM = string.ascii_letters + string.digits
_HEX = "0123456789abcdef"


@dataclass
class Reply:
    """What the fake model answers; rendered into the dialect's exact wire format.

    ``tool_calls`` holds ``(name, arguments_json_string)`` pairs. A ``status`` other than 200
    answers with ``error_body`` (or a dialect-shaped default error) instead, never streamed.
    ``text_parts`` is the text cut into adjacent content parts (Anthropic text blocks, Gemini
    parts, Responses `output_text` entries); Chat Completions, whose content is one string,
    gets them joined.
    """

    text: str | None = None
    text_parts: tuple[str, ...] = ()
    tool_calls: list[tuple[str, str]] = field(default_factory=list)
    status: int = 200
    error_body: dict[str, Any] | None = None
    headers: dict[str, str] = field(default_factory=dict)


# (dialect, request body) -> Reply. dialect is "chat", "responses", "anthropic" or "gemini"
# (a Gemini body has the path's model folded in as "model").
Script = Callable[[str, dict[str, Any]], Reply]


class Headers(dict[str, str]):
    """A dict of request headers with lower-cased keys and case-insensitive lookup."""

    def __init__(self, items: Iterable[tuple[str, str]] = ()) -> None:
        super().__init__()
        for key, value in items:
            self[key] = value

    def __setitem__(self, key: str, value: str) -> None:
        super().__setitem__(key.lower(), value)

    def __getitem__(self, key: str) -> str:
        return super().__getitem__(key.lower())

    def __contains__(self, key: object) -> bool:
        return super().__contains__(key.lower() if isinstance(key, str) else key)

    def get(self, key: str, default: Any = None) -> Any:
        return super().get(key.lower(), default)


@dataclass
class RecordedRequest:
    """One request the fake received (every method and path, in arrival order)."""

    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    method: str = "POST"
    dialect: str | None = None


def sequence(*replies: Reply) -> Script:
    """A script answering with ``replies`` in order, repeating the last one forever."""
    if not replies:
        raise ValueError("sequence() needs at least one Reply")
    lock = threading.Lock()
    counter = itertools.count()

    def script(dialect: str, body: dict[str, Any]) -> Reply:
        with lock:
            index = next(counter)
        return replies[min(index, len(replies) - 1)]

    return script


# --------------------------------------------------------------------------------------------
# Conversation view shared by the four dialects (what the default script decides from)


@dataclass
class Conversation:
    system: str = ""
    tools: list[str] = field(default_factory=list)
    user_texts: list[str] = field(default_factory=list)
    tool_results: list[str] = field(default_factory=list)
    #: The tool results after the last user text: what the model has seen of this user turn.
    turn_tool_results: list[str] = field(default_factory=list)

    def add_user_text(self, text: str) -> None:
        self.user_texts.append(text)
        self.turn_tool_results = []

    def add_tool_result(self, text: str) -> None:
        self.tool_results.append(text)
        self.turn_tool_results.append(text)

    @property
    def last_user_text(self) -> str:
        return self.user_texts[-1] if self.user_texts else ""


def _text_of(content: Any) -> str:
    """Text of a content value: a string, or a list of text-ish parts/blocks."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = []
        for part in content:
            if isinstance(part, str):
                texts.append(part)
            elif isinstance(part, dict) and isinstance(part.get("text"), str):
                texts.append(part["text"])
        return "".join(texts)
    if isinstance(content, dict) and isinstance(content.get("text"), str):
        return str(content["text"])
    return json.dumps(content)


def _chat_conversation(body: dict[str, Any]) -> Conversation:
    conv = Conversation()
    for tool in body.get("tools") or []:
        function = tool.get("function") if isinstance(tool, dict) else None
        if isinstance(function, dict) and function.get("name"):
            conv.tools.append(str(function["name"]))
    systems = []
    for message in body.get("messages") or []:
        if not isinstance(message, dict):
            continue
        role = message.get("role")
        if role in ("system", "developer"):
            systems.append(_text_of(message.get("content")))
        elif role == "user":
            conv.add_user_text(_text_of(message.get("content")))
        elif role in ("tool", "function"):
            conv.add_tool_result(_text_of(message.get("content")))
    conv.system = "\n".join(systems)
    return conv


def _responses_items(body: dict[str, Any]) -> list[Any]:
    raw = body.get("input")
    if isinstance(raw, str):
        return [{"role": "user", "content": raw}]
    return list(raw) if isinstance(raw, list) else []


def _responses_conversation(body: dict[str, Any], history: list[Any]) -> Conversation:
    conv = Conversation()
    for tool in body.get("tools") or []:
        if (
            isinstance(tool, dict)
            and tool.get("type", "function") == "function"
            and tool.get("name")
        ):
            conv.tools.append(str(tool["name"]))
    systems = [_text_of(body.get("instructions"))] if body.get("instructions") else []
    for item in [*history, *_responses_items(body)]:
        if not isinstance(item, dict):
            continue
        kind = item.get("type", "message")
        if kind == "function_call_output":
            conv.add_tool_result(_text_of(item.get("output")))
        elif kind == "message":
            role = item.get("role")
            if role in ("system", "developer"):
                systems.append(_text_of(item.get("content")))
            elif role == "user":
                conv.add_user_text(_text_of(item.get("content")))
    conv.system = "\n".join(systems)
    return conv


def _anthropic_conversation(body: dict[str, Any]) -> Conversation:
    conv = Conversation(system=_text_of(body.get("system")))
    for tool in body.get("tools") or []:
        if isinstance(tool, dict) and tool.get("name") and "input_schema" in tool:
            conv.tools.append(str(tool["name"]))
    for message in body.get("messages") or []:
        if not isinstance(message, dict) or message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, str):
            conv.add_user_text(content)
            continue
        texts, results = [], []
        for block in content if isinstance(content, list) else []:
            if not isinstance(block, dict):
                continue
            if block.get("type") == "tool_result":
                results.append(_text_of(block.get("content")))
            elif block.get("type") == "text":
                texts.append(str(block.get("text", "")))
        if texts:
            conv.add_user_text("".join(texts))
        for result in results:
            conv.add_tool_result(result)
    return conv


def _gemini_conversation(body: dict[str, Any]) -> Conversation:
    system = body.get("systemInstruction") or body.get("system_instruction")
    conv = Conversation(
        system=_text_of(system.get("parts") if isinstance(system, dict) else system)
    )
    for tool in body.get("tools") or []:
        declarations = tool.get("functionDeclarations") if isinstance(tool, dict) else None
        for declaration in declarations or []:
            if isinstance(declaration, dict) and declaration.get("name"):
                conv.tools.append(str(declaration["name"]))
    for content in body.get("contents") or []:
        if not isinstance(content, dict) or content.get("role", "user") not in ("user", "function"):
            continue
        texts, results = [], []
        for part in content.get("parts") or []:
            if not isinstance(part, dict):
                continue
            result = part.get("functionResponse")
            if isinstance(result, dict):
                results.append(json.dumps(result.get("response")))
            elif isinstance(part.get("text"), str):
                texts.append(part["text"])
        if texts:
            conv.add_user_text("".join(texts))
        for result in results:
            conv.add_tool_result(result)
    return conv


def conversation_of(
    dialect: str, body: dict[str, Any], history: list[Any] | None = None
) -> Conversation:
    """The dialect-neutral view of a request (``history``: earlier Responses items)."""
    if dialect == DIALECT_CHAT:
        return _chat_conversation(body)
    if dialect == DIALECT_RESPONSES:
        return _responses_conversation(body, history or [])
    if dialect == DIALECT_GEMINI:
        return _gemini_conversation(body)
    return _anthropic_conversation(body)


_CITY = re.compile(r"\bin\s+([A-Z][\w-]*)")


def city_of(text: str) -> str:
    """The first capitalised word after "in " (fallback "Paris")."""
    match = _CITY.search(text)
    return match.group(1) if match else "Paris"


def decide(conv: Conversation) -> Reply:
    """The default "tool loop" behaviour, identical in every dialect."""
    if SUPPORT_TOOLS & set(conv.tools):
        return decide_support(conv)
    if "title" in conv.system.lower():
        return Reply(text="Weather chat")
    user_text = conv.last_user_text
    city = city_of(user_text)
    if conv.tools and not conv.tool_results:
        offered = set(conv.tools)
        if "both tools" in user_text.lower() and {"get_weather", "get_time"} <= offered:
            return Reply(
                tool_calls=[("get_weather", json.dumps({"city": city})), ("get_time", "{}")]
            )
        if "get_weather" in offered:
            return Reply(tool_calls=[("get_weather", json.dumps({"city": city}))])
        if "get_time" in offered:
            return Reply(tool_calls=[("get_time", "{}")])
        return Reply(tool_calls=[(conv.tools[0], "{}")])
    if conv.tools or conv.tool_results:
        text = f"The weather in {city} is sunny. "
        text += "".join(f"Tool said: {result}. " for result in conv.tool_results)
        return Reply(text=text.strip())
    return Reply(text=f"Hello! You said: {user_text}")


# The order-support behaviour: the conversational agents' (tests/e2e/conversation_agents/).
# Each answer follows from the request alone, so a recorded conversation is a function of its
# user messages: the LAST user text decides the action, tool results after it end the turn,
# and the order number comes from the newest user text that names one (a later "cancel it"
# finds 4711 only when the agent sent its history along).

SUPPORT_TOOLS = frozenset({"lookup_order", "cancel_order", "issue_refund"})
_ORDER = re.compile(r"\b(\d{3,})\b")
#: A question about an order's whereabouts (or a message naming one): a lookup.
_LOOKUP = re.compile(r"\b(\d{3,}|where|status|arriv\w*|track\w*|on its way)\b", re.IGNORECASE)
_YES = re.compile(r"^\W*(yes|yep|sure|go ahead)\b", re.IGNORECASE)
_NO = re.compile(r"^\W*(no|nope|don't|do not)\b", re.IGNORECASE)
#: The system prompt of an agent that wants the model to ask before a destructive tool.
CONFIRM_MARKER = "confirm"


def order_of(texts: list[str]) -> str | None:
    """The order number in the newest text that names one."""
    for text in reversed(texts):
        if match := _ORDER.search(text):
            return match.group(1)
    return None


def _summary(result: str) -> str:
    """One sentence for a tool result: "Order 4711 is shipped." for an order's status."""
    with contextlib.suppress(ValueError):
        data = json.loads(result)
        if isinstance(data, dict) and "order_id" in data and "status" in data:
            return f"Order {data['order_id']} is {data['status']}."
    return f"Tool said: {result}."


def _destructive(text: str) -> str | None:
    lowered = text.lower()
    if "refund" in lowered:
        return "issue_refund"
    if "cancel" in lowered:
        return "cancel_order"
    return None


def decide_support(conv: Conversation) -> Reply:
    """The order-support model (see above); asks "Shall I go ahead?" before a destructive tool
    when the system prompt says `confirm`, and acts on the request before a yes."""
    if conv.turn_tool_results:
        return Reply(text=" ".join(_summary(result) for result in conv.turn_tool_results))
    text = conv.last_user_text
    order = order_of(conv.user_texts)
    asks_first = CONFIRM_MARKER in conv.system.lower()
    earlier = conv.user_texts[-2] if len(conv.user_texts) > 1 else ""
    answer_yes, answer_no = _YES.search(text), _NO.search(text)
    tool = _destructive(earlier) if asks_first and (answer_yes or answer_no) else None
    if tool is not None and answer_no:
        verb = "cancel" if tool == "cancel_order" else "refund"
        return Reply(text=f"Okay, I will not {verb} order {order}.")
    if tool is None:
        tool = _destructive(text)
        if tool is not None and asks_first:
            verb = "cancel" if tool == "cancel_order" else "refund"
            return Reply(text=f"I can {verb} order {order} for you. Shall I go ahead?")
    if tool is None and _LOOKUP.search(text):
        tool = "lookup_order"
    if tool is None:
        return Reply(text="You are welcome. Anything else about your order?")
    if tool not in conv.tools:
        return Reply(text=f"I cannot do that here: {tool} is not available to me.")
    if order is None:
        return Reply(text="Which order do you mean? Tell me its number.")
    return Reply(tool_calls=[(tool, json.dumps({"order_id": order}))])


def default_script(dialect: str, body: dict[str, Any]) -> Reply:
    """The default script (the Responses ``previous_response_id`` history is not visible here)."""
    return decide(conversation_of(dialect, body))


# --------------------------------------------------------------------------------------------
# Rendering


def _chunks(text: str, size: int = 2) -> list[str]:
    """Split text into fragments of ``size`` words (keeping whitespace) for streaming."""
    words = re.findall(r"\s*\S+\s*", text) or ([text] if text else [])
    return ["".join(words[i : i + size]) for i in range(0, len(words), size)]


def _arg_chunks(arguments: str) -> list[str]:
    if len(arguments) < 4:
        return [arguments]
    middle = len(arguments) // 2
    return [arguments[:middle], arguments[middle:]]


def _sse(data: Any, event: str | None = None) -> bytes:
    payload = data if isinstance(data, str) else json.dumps(data, separators=(",", ":"))
    prefix = f"event: {event}\n" if event else ""
    return f"{prefix}data: {payload}\n\n".encode()


class Renderer:
    """Turns a Reply into one dialect's response (JSON body or SSE byte chunks)."""

    def __init__(self, fake: FakeUpstream, dialect: str, body: dict[str, Any], reply: Reply):
        self.fake = fake
        self.dialect = dialect
        self.body = body
        self.reply = reply
        self.model = str(body.get("model") or "fake-model")
        self.text = "".join(reply.text_parts) if reply.text_parts else reply.text
        self.parts = list(reply.text_parts) or [self.text or ""]
        self.created = fake.now()
        counted = {k: v for k, v in body.items() if k not in ("stream", "stream_options")}
        self.prompt_tokens = max(1, len(json.dumps(counted)) // 4)
        produced = len(reply.text or "") + sum(len(n) + len(a) for n, a in reply.tool_calls)
        self.completion_tokens = max(1, produced // 4 + 2 * len(reply.tool_calls))

    # ---- OpenAI Chat Completions ----

    def chat(self) -> tuple[dict[str, Any], list[str]]:
        call_ids = [self.fake.rand_id("call_", 24) for _ in self.reply.tool_calls]
        response_id = self.fake.rand_id("chatcmpl-", 29)
        return {"id": response_id}, call_ids

    def chat_json(self) -> dict[str, Any]:
        head, call_ids = self.chat()
        content = self.text if self.text is not None else (None if self.reply.tool_calls else "")
        message: dict[str, Any] = {
            "role": "assistant",
            "content": content,
            "refusal": None,
            "annotations": [],
        }
        if self.reply.tool_calls:
            message["tool_calls"] = [
                {"id": cid, "type": "function", "function": {"name": name, "arguments": args}}
                for cid, (name, args) in zip(call_ids, self.reply.tool_calls, strict=True)
            ]
        return {
            **head,
            "object": "chat.completion",
            "created": self.created,
            "model": self.model,
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "logprobs": None,
                    "finish_reason": "tool_calls" if self.reply.tool_calls else "stop",
                }
            ],
            "usage": self.chat_usage(),
            "service_tier": "default",
            "system_fingerprint": "fp_fake",
        }

    def chat_usage(self) -> dict[str, Any]:
        return {
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "total_tokens": self.prompt_tokens + self.completion_tokens,
            "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
            "completion_tokens_details": {
                "reasoning_tokens": 0,
                "audio_tokens": 0,
                "accepted_prediction_tokens": 0,
                "rejected_prediction_tokens": 0,
            },
        }

    def chat_sse(self) -> Iterator[bytes]:
        head, call_ids = self.chat()
        options = self.body.get("stream_options")
        include_usage = isinstance(options, dict) and bool(options.get("include_usage"))
        envelope: dict[str, Any] = {
            **head,
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "service_tier": "default",
            "system_fingerprint": "fp_fake",
        }

        def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
            data = {
                **envelope,
                "choices": [
                    {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
                ],
            }
            if include_usage:
                data["usage"] = None
            return _sse(data)

        has_text = self.text is not None or not self.reply.tool_calls
        first: dict[str, Any] = {"role": "assistant", "content": "" if has_text else None}
        if has_text:
            first["refusal"] = None
        yield chunk(first)
        for fragment in _chunks(self.text or ""):
            yield chunk({"content": fragment})
        for index, (cid, (name, args)) in enumerate(
            zip(call_ids, self.reply.tool_calls, strict=True)
        ):
            start = {"index": index, "id": cid, "type": "function"}
            yield chunk({"tool_calls": [{**start, "function": {"name": name, "arguments": ""}}]})
            for fragment in _arg_chunks(args):
                yield chunk({"tool_calls": [{"index": index, "function": {"arguments": fragment}}]})
        yield chunk({}, "tool_calls" if self.reply.tool_calls else "stop")
        if include_usage:
            yield _sse({**envelope, "choices": [], "usage": self.chat_usage()})
        yield _sse("[DONE]")

    # ---- OpenAI Responses ----

    def responses_items(self) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        if self.text is not None or not self.reply.tool_calls:
            items.append(
                {
                    "id": self.fake.rand_id("msg_", 48, _HEX),
                    "type": "message",
                    "status": "completed",
                    "role": "assistant",
                    "content": [
                        {"type": "output_text", "text": part, "annotations": [], "logprobs": []}
                        for part in self.parts
                    ],
                }
            )
        for name, args in self.reply.tool_calls:
            items.append(
                {
                    "id": self.fake.rand_id("fc_", 48, _HEX),
                    "type": "function_call",
                    "status": "completed",
                    "arguments": args,
                    "call_id": self.fake.rand_id("call_", 24),
                    "name": name,
                }
            )
        return items

    def responses_object(
        self, response_id: str, output: list[dict[str, Any]], done: bool
    ) -> dict[str, Any]:
        tools = [t for t in self.body.get("tools") or [] if isinstance(t, dict)]
        usage = {
            "input_tokens": self.prompt_tokens,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": self.completion_tokens,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": self.prompt_tokens + self.completion_tokens,
        }
        return {
            "id": response_id,
            "object": "response",
            "created_at": self.created,
            "status": "completed" if done else "in_progress",
            "background": False,
            "error": None,
            "incomplete_details": None,
            "instructions": self.body.get("instructions"),
            "max_output_tokens": self.body.get("max_output_tokens"),
            "model": self.model,
            "output": output,
            "parallel_tool_calls": self.body.get("parallel_tool_calls", True),
            "previous_response_id": self.body.get("previous_response_id"),
            "reasoning": {"effort": None, "summary": None},
            "service_tier": "default",
            "store": self.body.get("store", True),
            "temperature": self.body.get("temperature", 1.0),
            "text": {"format": {"type": "text"}, "verbosity": "medium"},
            "tool_choice": self.body.get("tool_choice", "auto"),
            "tools": tools,
            "top_p": self.body.get("top_p", 1.0),
            "truncation": "disabled",
            "usage": usage if done else None,
            "user": None,
            "metadata": self.body.get("metadata") or {},
        }

    def responses(self) -> tuple[str, list[dict[str, Any]]]:
        response_id = self.fake.rand_id("resp_", 48, _HEX)
        return response_id, self.responses_items()

    def responses_json(self) -> dict[str, Any]:
        response_id, items = self.responses()
        self.fake.remember_response(response_id, self.body, items)
        return self.responses_object(response_id, items, done=True)

    def responses_sse(self) -> Iterator[bytes]:
        response_id, items = self.responses()
        self.fake.remember_response(response_id, self.body, items)
        seq = itertools.count()

        def event(kind: str, **fields: Any) -> bytes:
            return _sse({"type": kind, "sequence_number": next(seq), **fields}, event=kind)

        pending = self.responses_object(response_id, [], done=False)
        yield event("response.created", response=pending)
        yield event("response.in_progress", response=pending)
        for index, item in enumerate(items):
            item_id = item["id"]
            if item["type"] == "message":
                part = item["content"][0]
                text = part["text"]
                started = {**item, "status": "in_progress", "content": []}
                yield event("response.output_item.added", output_index=index, item=started)
                empty = {**part, "text": ""}
                where = {"item_id": item_id, "output_index": index, "content_index": 0}
                yield event("response.content_part.added", **where, part=empty)
                for fragment in _chunks(text):
                    yield event("response.output_text.delta", **where, delta=fragment, logprobs=[])
                yield event("response.output_text.done", **where, text=text, logprobs=[])
                yield event("response.content_part.done", **where, part=part)
            else:
                started = {**item, "status": "in_progress", "arguments": ""}
                yield event("response.output_item.added", output_index=index, item=started)
                where = {"item_id": item_id, "output_index": index}
                for fragment in _arg_chunks(item["arguments"]):
                    yield event("response.function_call_arguments.delta", **where, delta=fragment)
                yield event(
                    "response.function_call_arguments.done",
                    **where,
                    name=item["name"],
                    arguments=item["arguments"],
                )
            yield event("response.output_item.done", output_index=index, item=item)
        final = self.responses_object(response_id, items, done=True)
        yield event("response.completed", response=final)

    # ---- Anthropic Messages ----

    def anthropic(self) -> tuple[str, list[dict[str, Any]]]:
        message_id = self.fake.rand_id("msg_01", 22)
        blocks: list[dict[str, Any]] = []
        if self.text is not None or not self.reply.tool_calls:
            blocks.extend({"type": "text", "text": part} for part in self.parts)
        for name, args in self.reply.tool_calls:
            try:
                parsed = json.loads(args) if args.strip() else {}
            except json.JSONDecodeError:
                parsed = {"_raw_arguments": args}
            blocks.append(
                {
                    "type": "tool_use",
                    "id": self.fake.rand_id("toolu_01", 22),
                    "name": name,
                    "input": parsed,
                }
            )
        return message_id, blocks

    def anthropic_usage(self, output_tokens: int) -> dict[str, Any]:
        return {
            "input_tokens": self.prompt_tokens,
            "cache_creation_input_tokens": 0,
            "cache_read_input_tokens": 0,
            "output_tokens": output_tokens,
            "service_tier": "standard",
        }

    def anthropic_message(
        self, message_id: str, blocks: list[dict[str, Any]], done: bool
    ) -> dict[str, Any]:
        stop = "tool_use" if self.reply.tool_calls else "end_turn"
        return {
            "id": message_id,
            "type": "message",
            "role": "assistant",
            "model": self.model,
            "content": blocks,
            "stop_reason": stop if done else None,
            "stop_sequence": None,
            "usage": self.anthropic_usage(self.completion_tokens if done else 1),
        }

    def anthropic_json(self) -> dict[str, Any]:
        message_id, blocks = self.anthropic()
        return self.anthropic_message(message_id, blocks, done=True)

    def anthropic_sse(self) -> Iterator[bytes]:
        message_id, blocks = self.anthropic()
        start = self.anthropic_message(message_id, [], done=False)
        yield _sse({"type": "message_start", "message": start}, "message_start")
        for index, block in enumerate(blocks):
            if block["type"] == "text":
                opening: dict[str, Any] = {"type": "text", "text": ""}
                deltas = [{"type": "text_delta", "text": f} for f in _chunks(block["text"])]
            else:
                opening = {**block, "input": {}}
                raw = json.dumps(block["input"]) if block["input"] else ""
                deltas = [{"type": "input_json_delta", "partial_json": f} for f in _arg_chunks(raw)]
            yield _sse(
                {"type": "content_block_start", "index": index, "content_block": opening},
                "content_block_start",
            )
            if index == 0:
                yield _sse({"type": "ping"}, "ping")
            for delta in deltas:
                yield _sse(
                    {"type": "content_block_delta", "index": index, "delta": delta},
                    "content_block_delta",
                )
            yield _sse({"type": "content_block_stop", "index": index}, "content_block_stop")
        yield _sse(
            {
                "type": "message_delta",
                "delta": {
                    "stop_reason": "tool_use" if self.reply.tool_calls else "end_turn",
                    "stop_sequence": None,
                },
                "usage": {"output_tokens": self.completion_tokens},
            },
            "message_delta",
        )
        yield _sse({"type": "message_stop"}, "message_stop")

    # ---- Google Gemini ----

    def gemini_parts(self) -> list[dict[str, Any]]:
        parts: list[dict[str, Any]] = []
        if self.text is not None or not self.reply.tool_calls:
            parts.extend({"text": part} for part in self.parts)
        for name, args in self.reply.tool_calls:
            try:
                parsed = json.loads(args) if args.strip() else {}
            except json.JSONDecodeError:
                parsed = {"_raw_arguments": args}
            parts.append({"functionCall": {"name": name, "args": parsed}})
        return parts

    def gemini_usage(self) -> dict[str, Any]:
        return {
            "promptTokenCount": self.prompt_tokens,
            "candidatesTokenCount": self.completion_tokens,
            "totalTokenCount": self.prompt_tokens + self.completion_tokens,
            "promptTokensDetails": [{"modality": "TEXT", "tokenCount": self.prompt_tokens}],
        }

    def gemini_chunk(
        self, parts: list[dict[str, Any]], response_id: str, last: bool
    ) -> dict[str, Any]:
        candidate: dict[str, Any] = {"content": {"parts": parts, "role": "model"}}
        if last:
            candidate["finishReason"] = "STOP"
        candidate["index"] = 0
        chunk: dict[str, Any] = {"candidates": [candidate]}
        if last:
            chunk["usageMetadata"] = self.gemini_usage()
        chunk["modelVersion"] = self.model
        chunk["responseId"] = response_id
        return chunk

    def gemini_json(self) -> dict[str, Any]:
        return self.gemini_chunk(self.gemini_parts(), self.fake.rand_id("", 23), last=True)

    def gemini_stream_chunks(self) -> list[dict[str, Any]]:
        response_id = self.fake.rand_id("", 23)
        pieces: list[dict[str, Any]] = []
        for part in self.gemini_parts():
            if "text" in part:
                pieces += [{"text": fragment} for fragment in _chunks(part["text"])] or [part]
            else:
                pieces.append(part)
        return [
            self.gemini_chunk([piece], response_id, last=index == len(pieces) - 1)
            for index, piece in enumerate(pieces)
        ]

    def gemini_sse(self) -> Iterator[bytes]:
        for chunk in self.gemini_stream_chunks():
            yield _sse(chunk)

    # ---- dispatch ----

    def json_body(self) -> dict[str, Any]:
        if self.dialect == DIALECT_CHAT:
            return self.chat_json()
        if self.dialect == DIALECT_RESPONSES:
            return self.responses_json()
        if self.dialect == DIALECT_GEMINI:
            return self.gemini_json()
        return self.anthropic_json()

    def sse(self) -> Iterator[bytes]:
        if self.dialect == DIALECT_CHAT:
            return self.chat_sse()
        if self.dialect == DIALECT_RESPONSES:
            return self.responses_sse()
        if self.dialect == DIALECT_GEMINI:
            return self.gemini_sse()
        return self.anthropic_sse()


def error_body(dialect: str, status: int, message: str | None = None) -> dict[str, Any]:
    """A dialect-shaped error body for ``status``."""
    if dialect == DIALECT_ANTHROPIC:
        kinds = {
            400: "invalid_request_error",
            401: "authentication_error",
            404: "not_found_error",
            429: "rate_limit_error",
            529: "overloaded_error",
        }
        kind = kinds.get(status, "api_error")
        return {"type": "error", "error": {"type": kind, "message": message or kind}}
    if dialect == DIALECT_GEMINI:
        statuses = {
            400: "INVALID_ARGUMENT",
            401: "UNAUTHENTICATED",
            403: "PERMISSION_DENIED",
            404: "NOT_FOUND",
            429: "RESOURCE_EXHAUSTED",
            503: "UNAVAILABLE",
        }
        status_name = statuses.get(status, "INTERNAL")
        return {"error": {"code": status, "message": message or status_name, "status": status_name}}
    kinds = {
        400: "invalid_request_error",
        401: "invalid_request_error",
        404: "invalid_request_error",
        429: "rate_limit_exceeded",
    }
    kind = kinds.get(status, "server_error")
    return {"error": {"message": message or kind, "type": kind, "param": None, "code": None}}


# --------------------------------------------------------------------------------------------
# Server


def dialect_of(path: str) -> str | None:
    path = path.split("?", 1)[0].rstrip("/")
    if path.endswith("/chat/completions"):
        return DIALECT_CHAT
    if path.endswith("/responses"):
        return DIALECT_RESPONSES
    if path.endswith("/messages"):
        return DIALECT_ANTHROPIC
    if _GEMINI_PATH.search(path):
        return DIALECT_GEMINI
    return None


_GEMINI_PATH = re.compile(r"/[^/:]+:(?:stream)?[gG]enerateContent$")
_GEMINI_STREAM = ":streamGenerateContent"


def gemini_model_of(path: str) -> str:
    """``/v1beta/models/gemini-2.5-flash:generateContent`` -> ``gemini-2.5-flash``."""
    return path.split("?", 1)[0].rstrip("/").rsplit("/", 1)[-1].split(":", 1)[0]


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _read_body(self) -> bytes:
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            data = b""
            while True:
                size = int(self.rfile.readline().strip().split(b";")[0] or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return data
                data += self.rfile.read(size)
                self.rfile.readline()
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _send_json(self, status: int, payload: Any, headers: dict[str, str] | None = None) -> None:
        raw = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(raw)))
        self.send_header("x-request-id", self.server.fake.rand_id("req_", 24))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(raw)
        self.wfile.flush()

    def _send_sse(self, events: Iterator[bytes]) -> None:
        # Render before sending headers: a failure then still becomes a clean 500.
        chunks = list(events)
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("x-request-id", self.server.fake.rand_id("req_", 24))
        self.end_headers()
        for data in chunks:
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            self.wfile.flush()
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def _record(self, body: dict[str, Any], dialect: str | None) -> None:
        headers = Headers((k, v) for k, v in self.headers.items())
        self.server.fake.record(RecordedRequest(self.path, headers, body, self.command, dialect))

    def _endpoint(self, body: dict[str, Any]) -> bool:
        """An endpoint around chat (tests/fakes/endpoints_upstream.py) answered, if it is one."""
        headers = Headers((k, v) for k, v in self.headers.items())
        found = endpoints.answer(self.server.fake.rng(), self.command, self.path, headers, body)
        if found is not None:
            self._send_json(*found)
        return found is not None

    def do_GET(self) -> None:
        self._record({}, None)
        if self._endpoint({}):
            return
        path = self.path.split("?", 1)[0].rstrip("/")
        fake = self.server.fake
        if path.endswith("/models"):
            data = [fake.model_entry(model) for model in MODELS]
            listing = {
                "object": "list",
                "data": data,
                "has_more": False,
                "first_id": data[0]["id"],
                "last_id": data[-1]["id"],
            }
            self._send_json(200, listing)
        elif "/models/" in path:
            self._send_json(200, fake.model_entry(path.rsplit("/", 1)[1]))
        else:
            self._send_json(404, error_body(DIALECT_CHAT, 404, f"no route for GET {path}"))

    def do_POST(self) -> None:
        raw = self._read_body()
        try:
            parsed = json.loads(raw) if raw else {}
        except json.JSONDecodeError:
            parsed = None
        body: dict[str, Any] = parsed if isinstance(parsed, dict) else {}
        path = self.path.split("?", 1)[0].rstrip("/")
        dialect = dialect_of(path)
        self._record(body, dialect)
        if self._endpoint(body):
            return
        if path.endswith("/messages/count_tokens"):
            self._send_json(200, {"input_tokens": max(1, len(raw) // 4)})
            return
        if dialect is None:
            self._send_json(404, error_body(DIALECT_CHAT, 404, f"no route for POST {path}"))
            return
        if not isinstance(parsed, dict):
            self._send_json(400, error_body(dialect, 400, "request body is not a JSON object"))
            return
        stream = body.get("stream") is True
        if dialect == DIALECT_GEMINI:
            # The model and the streaming choice live in the path.
            body = {**body, "model": gemini_model_of(path)}
            stream = path.endswith(_GEMINI_STREAM)
        self._answer(dialect, body, stream)

    def _answer(self, dialect: str, body: dict[str, Any], stream: bool, who: str = "") -> None:
        """The fake's reply to a model call, rendered in `dialect` (a 500 naming `who`, the
        fake upstream by default, when its script fails)."""
        fake = self.server.fake
        try:
            reply = fake.answer(dialect, body)
            if reply.status != 200:
                payload = reply.error_body or error_body(dialect, reply.status)
                self._send_json(reply.status, payload, reply.headers)
                return
            renderer = Renderer(fake, dialect, body, reply)
            if stream and dialect == DIALECT_GEMINI and "alt=sse" not in self.path:
                self._send_json(200, renderer.gemini_stream_chunks(), reply.headers)
            elif stream:
                self._send_sse(renderer.sse())
            else:
                self._send_json(200, renderer.json_body(), reply.headers)
        except Exception:
            message = f"{who or 'fake upstream'} script failed:\n" + traceback.format_exc()
            self._send_json(500, error_body(dialect, 500, message))


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    # socketserver's default backlog of 5 drops connections when a proxy opens dozens at once
    request_queue_size = 256

    def __init__(self, fake: FakeUpstream, port: int) -> None:
        self.fake = fake
        super().__init__((HOST, port), _Handler)


class ThreadServed:
    """A server on 127.0.0.1 served from a daemon thread: the lifecycle every fake upstream
    shares. A subclass says which server (`make_server`) and names its thread."""

    thread_name = "fake-upstream"

    def __init__(self, port: int = 0) -> None:
        self._port = port
        self._server: socketserver.TCPServer | None = None
        self._thread: threading.Thread | None = None

    def make_server(self, port: int) -> socketserver.TCPServer:
        """The server to bind on 127.0.0.1:`port` (0: any free port)."""
        raise NotImplementedError

    def bind(self) -> str:
        """Open the listening socket (without serving yet); returns the base URL."""
        if self._server is None:
            self._server = self.make_server(self._port)
        return self.base_url

    def start(self) -> str:
        """Serve in a background daemon thread; returns ``http://127.0.0.1:PORT``."""
        if self._thread is None:
            self.bind()
            assert self._server is not None
            self._thread = threading.Thread(
                target=self._server.serve_forever,
                kwargs={"poll_interval": 0.05},
                name=self.thread_name,
                daemon=True,
            )
            self._thread.start()
        return self.base_url

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=5)
            self._thread = None

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    @property
    def port(self) -> int:
        if self._server is None:
            raise RuntimeError(f"{type(self).__name__} is not started")
        return int(self._server.server_address[1])

    @property
    def base_url(self) -> str:
        return f"http://{HOST}:{self.port}"


class FakeUpstream(ThreadServed):
    """A scripted fake model API on 127.0.0.1 (see the module docstring)."""

    def __init__(
        self, script: Script | None = None, seed: int | None = None, *, port: int = 0
    ) -> None:
        super().__init__(port)
        self.script = script
        self.seed = seed
        self.requests: list[RecordedRequest] = []
        self._rng = random.Random(seed)  # seed None: seeded from os.urandom
        self._lock = threading.Lock()
        self._history: dict[str, list[Any]] = {}

    def make_server(self, port: int) -> socketserver.TCPServer:
        return _Server(self, port)

    def serve_forever(self) -> None:
        """Serve in the calling thread (process mode) until interrupted."""
        self.bind()
        assert self._server is not None
        try:
            self._server.serve_forever(poll_interval=0.05)
        finally:
            self._server.server_close()

    # ---- state used by the handler ----

    def record(self, request: RecordedRequest) -> None:
        with self._lock:
            self.requests.append(request)

    def model_requests(self) -> list[RecordedRequest]:
        """The received requests that were model calls (any of the four dialects)."""
        with self._lock:
            return [r for r in self.requests if r.dialect is not None]

    def clear(self) -> None:
        with self._lock:
            self.requests.clear()

    def rng(self) -> random.Random:
        """A generator of the fake's own for one answer (seeded from the fake's, so a seeded
        fake answers the same)."""
        with self._lock:
            return random.Random(self._rng.random())

    def now(self) -> int:
        return FIXED_CREATED if self.seed is not None else int(time.time())

    def rand_id(self, prefix: str, length: int, alphabet: str = _ALNUM) -> str:
        with self._lock:
            return prefix + "".join(self._rng.choice(alphabet) for _ in range(length))

    def model_entry(self, model: str) -> dict[str, Any]:
        created = FIXED_CREATED
        return {
            "id": model,
            "object": "model",
            "created": created,
            "owned_by": "flowproof-fake",
            "type": "model",
            "display_name": model,
            "created_at": "2023-11-14T22:13:20Z",
        }

    def remember_response(
        self, response_id: str, body: dict[str, Any], output: list[dict[str, Any]]
    ) -> None:
        with self._lock:
            earlier = self._history.get(str(body.get("previous_response_id")), [])
            self._history[response_id] = [*earlier, *_responses_items(body), *output]

    def answer(self, dialect: str, body: dict[str, Any]) -> Reply:
        if self.script is not None:
            return self.script(dialect, body)
        history: list[Any] = []
        if dialect == DIALECT_RESPONSES and body.get("previous_response_id"):
            with self._lock:
                history = list(self._history.get(str(body["previous_response_id"]), []))
        return decide(conversation_of(dialect, body, history))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="flowproof's scripted fake model upstream")
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (0: any free)")
    parser.add_argument("--seed", type=int, default=None, help="deterministic ids and created")
    args = parser.parse_args(argv)
    fake = FakeUpstream(seed=args.seed, port=args.port)
    print(f"listening on {fake.bind()}", flush=True)
    with contextlib.suppress(KeyboardInterrupt):
        fake.serve_forever()
    return 0


if __name__ == "__main__":
    sys.exit(main())
