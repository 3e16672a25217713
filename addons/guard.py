"""Refuse everything that would make the proxy a relay, and everything no boundary answered.

The proxy is an unauthenticated loopback endpoint with a fixed upstream. Two addons hold
the line, one at each end of the addon chain:

- `RequestGuard`, first: no tunnel (CONNECT), no absolute-form request lines
  (`GET http://elsewhere/ HTTP/1.1`), no HTTP/2 by prior knowledge, no control characters
  in a header; and only the model routes of the dialects and the requests an MCP listener
  claimed (`routes.CLAIMED`) go on: anything else is a 404 with a JSON body saying it is
  not a model endpoint flowproof records, and on a model listener it fails the flow (every
  addon with a `flowproof_unknown_endpoint(flow, message)` method is told), unless it is a
  probe that asks nothing of a model (`HEAD` or `OPTIONS`, or a `GET` of the root path).
- `Backstop`, last: a request still unanswered there, and not forwarded on purpose by a
  boundary (`mark_forwarded`), would go on to mitmproxy's placeholder reverse target. It is
  refused with a 500 instead, and counted against the flow of its listener: every addon
  with a `flowproof_refused(flow, message)` method is told.

The backstop also watches mitmproxy's own log for a connection whose handling crashed (a
request it cannot read, such as one with HTTP/1 trailers): that connection would stay open
unanswered until the agent gave up. It is closed at once, and its listener's flow fails.

`request_body` is how both boundaries read a body: one whose Content-Encoding flowproof
cannot decode is refused, never read as if it were plain.
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from mitmproxy import addonmanager, connection, http

from flowproof_addons.connections import cancel_client_reader
from flowproof_cli.dialects import DIALECTS, Dialect, dialect_named, route
from flowproof_cli.providers import unknown_path_hint
from flowproof_cli.quoting import failure, quoted
from flowproof_cli.routes import CLAIMED, ROUTED, is_mcp_path

ROUTES_ANSWERED = (
    ", ".join(
        dict.fromkeys(
            f"{'GET ' if dialect.method == 'GET' else ''}"
            f"...{'' if suffix.startswith(':') else '/'}{suffix}"
            for dialect in DIALECTS
            for suffix in dialect.route_suffixes
        )
    )
    + ", and /mcp paths of declared MCP servers"
)
#: `flow.metadata` key a boundary sets on a request it forwards on purpose (record, or the
#: MCP replay's loopback stream server): the backstop lets exactly those through.
#: Metadata of a request whose connection a flow fault closed unanswered (`connection:
#: reset`): not a failure of the flow.
RESET_BY_FAULT = "flowproof_reset_by_fault"
FORWARDED = "flowproof_forwarded"
#: Content-Encodings mitmproxy decodes; any other would be read as if it were plain.
DECODABLE = frozenset({"", "identity", "none", "gzip", "deflate", "br", "zstd"})
_CONTROL = re.compile(rb"[\x00-\x08\x0a-\x1f\x7f]")  # HTAB is allowed in a field value
_SHOWN_LIMIT = 80
#: The logger and the message with which mitmproxy reports a connection it failed to handle.
_SERVER_LOGGER = "mitmproxy.proxy.server"
_CRASHED = "mitmproxy has crashed"


def is_claimed(
    path: str,
    metadata: Mapping[str, Any] | None = None,
    headers: Mapping[str, str] | None = None,
    method: str | None = None,
) -> bool:
    """A model route (its headers and method, when given, route it as the boundary will),
    or a request a boundary claimed on an MCP server's own listener."""
    return route(path, headers, method) is not None or bool(metadata and metadata.get(CLAIMED))


#: Methods that carry no call: a reachability probe (Claude Code sends `HEAD /` to its base
#: URL first) and a CORS preflight.
PROBE_METHODS = frozenset({"HEAD", "OPTIONS"})


def is_probe(method: str, path: str) -> bool:
    """A request that asks nothing of a model: a HEAD or OPTIONS, or a GET of the root of
    the listener. It is answered 404 like any unknown path, but fails no flow. A POST to the
    root is a call the agent lost (google-genai in Vertex mode with no path), so it fails."""
    if method.upper() in PROBE_METHODS:
        return True
    return method.upper() == "GET" and path.split("?", 1)[0] in ("", "/")


def routed(flow: http.HTTPFlow) -> Dialect | None:
    """The dialect the model boundary answers this request with, if any: routed once, on
    the request as the agent sent it (record rewrites it to forward it), then read from
    `flow.metadata`. A CONNECT is no model call."""
    name = flow.metadata.get(ROUTED)
    if name is not None:
        return dialect_named(name) if name else None
    request = flow.request
    dialect = (
        None
        if request.method == "CONNECT"
        else route(request.path, request.headers, request.method)
    )
    flow.metadata[ROUTED] = dialect.name if dialect is not None else ""
    return dialect


def mark_forwarded(flow: http.HTTPFlow) -> None:
    flow.metadata[FORWARDED] = True


def refuse(flow: http.HTTPFlow, status: int, message: str, kind: str = "flowproof_refused") -> None:
    """Answer with a flowproof error; SDKs must not retry it (they retry a 500 otherwise).
    On a model route, in that dialect's error shape (Google's carries the status)."""
    text = f"flowproof: {message}"
    dialect = routed(flow)
    error = (
        dialect.error_body(text, kind, status)
        if dialect is not None
        else {"error": {"message": text, "type": kind}}
    )
    body = json.dumps(error)
    headers = {"content-type": "application/json", "x-should-retry": "false"}
    flow.response = http.Response.make(status, body, headers)


def shown(raw: bytes | str, limit: int = _SHOWN_LIMIT) -> str:
    """Bytes of a request as a message may quote them: control characters escaped, clipped."""
    return quoted(raw, limit, encoding="latin-1")  # header bytes: latin-1, as HTTP has them


@dataclass(frozen=True)
class Refusal:
    """A request body flowproof will not read: the status and what the agent is told."""

    status: int
    text: str


def request_body(request: http.Request) -> bytes | Refusal:
    """The decoded body, or why it is refused (mitmproxy hands an unknown coding on as is)."""
    said = request.headers.get("content-encoding", "")
    encoding = said.strip().lower()
    if encoding not in DECODABLE:
        path = shown(request.path.split("?", 1)[0], 200)
        return Refusal(
            415,
            f"the request to {path} says Content-Encoding: {shown(said)}, which flowproof "
            "cannot decode (send it as identity, gzip, deflate, br or zstd)",
        )
    try:
        return request.get_content() or b""
    except ValueError:  # decoding raised: an exception like any other while handling (500)
        path = shown(request.path.split("?", 1)[0], 200)
        return Refusal(
            500,
            f"the request to {path} says Content-Encoding: {encoding}, but its body is not "
            f"{encoding} data",
        )


def _bad_header(request: http.Request) -> bytes | None:
    fields = request.headers.fields
    if not _CONTROL.search(b"\t".join(part for field in fields for part in field)):
        return None  # one search for the whole head, on every request: HTAB is allowed
    for name, value in fields:
        if _CONTROL.search(name) or _CONTROL.search(value):
            return name
    return None


def _path(flow: http.HTTPFlow) -> str:
    return shown(flow.request.path.split("?", 1)[0])


class _Chained:
    """An addon that sees the master's whole chain: to tell the boundaries a request of
    theirs was refused (`flowproof_refused`, so its flow fails)."""

    name: str

    def __init__(self, name: str) -> None:
        self.name = name  # unique per script: mitmproxy refuses two addons of one name
        self._master: Any = None

    def load(self, loader: addonmanager.Loader) -> None:
        self._master = loader.master

    def _chain(self) -> list[Any]:
        return list(addonmanager.traverse(self._master.addons.chain)) if self._master else []

    @staticmethod
    def _tell(chain: list[Any], flow: http.HTTPFlow, message: str) -> None:
        for addon in chain:
            counted = getattr(addon, "flowproof_refused", None)
            if callable(counted):
                counted(flow, message)


class RequestGuard(_Chained):
    """The front of the chain (`-s model.py -s mcp_http.py` load one each)."""

    def __init__(self, name: str = "requestguard") -> None:
        super().__init__(name)

    def requestheaders(self, flow: http.HTTPFlow) -> None:
        if flow.response is not None or flow.error is not None:
            return  # refused already: by another script's guard, or by mitmproxy itself
        request = flow.request
        if request.method == "CONNECT":
            refuse(flow, 405, "CONNECT is refused: this proxy is not a tunnel")
        elif request.method == "PRI" and request.http_version == "HTTP/2.0":
            refuse(flow, 505, "HTTP/2 with prior knowledge is refused: speak HTTP/1.1 here")
            # Read as HTTP/1.1 from here on, as it is answered: mitmproxy's h2c addon would
            # otherwise kill the connection unanswered.
            request.http_version = "HTTP/1.1"
        elif request.authority and request.http_version.startswith("HTTP/1"):
            self._refuse_call(
                flow, "absolute-form request lines are refused: this proxy is not a relay"
            )
        elif (name := _bad_header(request)) is not None:
            self._refuse_call(
                flow,
                f"the request header {shown(name)!r} carries a control character (CR, LF, NUL "
                "or another): it is refused",
            )

    def _refuse_call(self, flow: http.HTTPFlow, message: str) -> None:
        """A 400; when it was a model or MCP call, its flow fails too (the agent lost it)."""
        refuse(flow, 400, message)
        path = flow.request.path
        if routed(flow) is not None or is_mcp_path(path):
            self._tell(self._chain(), flow, message)

    def request(self, flow: http.HTTPFlow) -> None:
        request = flow.request
        if flow.response is None and routed(flow) is None and not flow.metadata.get(CLAIMED):
            message = (
                f"{request.method} {_path(flow)} is not a model endpoint flowproof records "
                f"(it records {ROUTES_ANSWERED})"
                f"{unknown_path_hint(request.path, request.headers)}"
            )
            refuse(flow, 404, message, "flowproof_unknown_endpoint")
            if is_probe(request.method, request.path):
                return
            # On a model listener the agent lost a call it meant to make: its flow fails,
            # naming it, rather than passing on whatever the agent did without the answer.
            for addon in self._chain():
                unknown = getattr(addon, "flowproof_unknown_endpoint", None)
                if callable(unknown):
                    unknown(flow, message)


class Backstop(_Chained):
    """The end of the chain: no request reaches the placeholder reverse target. With two
    scripts loaded, only the last backstop decides (a later script's boundary may still
    answer)."""

    def __init__(self, name: str = "backstop") -> None:
        super().__init__(name)
        self._watch: _CrashWatch | None = None

    def _decides(self, chain: list[Any]) -> bool:
        later = chain[chain.index(self) + 1 :] if self in chain else []
        return not any(isinstance(addon, Backstop) for addon in later)

    def request(self, flow: http.HTTPFlow) -> None:
        if flow.response is not None or flow.error is not None or flow.metadata.get(FORWARDED):
            return
        chain = self._chain()
        if not self._decides(chain):
            return
        sockname = flow.client_conn.sockname
        where = f"127.0.0.1:{sockname[1]}" if sockname else "this proxy"
        message = (
            f"{flow.request.method} {_path(flow)} reached no flowproof boundary on this "
            f"listener ({where}); it was refused, not forwarded"
        )
        refuse(flow, 500, message, "flowproof_unanswered")
        self._tell(chain, flow, message)

    def running(self) -> None:
        if self._watch is None:
            self._watch = _CrashWatch(self)
            logging.getLogger(_SERVER_LOGGER).addHandler(self._watch)

    def done(self) -> None:
        if self._watch is not None:
            logging.getLogger(_SERVER_LOGGER).removeHandler(self._watch)
            self._watch = None

    def crashed(self, peername: Any, reason: str) -> None:
        """mitmproxy failed while handling the connection from `peername`: it is closed (it
        would stay open unanswered) and the flow of its listener fails."""
        chain = self._chain()
        if not self._decides(chain):
            return
        proxyserver = self._master.addons.get("proxyserver") if self._master else None
        connections = getattr(proxyserver, "connections", {})
        handler = next(
            (h for h in list(connections.values()) if h.client.peername == peername), None
        )
        if handler is None:
            return
        asyncio.get_running_loop().call_soon(cancel_client_reader, handler)
        sockname = handler.client.sockname
        where = f"127.0.0.1:{sockname[1]}" if sockname else "this proxy"
        self._tell(
            chain,
            _stand_in_flow(handler.client),
            f"mitmproxy could not handle a request on this listener ({where}): {reason}; its "
            "connection was closed unanswered",
        )

    def error(self, flow: http.HTTPFlow) -> None:
        """A model or MCP request that failed before a boundary had it whole (a broken
        chunk, a header mitmproxy refused, a client gone mid-body): no answer can reach the
        agent, so its flow fails."""
        if flow.response is not None or flow.metadata.get(FORWARDED):
            return
        if flow.metadata.get(RESET_BY_FAULT):  # a flow fault closed it on purpose
            return
        request = flow.request
        claimed = routed(flow) is not None or bool(flow.metadata.get(CLAIMED))
        if not (claimed or is_mcp_path(request.path)):
            return
        chain = self._chain()
        if not self._decides(chain):
            return
        reason = shown(flow.error.msg, 200) if flow.error else "the connection broke"
        self._tell(
            chain,
            flow,
            f"{flow.request.method} {_path(flow)} failed before flowproof could answer it "
            f"({reason})",
        )


def _stand_in_flow(client: connection.Client) -> http.HTTPFlow:
    """What `flowproof_refused` is handed when no flow survived: the boundaries find the
    session by the client connection's listening port."""
    return http.HTTPFlow(client, connection.Server(address=None))


class _CrashWatch(logging.Handler):
    """Hands each crash mitmproxy logs for a client connection to the backstop."""

    def __init__(self, backstop: Backstop) -> None:
        super().__init__(logging.ERROR)
        self.backstop = backstop

    def emit(self, record: logging.LogRecord) -> None:
        peername = getattr(record, "client", None)
        if peername is None or not record.getMessage().startswith(_CRASHED):
            return
        cause = record.exc_info[1] if record.exc_info else None
        reason = failure(cause) if cause is not None else record.getMessage()
        try:
            self.backstop.crashed(peername, reason)
        except Exception:  # a log handler must not raise into mitmproxy
            self.handleError(record)


addons = [RequestGuard()]
