"""A mitmproxy content view that reads a model call or an MCP message as a conversation.

mitmweb shows a model request as a wall of JSON; this view shows it the way `flowproof show`
does (its outline comes from the same dialects and `evidence/trace_view.py`): the system
prompt, the user's words, the assistant's text and tool calls with their arguments, tool
results (mocked ones marked when the flow's metadata names the mocked tools), and the
reply; in a conversation, headed by the turn the call was made in. A streamed answer is
reassembled first, by its dialect (`answer_from_body`); an
endpoint call (embeddings, token counts, ...) reads as what was asked and what came back,
never as a reply. MCP JSON-RPC reads by
method and tool. Loaded with `mitmweb -s addons/model.py` (or `mcp_http.py`), it is the
default view of those bodies and steps aside (priority 0) for every other body.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from flowproof_cli.dialects import ENDPOINT, Dialect, route
from flowproof_cli.dialects.base import MessageOutline
from flowproof_cli.dialects.sse import sse_payloads
from flowproof_cli.evidence.trace_view import (
    SYSTEM_ROLES,
    is_result_part,
    is_text,
    text_of,
    tool_results,
)
from flowproof_cli.routes import is_mcp_path
from flowproof_cli.trajectory import EndpointCall

#: `flow.metadata`: the names of the tools a flow's session answers with mocks.
MOCKED_TOOLS = "flowproof_mocked_tools"
#: `flow.metadata`: True on an MCP call flowproof answered from the spec's mock.
MOCKED_CALL = "flowproof_mocked_call"
#: `flow.metadata`: the conversation turn a model call was made in, as divergences name it
#: (`conversation turn 2 ("Then cancel it, please.")`); absent in a one-turn flow.
CONVERSATION_TURN = "flowproof_conversation_turn"
VIEW_NAME = "flowproof conversation"
#: Above the JSON view (1), so it is the default for the bodies it reads.
PRIORITY = 2.0

Lines = list[str]


class NotReadable(ValueError):
    """The body is not what its path says (garbage at a model route)."""


# -- reading bodies -------------------------------------------------------------------------------


def _json(data: bytes) -> Any:
    try:
        return json.loads(data)
    except (ValueError, UnicodeDecodeError) as exc:
        raise NotReadable(f"not JSON ({exc})") from None


def _is_sse(data: bytes, content_type: str | None) -> bool:
    if content_type:
        return content_type == "text/event-stream"
    head = data.lstrip()[:6]
    return head.startswith((b"data:", b"event:", b"id:"))


def _dicts(value: Any) -> list[dict[str, Any]]:
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


# -- model calls ----------------------------------------------------------------------------------


def _value(content: Any) -> str:
    if is_text(content) or isinstance(content, str):
        return text_of(content)
    return json.dumps(content, ensure_ascii=False, sort_keys=True)


def _block(label: str, text: str) -> Lines:
    body = text.splitlines() or [""]
    if len(body) == 1 and len(label) + len(body[0]) < 100:
        return [f"{label}: {body[0]}"]
    return [f"{label}:", *(f"    {line}" for line in body)]


def _call_line(name: str, arguments: str) -> str:
    return f"-> calls {name} {arguments}" if arguments else f"-> calls {name}"


def _is_call_part(part: Any) -> bool:
    return isinstance(part, dict) and (
        part.get("type") == "tool_use" or "functionCall" in part or "function_call" in part
    )


def _without_calls(content: Any) -> Any:
    """Content parts less the tool calls (shown apart, as calls)."""
    if not isinstance(content, list):
        return content
    return [part for part in content if not _is_call_part(part)]


def _message_lines(
    message: MessageOutline, names: dict[str | None, str], mocked: set[str]
) -> Lines:
    results = tool_results(message)
    if not results:
        label = "system" if message.role in SYSTEM_ROLES else message.role
        content = _without_calls(message.content) if message.tool_calls else message.content
        empty = content in (None, "", [])
        lines = [f"{label}:"] if empty else _block(label, _value(content))
        return lines + [f"  {_call_line(name, args)}" for name, args in message.tool_calls]
    lines = []
    for call_id, name, content in results:
        tool = name or names.get(call_id) or "tool"
        mark = " (mocked)" if tool in mocked else ""
        lines += _block(f"{tool} result{mark}", _value(content))
    parts = message.content if isinstance(message.content, list) else []
    rest = [part for part in parts if not is_result_part(part)]
    return lines + (_block(message.role, _value(rest)) if rest else [])


def _call_names(dialect: Dialect, body: dict[str, Any]) -> dict[str | None, str]:
    """Call id -> tool name for the calls the request's own history made."""
    names: dict[str | None, str] = {}
    for entry in _dicts(body.get(dialect.conversation_key)):
        names.update(dialect._calls_in(entry))  # the dialect's own reading
    return names


def model_request(dialect: Dialect, path: str, data: bytes, mocked: set[str]) -> Lines:
    body = _json(data)
    if not isinstance(body, dict):
        raise NotReadable(f"a {dialect.name} request is a JSON object")
    body = dialect.normalize(path, body)
    outline = dialect.outline(body)
    if dialect.kind == ENDPOINT:
        return [
            f"{dialect.name} request, model {outline.model}",
            "",
            dialect.describe_request(body),
        ]
    tools = list(outline.tools)
    offered = f"{len(tools)} tool(s) offered: {', '.join(tools)}" if tools else "no tools"
    stream = ", streamed" if dialect.wants_stream(body) else ""
    lines = [f"{dialect.name} request, model {outline.model}{stream}, {offered}"]
    if mocked:
        lines.append(f"mocked tools: {', '.join(sorted(mocked))}")
    lines.append("")
    names = _call_names(dialect, body)
    for message in outline.messages:
        lines += _message_lines(message, names, mocked)
    return lines


def response_json(dialect: Dialect, data: bytes, content_type: str | None) -> tuple[Any, str]:
    """The response a body carries (a stream reassembled by its dialect), and how it came."""
    try:
        return dialect.answer_from_body(data, content_type)
    except (ValueError, UnicodeDecodeError) as exc:
        raise NotReadable(str(exc)) from None


def tools_called(
    dialect: Dialect, request: Any, data: bytes, content_type: str | None
) -> list[str]:
    """The names of the tools a successful response asks for (none for anything else)."""
    try:
        response, _ = response_json(dialect, data, content_type)
        if not isinstance(response, dict):
            return []
        answer = dialect.assistant_turn(request if isinstance(request, dict) else {}, response, 0)
    except Exception:  # a body this view cannot read: nothing called
        return []
    return [call.name for call in answer.tool_calls]


def model_response(
    dialect: Dialect, request: Any, data: bytes, status: int | None, content_type: str | None
) -> Lines:
    response, how = response_json(dialect, data, content_type)
    head = f"{dialect.name} response{f', status {status}' if status else ''}{how}"
    failed = status is not None and status >= 400
    if not failed and not isinstance(response, dict):
        raise NotReadable(f"a {dialect.name} answer is a JSON object")
    if failed or not isinstance(response, dict):
        error = response.get("error", response) if isinstance(response, dict) else response
        message = error.get("message", error) if isinstance(error, dict) else error
        return [head, "", *_block("error", _value(message))]
    asked = request if isinstance(request, dict) else {}
    answer = dialect.read_answer(asked, response, 0)  # a call beside the chat, or its turn
    if isinstance(answer, EndpointCall):  # an endpoint's, or an embedding through `invoke`
        return [head, "", answer.answered]
    lines = [head, ""]
    for call in answer.tool_calls:
        lines.append(_call_line(call.name, call.raw_arguments))
    if answer.text:
        lines += _block("assistant" if answer.tool_calls else "reply", answer.text)
    return lines if len(lines) > 2 else [*lines, "(an empty answer)"]


# -- MCP ------------------------------------------------------------------------------------------


def _tool_result(result: Any) -> str:
    """A CallToolResult's text parts joined; any other result as JSON."""
    if isinstance(result, dict) and isinstance(result.get("content"), list):
        text = "\n".join(
            str(part.get("text")) if part.get("type") == "text" else json.dumps(part)
            for part in _dicts(result["content"])
        )
        return f"(isError) {text}" if result.get("isError") else text
    if isinstance(result, dict) and isinstance(result.get("tools"), list):
        names = [str(tool.get("name")) for tool in _dicts(result["tools"])]
        return f"{len(names)} tool(s): {', '.join(names)}"
    return json.dumps(result, ensure_ascii=False, sort_keys=True)


def _rpc_lines(message: Any, arrow: str, mocked: bool) -> Lines:
    if not isinstance(message, dict):
        return [f"{arrow} {json.dumps(message)}"]
    ident = f" #{message['id']}" if "id" in message else ""
    method = message.get("method")
    params = message.get("params")
    if isinstance(method, str):
        kind = "request" if ident else "notification"
        if method == "tools/call" and isinstance(params, dict):
            arguments = json.dumps(params.get("arguments") or {}, ensure_ascii=False)
            return [f"{arrow} {kind}{ident}: tools/call {params.get('name')} {arguments}"]
        shown = f" {json.dumps(params, ensure_ascii=False)}" if params is not None else ""
        return [f"{arrow} {kind}{ident}: {method}{shown}"]
    mark = " (mocked)" if mocked else ""
    if "error" in message:
        error = message["error"] if isinstance(message["error"], dict) else {}
        return _block(f"{arrow} error{ident}{mark}", f"{error.get('code')} {error.get('message')}")
    return _block(f"{arrow} result{ident}{mark}", _tool_result(message.get("result")))


def mcp_lines(data: bytes, content_type: str | None, is_request: bool, mocked: bool) -> Lines:
    arrow = "->" if is_request else "<-"
    if _is_sse(data, content_type):
        messages = [payload for _, payload in sse_payloads(data)]
        head = f"MCP {'request' if is_request else 'answer'}, {len(messages)} SSE message(s)"
    else:
        body = _json(data)
        messages = body if isinstance(body, list) else [body]
        head = f"MCP {'request' if is_request else 'answer'}"
    if not any(isinstance(m, dict) and m.get("jsonrpc") for m in messages):
        raise NotReadable("not JSON-RPC")
    lines = [head, ""]
    for message in messages:
        lines += _rpc_lines(message, arrow, mocked and not is_request)
    return lines


# -- the view -------------------------------------------------------------------------------------


def _content(message: Any) -> bytes:
    if message is None:
        return b""
    try:
        return bytes(message.get_content(strict=False) or b"")
    except (ValueError, AttributeError):
        return b""


def conversation(data: bytes, metadata: Any) -> Lines:
    """The lines of the view for one body; NotReadable when it is not one this view reads."""
    flow = getattr(metadata, "flow", None)
    request = getattr(flow, "request", None)
    message = getattr(metadata, "http_message", None)
    if request is None or message is None or not data:
        raise NotReadable("not the body of an HTTP flow")
    path = str(request.path)
    is_request = message is request
    content_type = getattr(metadata, "content_type", None)
    flow_metadata = getattr(flow, "metadata", None) or {}
    dialect = route(path, getattr(request, "headers", None), getattr(request, "method", None))
    if dialect is not None:
        turn = flow_metadata.get(CONVERSATION_TURN)
        said = [f"{turn}:"] if isinstance(turn, str) and turn else []
        if is_request:
            mocked = {str(name) for name in flow_metadata.get(MOCKED_TOOLS) or ()}
            return said + model_request(dialect, path, data, mocked)
        try:
            body = _json(_content(request))
        except NotReadable:  # the answer reads without the request (Gemini's model aside)
            body = {}
        status = getattr(message, "status_code", None)
        return said + model_response(dialect, body, data, status, content_type)
    if is_mcp_path(path):
        return mcp_lines(data, content_type, is_request, bool(flow_metadata.get(MOCKED_CALL)))
    raise NotReadable("neither a model route nor an MCP path")


class ConversationView:
    """The mitmproxy 12 content view (its `Contentview` protocol)."""

    name = VIEW_NAME
    syntax_highlight: Literal["none"] = "none"

    def __init__(self) -> None:
        # mitmproxy asks every view's priority, then the chosen one prettifies the same body:
        # the body is read once. Kept by identity (the objects are held, so never reused).
        self._last: tuple[tuple[Any, ...], Lines | None] | None = None

    def _lines(self, data: bytes, metadata: Any) -> Lines | None:
        key = (data, getattr(metadata, "flow", None), getattr(metadata, "http_message", None))
        last = self._last
        if last is not None and all(a is b for a, b in zip(last[0], key, strict=True)):
            return last[1]
        try:
            lines: Lines | None = conversation(data, metadata)
        except Exception:  # garbage of any shape: this view steps aside
            lines = None
        self._last = (key, lines)
        return lines

    def prettify(self, data: bytes, metadata: Any) -> str:
        lines = self._lines(data, metadata)
        if lines is None:
            try:
                conversation(data, metadata)
            except Exception as exc:
                return f"not a conversation: {exc}"
        return "\n".join(lines or [])

    def render_priority(self, data: bytes, metadata: Any) -> float:
        return PRIORITY if self._lines(data, metadata) is not None else 0.0

    def __lt__(self, other: Any) -> bool:
        return bool(self.name < other.name)


VIEW = ConversationView()


class ConversationViews:
    """An addon that registers the view when loaded into mitmdump/mitmweb (`-s`)."""

    def __init__(self, name: str = "conversationviews"):
        self.name = name  # unique: model.py and mcp_http.py each load one

    def load(self, loader: Any) -> None:
        register()


def register() -> None:
    """Add the view to mitmproxy's registry once (imported here: not on the replay path)."""
    from mitmproxy import contentviews  # noqa: PLC0415

    if VIEW_NAME not in contentviews.registry:
        contentviews.add(VIEW)
