"""mitmweb for a trajectory: a recorded trace's flows (`flowproof inspect`), or a run's, live.

mitmweb runs as a child process (the venv's `mitmweb`), not as a second master in this
process: mitmproxy's `ctx` is one global per process, and a WebMaster beside the run's
embedded master would take it over; the child also keeps mitmweb's thirty default addons
and its web server out of the run's imports. Flows reach it through its stdin, one
mitmproxy flow frame each (`addons/inspect_feed.py` loads them in order); when this process
ends, however it ends, the child sees the end of its stdin and stops.

The web UI listens on 127.0.0.1 only, behind a token generated here and printed once (the
child gets only its argon2 hash on its command line); no proxy listener is opened, no
browser launched, and mitmproxy's files go to a temporary confdir.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import logging
import queue
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from flowproof_cli.errors import ConfigError, PortInUseError
from flowproof_cli.process import held_temp_folder, remove_held_folder
from flowproof_cli.runner.listeners import LOOPBACK, bind_loopback, port_of

if TYPE_CHECKING:
    from mitmproxy import http

    from flowproof_cli.trace import Trace

log = logging.getLogger(__name__)
_READY_TIMEOUT_S = 60.0
_STOP_TIMEOUT_S = 5.0
#: Hosts the flows of a trace show under: they were recorded through flowproof's listeners.
MODEL_HOST = "model"
#: Metadata keys the child gets (other values may not be serializable, and are not its).
_SHARED_METADATA = ("flowproof_",)
#: The flow list's columns: the comment says which turn and which tools.
COLUMNS = ("index", "method", "path", "status", "size", "comment")


def _mitmweb_command() -> list[str]:
    """The venv's mitmweb beside this interpreter; else the same entry point through it."""
    found = shutil.which("mitmweb", path=str(Path(sys.executable).parent))
    if found:
        return [found]
    return [sys.executable, "-c", "from mitmproxy.tools.main import mitmweb; mitmweb()"]


def _feed_script() -> str:
    spec = importlib.util.find_spec("flowproof_addons.inspect_feed")
    if spec is None or spec.origin is None:
        raise ConfigError("flowproof_addons is not installed: reinstall flowproof")
    return spec.origin


def _free_port(port: int) -> int:
    """`port` if nothing listens there (0: any free one); else PortInUseError, at once."""
    try:
        sock = bind_loopback(port)
    except PortInUseError:
        raise PortInUseError(
            port,
            f"the inspect port 127.0.0.1:{port} is already in use. Fix: stop whatever listens "
            "there, or give another --port (0: any free one)",
        ) from None
    try:
        return port_of(sock)
    finally:
        sock.close()


def _portable(value: Any) -> bool:
    """A value mitmproxy's flow format can carry."""
    if value is None or isinstance(value, str | bytes | int | float | bool):
        return True
    if isinstance(value, list | tuple):
        return all(_portable(item) for item in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _portable(v) for k, v in value.items())
    return False


def frame(flow: http.HTTPFlow) -> bytes:
    """The flow in mitmproxy's flow-file format, with only flowproof's portable metadata."""
    from mitmproxy.io import tnetstring  # noqa: PLC0415 (the engine: lazy)

    state: Any = flow.get_state()
    state["metadata"] = {
        key: value
        for key, value in state["metadata"].items()
        if key.startswith(_SHARED_METADATA) and _portable(value)
    }
    return bytes(tnetstring.dumps(state))


class WebView:
    """The mitmweb child: `start()` (its URL, token included), `feed()`, `close()`."""

    def __init__(self, port: int = 0):
        self.port = _free_port(port)
        self.token = secrets.token_urlsafe(18)
        self._confdir = held_temp_folder("flowproof-inspect-")  # goes even if flowproof is killed
        self._log = Path(self._confdir) / "mitmweb.log"
        self._process: subprocess.Popen[bytes] | None = None
        self._queue: queue.SimpleQueue[bytes | None] = queue.SimpleQueue()
        self._writer: threading.Thread | None = None

    @property
    def address(self) -> str:
        return f"http://{LOOPBACK}:{self.port}/"

    @property
    def url(self) -> str:
        """The address with the token: whoever has it can see the flows."""
        return f"{self.address}?token={self.token}"

    def start(self) -> str:
        import argon2  # noqa: PLC0415 (mitmweb's own dependency)

        hashed = argon2.PasswordHasher().hash(self.token)
        settings = {
            "server": "false",
            "web_open_browser": "false",
            "web_host": LOOPBACK,
            "web_port": str(self.port),
            "web_password": hashed,
            "confdir": self._confdir,
            "termlog_verbosity": "warn",
        }
        command = [*_mitmweb_command(), "-q", "-s", _feed_script()]
        for key, value in settings.items():
            command += ["--set", f"{key}={value}"]
        for column in COLUMNS:  # a sequence option: one --set per item
            command += ["--set", f"web_columns={column}"]
        with self._log.open("wb") as log:
            self._process = subprocess.Popen(
                command,
                stdin=subprocess.PIPE,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # Ctrl-C reaches flowproof, which stops it cleanly
            )
        self._writer = threading.Thread(target=self._write, name="mitmweb-feed", daemon=True)
        self._writer.start()
        self._wait_ready()
        return self.url

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + _READY_TIMEOUT_S
        while time.monotonic() < deadline:
            if self._process is None or self._process.poll() is not None:
                raise ConfigError(f"mitmweb did not start: {self._log_tail()}")
            with contextlib.suppress(OSError), socket.create_connection((LOOPBACK, self.port), 1):
                return
            time.sleep(0.05)
        raise ConfigError(f"mitmweb did not listen on port {self.port} within 60 s")

    def _log_tail(self) -> str:
        try:
            lines = self._log.read_text(errors="replace").strip().splitlines()
        except OSError:
            lines = []
        return " / ".join(lines[-3:]) or "it exited without a message"

    def _write(self) -> None:
        process = self._process
        assert process is not None and process.stdin is not None
        while (data := self._queue.get()) is not None:
            try:
                process.stdin.write(data)
                process.stdin.flush()
            except (BrokenPipeError, OSError, ValueError):  # the child is gone: drop the rest
                return

    def feed(self, flow: http.HTTPFlow) -> None:
        """Hand a flow to the view (serialized now: the flow goes on changing)."""
        self._queue.put(frame(flow))

    @property
    def alive(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def serve_until_stopped(self) -> None:
        """Block until Ctrl-C or SIGTERM (or the child exits on its own)."""
        stop = threading.Event()
        handlers = {
            sig: signal.signal(sig, lambda *_: stop.set())
            for sig in (signal.SIGINT, signal.SIGTERM)
        }
        try:
            while not stop.wait(0.2) and self.alive:
                pass
        finally:
            for sig, handler in handlers.items():
                signal.signal(sig, handler)
        if not stop.is_set():
            raise ConfigError(f"mitmweb stopped on its own: {self._log_tail()}")

    def close(self) -> None:
        """Stop the child: the end of its stdin first, then SIGTERM, then SIGKILL."""
        process, self._process = self._process, None
        self._queue.put(None)
        if self._writer is not None:
            self._writer.join(_STOP_TIMEOUT_S)
        if process is not None:
            with contextlib.suppress(OSError):
                if process.stdin is not None:
                    process.stdin.close()
            try:
                process.wait(_STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                process.terminate()
                try:
                    process.wait(_STOP_TIMEOUT_S)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
        remove_held_folder(self._confdir)


# -- a trace as flows ------------------------------------------------------------------------------


def _path_for(protocol: str, request: Any) -> str:
    """The path the dialect answers on (Gemini's names the model, as its API does)."""
    from flowproof_cli.dialects import dialect_named  # noqa: PLC0415

    suffix = dialect_named(protocol).route_suffixes[0]
    if suffix.startswith(":"):
        model = request.get("model") if isinstance(request, dict) else None
        return f"/v1beta/models/{model or 'model'}{suffix}"
    return f"/v1/{suffix}"


def _flow(host: str, path: str, request: Any, status: int, response: Any) -> http.HTTPFlow:
    from mitmproxy import connection, http  # noqa: PLC0415 (the engine: lazy)

    now = time.time()
    client = connection.Client(peername=(LOOPBACK, 0), sockname=(LOOPBACK, 0), timestamp_start=now)
    server = connection.Server(address=(host, 80))
    flow = http.HTTPFlow(client, server)
    body = json.dumps(request, ensure_ascii=False, indent=2).encode()
    kind = "application/json"
    flow.request = http.Request.make(
        "POST", f"http://{host}{path}", body, http.Headers(content_type=kind)
    )
    answer = json.dumps(response, ensure_ascii=False, indent=2).encode()
    flow.response = http.Response.make(status, answer, http.Headers(content_type=kind))
    return flow


@dataclass(frozen=True)
class Described:
    """One flow of a trace and the comment it carries in the view."""

    flow: http.HTTPFlow
    comment: str


def turn_comment(
    number: int, protocol: str, tools: list[str], conversation: str | None = None
) -> str:
    """`turn 3, openai-chat, tools called: ...`, led in a conversation by the turn it was
    made in: `conversation turn 2 ("Then cancel it, please."): turn 3, ...`."""
    called = f"tools called: {', '.join(tools)}" if tools else "no tool called"
    said = f"turn {number}, {protocol}, {called}"
    return f"{conversation}: {said}" if conversation else said


def trace_flows(trace: Trace, source: str) -> list[http.HTTPFlow]:
    """The trace's model turns in recorded order, then each MCP server's calls in order (a
    trace keeps no clock that would interleave the two); each flow commented."""
    from flowproof_addons.conversation import (  # noqa: PLC0415
        CONVERSATION_TURN,
        MOCKED_CALL,
        MOCKED_TOOLS,
    )
    from flowproof_cli.cassette.conversation import turn_label  # noqa: PLC0415
    from flowproof_cli.evidence.trace_view import turn_views  # noqa: PLC0415

    flows = []
    for view in turn_views(trace, source):  # a TraceError names the turn it cannot read
        turn = trace.turns[view.number - 1]
        flow = _flow(
            MODEL_HOST,
            _path_for(view.protocol, turn.request),
            turn.request,
            view.status,
            view.response,
        )
        tools = [call.name for call in view.answer.tool_calls] if view.answer else []
        said = None
        if trace.conversation is not None and turn.conversation_turn is not None:
            number = turn.conversation_turn  # the recorded tag, never the position
            said = turn_label(number, trace.conversation.message(number))
            flow.metadata[CONVERSATION_TURN] = said
        flow.comment = turn_comment(view.number, view.protocol, tools, said)
        if trace.mocks:
            flow.metadata[MOCKED_TOOLS] = sorted(trace.mocks)
        flows.append(flow)
    for server in sorted(trace.mcp):
        for number, call in enumerate(trace.mcp[server].calls, start=1):
            message = {"jsonrpc": "2.0", "id": number, "method": call.method}
            if call.params is not None:
                message["params"] = call.params
            answer: dict[str, Any] = {"jsonrpc": "2.0", "id": number, **call.answer_message()}
            flow = _flow(f"mcp-{server}", "/mcp", message, call.status or 200, answer)
            mocked = " (mocked)" if call.mocked else ""
            flow.comment = f"MCP {server} call {number}, {call.label()}{mocked}"
            flow.metadata[MOCKED_CALL] = call.mocked
            flows.append(flow)
    return flows


# -- a run, live ---------------------------------------------------------------------------------


class FlowTap:
    """An addon on the run's master: each finished flow, commented, handed to the view.

    It runs after the boundaries, so a divergent turn arrives marked with its summary.
    """

    def __init__(self, view: WebView):
        self._view = view
        self._turns: dict[int, int] = {}  # listening port -> model turns seen on it

    def _comment(self, flow: http.HTTPFlow) -> None:
        from flowproof_addons.conversation import CONVERSATION_TURN, tools_called  # noqa: PLC0415
        from flowproof_cli.dialects import route  # noqa: PLC0415

        dialect = route(flow.request.path, flow.request.headers, flow.request.method)
        if dialect is None or flow.response is None:
            return
        sockname = flow.client_conn.sockname
        port = int(sockname[1]) if sockname else 0
        number = self._turns[port] = self._turns.get(port, 0) + 1
        try:
            request = json.loads(flow.request.get_content(strict=False) or b"{}")
        except ValueError:
            request = {}
        content = flow.response.get_content(strict=False) or b""
        kind = flow.response.headers.get("content-type", "").split(";")[0].strip() or None
        called = tools_called(dialect, request, content, kind)
        conversation = flow.metadata.get(CONVERSATION_TURN)  # set by the session's boundary
        said = conversation if isinstance(conversation, str) else None
        note = turn_comment(number, dialect.name, called, said)
        flow.comment = f"{note}; {flow.comment}" if flow.comment else note

    def response(self, flow: http.HTTPFlow) -> None:
        self._hand_on(flow, comment=True)

    def error(self, flow: http.HTTPFlow) -> None:
        if flow.response is None:
            self._hand_on(flow, comment=False)

    def _hand_on(self, flow: http.HTTPFlow, *, comment: bool) -> None:
        """The view is a bystander: nothing it fails at may disturb the run."""
        try:
            if comment:
                self._comment(flow)
            self._view.feed(flow)
        except Exception as exc:
            log.warning("flowproof: a flow was not shown in mitmweb: %s", exc)


class LiveView:
    """`run --inspect`: the view and its tap (nothing at all without the flag); once the
    run has its verdicts (`ran`), the view keeps serving until Ctrl-C (`finish`)."""

    def __init__(self, view: WebView | None):
        self.view = view
        self.addons: list[Any] = [FlowTap(view)] if view is not None else []
        self.finished = False
        self.url = view.url if view is not None else ""

    @classmethod
    def start(cls, enabled: bool, port: int = 0) -> LiveView:
        if not enabled:
            return cls(None)
        view = WebView(port)
        try:
            view.start()
        except BaseException:
            view.close()
            raise
        return cls(view)

    def run[R](self, runner: Callable[..., R], *args: Any, **kwargs: Any) -> R:
        """`runner(*args, **kwargs)` with the tap on the run's proxy (`execute`, `run_jobs`);
        once it returns, the run has its verdicts."""
        result = runner(*args, addons=self.addons, **kwargs)
        self.finished = True
        return result

    def finish(self, say: Callable[[str], None]) -> None:
        """After a finished run, serve until Ctrl-C or SIGTERM; then (always) stop the view."""
        view, self.view = self.view, None
        if view is None:
            return
        try:
            if self.finished:
                # the token was printed once, at the start; the browser holds its cookie
                say(f"inspect: still serving this run's flows at {view.address} (Ctrl-C stops)")
                view.serve_until_stopped()
        except ConfigError as exc:
            say(f"warning: {exc}")
        finally:
            view.close()
