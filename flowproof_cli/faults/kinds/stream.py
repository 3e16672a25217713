"""`stream: cut after N chunks` and `stream: error event after N chunks`.

A chunk is one event of the answer's stream as the agent asked for it: an SSE event (the
final `data: [DONE]` is one), an NDJSON line, an AWS event-stream frame. A cut sends the
first N and ends the body there, cleanly, without the stream's terminal event: what an agent
sees when a stream stops early (a client that reads to the end takes it for the whole
answer). An error event sends the first N, then the dialect's own in-band error event (the
one its real service sends when a stream fails after it started).
"""

from __future__ import annotations

import json
import re
import struct
from dataclasses import replace

from flowproof_cli.dialects import Dialect, Rendered, eventstream
from flowproof_cli.faults.kinds.call import FaultedCall
from flowproof_cli.faults.plan import Fault

_SSE_EVENT_END = re.compile(rb"\r\n\r\n|\n\n|\r\r")
_MESSAGE = "The stream failed: the server had an error while streaming (injected by a flow fault)."


def chunks(rendered: Rendered) -> list[bytes] | None:
    """The chunks of a streamed body, each with its own separator; None for a body that is
    not a stream (JSON)."""
    media = rendered.content_type.split(";")[0].strip().lower()
    body = rendered.body
    if media == "text/event-stream":
        found, at = [], 0
        for end in _SSE_EVENT_END.finditer(body):
            found.append(body[at : end.end()])
            at = end.end()
        return found + ([body[at:]] if body[at:].strip() else [])
    if media == "application/x-ndjson":
        return [line + b"\n" for line in body.split(b"\n") if line.strip()]
    if media == eventstream.CONTENT_TYPE:
        found, at = [], 0
        while at + 4 <= len(body):
            (total,) = struct.unpack_from(">I", body, at)
            found.append(body[at : at + total])
            at += max(total, 4)
        return found
    return None


def _streamed(fault: Fault, call: FaultedCall) -> tuple[Rendered, list[bytes]] | str:
    """The call's answer as streamed and its chunks, or why a stream fault cannot apply."""
    if not call.streamed:
        return f"{fault.at} was not streamed (a `stream:` fault alters a streamed answer only)"
    rendered = call.rendered(call.response)
    parts = chunks(rendered)
    if rendered.status != 200 or parts is None:
        return f"{fault.at} was not answered with a stream flowproof can cut"
    if int(fault.value) >= len(parts):
        return (
            f"{fault.at} streamed {len(parts)} chunk(s): a fault after {fault.value} "
            f"leaves nothing out. Fix: name a count below {len(parts)}"
        )
    return rendered, parts


def cut(fault: Fault, call: FaultedCall) -> Rendered | str:
    streamed = _streamed(fault, call)
    if isinstance(streamed, str):
        return streamed
    rendered, parts = streamed
    return replace(rendered, body=b"".join(parts[: int(fault.value)]))


def error_event(fault: Fault, call: FaultedCall) -> Rendered | str:
    streamed = _streamed(fault, call)
    if isinstance(streamed, str):
        return streamed
    event = _error_event(call.dialect)
    if event is None:
        return f"the {call.dialect.name} dialect has no in-band error event"
    rendered, parts = streamed
    return replace(rendered, body=b"".join(parts[: int(fault.value)]) + event)


def _sse(payload: object, event: str | None = None) -> bytes:
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {json.dumps(payload)}\n\n".encode()


def _error_event(dialect: Dialect) -> bytes | None:
    """The event a stream of `dialect` fails with, as its service sends it."""
    name, provider = dialect.name, dialect.provider
    if name.endswith("-responses"):
        payload = {"type": "error", "code": "server_error", "message": _MESSAGE, "param": None}
        return _sse(payload, "error")
    if name in ("anthropic", "vertex-anthropic"):
        error = {"type": "overloaded_error", "message": "Overloaded"}
        return _sse({"type": "error", "error": error}, "error")
    if provider in ("gemini", "vertex"):
        return _sse({"error": {"code": 503, "message": _MESSAGE, "status": "UNAVAILABLE"}})
    if provider == "ollama":
        return json.dumps({"error": _MESSAGE}).encode() + b"\n"
    if provider == "bedrock":
        return eventstream.exception("modelStreamErrorException", _MESSAGE)
    if provider in ("openai", "azure"):
        return _sse(
            {"error": {"message": _MESSAGE, "type": "server_error", "param": None, "code": None}}
        )
    return None
