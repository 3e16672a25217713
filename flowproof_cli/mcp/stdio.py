"""The stdio stand-in: the process an agent launches in place of a real MCP server.

An agent's MCP SDK usually starts servers with a trimmed environment (the Python SDK keeps
only HOME, PATH, SHELL, TERM, USER, LOGNAME), so everything the stand-in needs travels on
its command line: the path of a session file flowproof wrote before the agent started
(mode, server name, capture file, the real command, the mocks, the lane to replay).

- record: spawn the real server (with the environment the agent gave the stand-in, in the
  spec's folder), relay newline-delimited JSON-RPC both ways, capture every message to the
  append-only capture file before passing it on. A mocked `tools/call` is answered here and
  never reaches the server. Each request waits at most its bound (`call_bound.py`).
- replay: answer from the lane; spawn nothing. Several stand-in processes of one server
  share the lane position through the capture file (under a lock). Nothing here waits on
  anything but the agent, so a call needs no bound.

Every line gets an answer, whatever it holds: JSON too deeply nested to parse is a JSON-RPC
parse error (and fails the flow), as over HTTP; an exception while handling a line is an
internal error that fails the flow, never the stand-in's end.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import uuid
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO, Any

from flowproof_cli.dialects.base import ResultSequence
from flowproof_cli.faults.plan import CRASH, Fault, faults_from_document
from flowproof_cli.mcp.call_bound import STREAMING_METHODS, CallBound, Deadlines, call_text
from flowproof_cli.mcp.canonical import (
    INTERNAL_ERROR,
    INVALID_REQUEST,
    PARSE_ERROR,
    PROGRESS,
    Kind,
    batch_refusal,
    canonical_request,
    error_message,
    id_key,
    is_modern,
    kind_of,
    progress_token,
    usable_id,
    with_id,
)
from flowproof_cli.mcp.capture import CLIENT, ERROR, REFUSED, SERVER, START, CaptureFile
from flowproof_cli.mcp.faults import Decision, McpFaults, fault_answer
from flowproof_cli.mcp.lane import call_label, lane_from_document
from flowproof_cli.mcp.mocks import MOCK_REFUSALS, mock_answer, output_schemas, refusal
from flowproof_cli.mcp.recorder import is_json_rpc, quote_line
from flowproof_cli.mcp.replayer import Replayer
from flowproof_cli.mode import Mode
from flowproof_cli.process import working_directory
from flowproof_cli.quoting import failure as exception_text

STOP_GRACE_S = 2.0
#: How long a dead server's stderr may take to reach its end (a child of it may hold it).
STDERR_DRAIN_S = 1.0
#: A server killed by a signal (SIGTERM if a call waits for it) is most often the agent's
#: process group being ended (the agent's exit, or flowproof ending the agent): the same SIGTERM
#: reaches the stand-in, whose own stop follows. Within this grace that stop means the
#: server's end was the agent's, not a failure.
GROUP_END_GRACE_S = 2.0
#: The longest line read from either side: a longer one is cut there and refused, so an
#: endless line cannot fill the stand-in's memory. A 10 MB tool result fits with room.
MAX_LINE_BYTES = 64 * 1024 * 1024
_OVERLONG = f"flowproof: the line is longer than {MAX_LINE_BYTES} bytes"
_NOT_RPC = "flowproof: the message is not a JSON-RPC request, notification or response"
_NOT_JSON = object()  # what `_parse` gives for a line that is not JSON (`null` is JSON)
_TOO_DEEP = object()  # ... and for JSON nested deeper than the parser goes
#: What the agent is told of such a line (with -32700), as the HTTP boundary words a body.
TOO_DEEP = "the line is JSON nested too deeply to read"
_STDERR_TAIL = 2048
#: How a stand-in ends on a crash fault: as a server that died of an error would.
CRASH_EXIT = 1
#: What `_replay_line` gives for a crash fault (compared by identity, never written).
_CRASHED = b"flowproof: a crash fault\n"


def _parse(raw: bytes) -> Any:
    """A line as JSON, `_NOT_JSON`, or `_TOO_DEEP` (the parser's RecursionError: a line of
    `[[[[...` must be answered, never end the stand-in)."""
    try:
        return json.loads(raw)
    except RecursionError:
        return _TOO_DEEP
    except ValueError:
        return _NOT_JSON


def sent_too_deep(server: str) -> str:
    """The flow's failure when the agent sent a line too deeply nested to read."""
    return f"the MCP server '{server}': the agent sent a line of JSON nested too deeply to read"


def could_not_handle_line(server: str, exc: BaseException) -> str:
    """The flow's failure when handling one of the agent's lines raised."""
    return f"the MCP server '{server}': could not handle the agent's line ({exception_text(exc)})"


def read_lines(stream: IO[bytes], limit: int = MAX_LINE_BYTES) -> Iterator[tuple[bytes, bool]]:
    """Each line, its newline kept, and whether it fits in `limit` bytes. An overlong line
    is given as its first `limit` bytes (False) and the rest of it skipped, unless the
    reader stops there."""
    while line := stream.readline(limit):
        if len(line) < limit or line.endswith(b"\n"):
            yield line, True
            continue
        yield line, False
        while (rest := stream.readline(limit)) and not rest.endswith(b"\n"):
            pass


@dataclass
class StandinSession:
    """What one stand-in needs; written to a file by the runner, named on the command line."""

    server: str
    mode: Mode
    capture: str
    command: list[str] = field(default_factory=list)  # record: the real server
    cwd: str | None = None
    mocks: dict[str, Any] = field(default_factory=dict)
    lane: dict[str, Any] | None = None  # replay: the lane document
    call_timeout_s: float | None = None  # record: each call's bound (None: unbounded)
    call_timeout_set: bool = False  # ... set by the server's `call_timeout`
    faults: list[dict[str, Any]] = field(default_factory=list)  # this server's, as a trace has them

    def fault_values(self) -> tuple[Fault, ...]:
        values = faults_from_document(self.faults)
        if isinstance(values, str):  # written by flowproof itself a moment ago
            raise ValueError(f"the session's faults: {values}")
        return values

    @property
    def bound(self) -> CallBound | None:
        if self.call_timeout_s is None:
            return None
        return CallBound(self.call_timeout_s, from_spec=self.call_timeout_set)

    def __post_init__(self) -> None:
        self.mode = Mode(self.mode)  # read back from JSON as its string

    def write(self, path: Path) -> None:
        data = asdict(self)
        # JSON has no sequence type of its own: `results:` travel under their own key.
        data["mocks"] = {k: v for k, v in self.mocks.items() if not isinstance(v, ResultSequence)}
        data["mock_results"] = {
            k: list(v) for k, v in self.mocks.items() if isinstance(v, ResultSequence)
        }
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(descriptor, "w", encoding="utf-8") as stream:
            json.dump(data, stream)

    @classmethod
    def read(cls, path: Path) -> StandinSession:
        data = json.loads(path.read_text(encoding="utf-8"))
        sequences = data.pop("mock_results", None) or {}
        session = cls(**data)
        session.mocks.update({k: ResultSequence(v) for k, v in sequences.items()})
        return session


def _line(message: Any) -> bytes:
    return (json.dumps(message, ensure_ascii=False, separators=(",", ":")) + "\n").encode()


class _Output:
    """stdout shared by two threads: whole lines only."""

    def __init__(self, stream: IO[bytes]):
        self._stream = stream
        self._lock = threading.Lock()

    def write(self, data: bytes) -> None:
        with self._lock, contextlib.suppress(BrokenPipeError, ValueError, OSError):
            self._stream.write(data)
            self._stream.flush()


def _die_with_parent() -> None:  # pragma: no cover - runs in the child before exec
    if sys.platform.startswith("linux"):
        import ctypes  # noqa: PLC0415

        with contextlib.suppress(Exception):
            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def _server_environment(cwd: str | None) -> dict[str, str] | None:
    """The real server's environment: the stand-in's own (the agent's), with `PWD` naming
    the folder the server runs in, whichever folder the agent started the stand-in from."""
    return {**os.environ, **working_directory(cwd)} if cwd else None


def run_standin(
    session: StandinSession, stdin: IO[bytes] | None = None, stdout: IO[bytes] | None = None
) -> int:
    capture = CaptureFile(Path(session.capture), instance=uuid.uuid4().hex[:12])
    try:
        source = stdin if stdin is not None else sys.stdin.buffer
        output = _Output(stdout if stdout is not None else sys.stdout.buffer)
        if session.mode is Mode.REPLAY:
            return _replay(session, capture, source, output)
        return _record(session, capture, source, output)
    finally:
        capture.close()


# -- record ------------------------------------------------------------------------------


def _record(
    session: StandinSession, capture: CaptureFile, source: IO[bytes], output: _Output
) -> int:
    capture.append(START)
    try:
        server = subprocess.Popen(
            session.command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=session.cwd or None,
            env=_server_environment(session.cwd),
            preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None,  # noqa: PLW1509
        )
    except OSError as exc:
        text = (
            f"flowproof could not start the real MCP server '{session.server}' "
            f"({' '.join(session.command)}): {exc.strerror or exc}"
        )
        capture.append(ERROR, text=text)
        print(text, file=sys.stderr)
        return 1
    relay = _Relay(session, capture, output, server)
    relay.start()

    def stop(*_: object) -> None:
        raise SystemExit(0)

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        for raw, fits in read_lines(source):
            if not fits:
                output.write(_line(error_message(None, INVALID_REQUEST, _OVERLONG)))
            elif relay.from_agent(raw):
                return CRASH_EXIT  # a crash fault: the server is stopped, as if it died
    except (BrokenPipeError, OSError):
        pass
    finally:
        signal.signal(signal.SIGTERM, previous)
        relay.stop()
    return 0


class _Relay:
    """One real server behind the stand-in: both directions, and what ends it early.

    A server that dies, writes a line that is not JSON-RPC (or JSON too deep to read), an
    endless line, or leaves a call unanswered past its bound has failed the record: every
    call still waiting, and every later one, is answered with a JSON-RPC error naming the
    server and what it did (never silence), and the server is stopped. Whatever it writes
    after that is dropped, so no call is answered twice.
    """

    def __init__(
        self,
        session: StandinSession,
        capture: CaptureFile,
        output: _Output,
        server: subprocess.Popen[bytes],
    ):
        self.session = session
        self.capture = capture
        self.output = output
        self.server = server
        self.schemas: dict[str, Any] = {}  # the real server's outputSchemas, for mocks
        self.counts: dict[str, int] = {}  # tool -> mocked calls answered (`results:`)
        self.faults = McpFaults(session.server, session.fault_values())
        self.failure: str | None = None
        self.stopping = False  # the agent is done: the server's end is no failure
        self._stopped = threading.Event()  # set with `stopping`, for a thread to wait on
        self._pending: dict[str, tuple[Any, str]] = {}  # id key -> (id, call text)
        self._tokens: dict[str, str] = {}  # progress token key -> id key of its call
        self._lock = threading.Lock()
        bound = session.bound
        self._deadlines = (
            Deadlines(bound, lambda call: self._fail(bound.not_answered(call)))
            if bound is not None
            else None
        )
        self._stderr = _StderrTail()
        self._stderr_pump = threading.Thread(
            target=self._stderr.pump, args=(server.stderr,), name="mcp-server-stderr", daemon=True
        )
        self._threads = [
            threading.Thread(target=self._pump, name="mcp-server-relay", daemon=True),
            self._stderr_pump,
        ]

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    # -- the agent's side ----------------------------------------------------------------

    def from_agent(self, raw: bytes) -> bool:
        """One line of the agent's: answered, whatever it holds or whatever goes wrong.
        True when a crash fault hit it (the stand-in must end as a dead server)."""
        try:
            if not self.faults:
                return self._record_line(raw)
            with self.capture.locked():  # faults count calls across the server's stand-ins
                self._catch_up()
                return self._record_line(raw)
        except Exception as exc:  # any line, any bug: the flow fails, the stand-in goes on
            text = could_not_handle_line(self.session.server, exc)
            self.capture.append(ERROR, text=text)
            self.output.write(_line(error_message(None, INTERNAL_ERROR, f"flowproof: {text}")))
        return False

    def _record_line(self, raw: bytes) -> bool:
        return _record_client(
            raw,
            self.session,
            self.capture,
            self.output,
            forward=self._forward,
            schemas=self.schemas,
            counts=self.counts,
            faults=self.faults,
        )

    def _catch_up(self) -> None:
        """The calls other stand-ins of this server took meanwhile (one the agent started
        after a crash fault), so a fault hits the same call whichever process gets it."""
        for entry in self.capture.read_new():
            message: Any = entry.get("m")
            mine = entry.get("i") == self.capture.instance
            if entry.get("k") == CLIENT and not mine and kind_of(message) is Kind.REQUEST:
                self.faults.decide(*canonical_request(message))

    def _forward(self, data: bytes, passed: list[Any]) -> None:
        """Send on what no mock answered; once the server has failed, answer it here.
        No lock is held while a pipe is written: a full pipe must not stall the other way."""
        requests = [element for element in passed if kind_of(element) is Kind.REQUEST]
        with self._lock:
            failure = self.failure
            if failure is None:
                for element in requests:
                    self._wait_for(element)
        if failure is not None:
            for element in requests:
                self._refuse(element["id"], failure)
            return
        with contextlib.suppress(BrokenPipeError, ValueError, OSError):
            assert self.server.stdin is not None
            self.server.stdin.write(data)
            self.server.stdin.flush()

    def _wait_for(self, request: dict[str, Any]) -> None:
        """A request is about to reach the server: its answer is awaited, within its bound."""
        method, params = canonical_request(request)
        key = id_key(request["id"])
        call = call_text(call_label(method, params), request["id"])
        self._pending[key] = (request["id"], call)
        if self._deadlines is not None and method not in STREAMING_METHODS:
            token = progress_token(request)
            if token is not None:
                self._tokens[id_key(token)] = key
            self._deadlines.start(key, call)

    # -- the server's side ---------------------------------------------------------------

    def _pump(self) -> None:
        assert self.server.stdout is not None
        cut = b""
        for raw, fits in read_lines(self.server.stdout):
            if not fits:
                what = f"wrote a line longer than {MAX_LINE_BYTES} bytes to its stdout"
                return self._fail(f"{what}: {quote_line(raw)}")
            if not raw.endswith(b"\n"):
                cut = raw  # its last line, cut by its end
                break
            problem = self._from_server(raw)
            if problem is not None:
                return self._fail(problem)
        if not self.stopping and not self._ended_with_the_agent():
            self._fail(self._exit_reason(cut))
        return None

    def _ended_with_the_agent(self) -> bool:
        """The server died of a signal, and the stand-in's own stop followed within the
        grace: one SIGTERM to the agent's group ended both. With a call waiting, only the
        group's own SIGTERM qualifies (the flow's timeout ends a group whose server still
        owes an answer); a crash mid-call is told to the agent at once."""
        try:
            code = self.server.wait(timeout=STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            return False
        with self._lock:
            waiting = bool(self._pending)
        if code >= 0 or (waiting and code != -signal.SIGTERM):
            return False
        return self._stopped.wait(GROUP_END_GRACE_S)

    def _from_server(self, raw: bytes) -> str | None:
        """Capture and relay one line; what is wrong with it, if anything (a blank line is
        relayed and forgiven)."""
        if not raw.strip():
            self.output.write(raw)
            return None
        message = _parse(raw)
        if message is _TOO_DEEP:
            return (
                f"wrote a line of JSON nested too deeply to read to its stdout: {quote_line(raw)}"
            )
        if not is_json_rpc(message):
            return (
                f"wrote a line that is not JSON-RPC to its stdout: {quote_line(raw)} (an "
                "MCP server writes only JSON-RPC messages there; its logs belong on stderr)"
            )
        elements = message if isinstance(message, list) else [message]
        with self._lock:
            if self.failure is not None:
                return None  # failed already: every waiting call was answered with that
            for element in elements:
                self.capture.append(SERVER, element)
                self.schemas.update(output_schemas([element.get("result")]))
                self._answered_or_progressed(element)
        self.output.write(raw)
        return None

    def _answered_or_progressed(self, element: dict[str, Any]) -> None:
        """An answer ends its call's wait; progress on a call starts it over."""
        if kind_of(element) is Kind.RESPONSE:
            key = id_key(element["id"])
            self._pending.pop(key, None)
            if self._deadlines is not None:
                self._deadlines.end(key)
        elif element.get("method") == PROGRESS and self._deadlines is not None:
            params = element.get("params")
            token = params.get("progressToken") if isinstance(params, dict) else None
            call = self._tokens.get(id_key(token)) if token is not None else None
            if call is not None:
                self._deadlines.extend(call)

    def _exit_reason(self, cut: bytes) -> str:
        """Why the server's stdout ended: its exit, with what it left behind."""
        try:
            code: int | None = self.server.wait(timeout=STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            code = None
        how = (
            "closed its stdout"
            if code is None
            else f"was killed by signal {-code}"
            if code < 0
            else f"exited with code {code}"
        )
        with self._lock:
            calls = [call.split(" (JSON-RPC id", 1)[0] for _, call in self._pending.values()]
        waiting = (
            f" while {len(calls)} call{'s' if len(calls) > 1 else ''} waited for "
            f"{'their answers' if len(calls) > 1 else 'its answer'} ({', '.join(calls)})"
            if calls
            else " while the agent was still connected"
        )
        cut_note = f"; its last line was cut: {quote_line(cut)}" if cut else ""
        if code is not None:  # its last words may still be in the pipe: read them first
            self._stderr_pump.join(STDERR_DRAIN_S)
        tail = self._stderr.text()
        stderr_note = f"; its stderr ended with: {tail}" if tail else ""
        return f"{how}{waiting}{cut_note}{stderr_note}"

    # -- failing -------------------------------------------------------------------------

    def _fail(self, what: str) -> None:
        """The record has failed: say so once, answer every waiting call, stop the server.
        Called by the relay thread or the bound's watchdog: whichever is first says it."""
        failure = f"the MCP server '{self.session.server}' {what}"
        with self._lock:
            if self.failure is not None or self.stopping:
                return
            self.failure = failure
            waiting = [request_id for request_id, _ in self._pending.values()]
            self._pending.clear()
        self.capture.append(ERROR, text=failure)
        for request_id in waiting:
            self._refuse(request_id, failure)
        print(f"flowproof: {failure}", file=sys.stderr)
        with contextlib.suppress(OSError):
            self.server.kill()

    def _refuse(self, request_id: Any, failure: str) -> None:
        message = error_message(request_id, INTERNAL_ERROR, f"flowproof: {failure}")
        self.output.write(_line(message))

    def stop(self) -> None:
        """The MCP shutdown sequence: close stdin, then SIGTERM, then SIGKILL."""
        with self._lock:
            self.stopping = True
        self._stopped.set()
        if self._deadlines is not None:
            self._deadlines.stop()
        _stop(self.server, self._threads)


class _StderrTail:
    """The server's stderr, passed on to the stand-in's (the agent's), its end kept."""

    def __init__(self) -> None:
        self._tail = b""

    def pump(self, stream: IO[bytes] | None) -> None:
        if stream is None:
            return
        sink = getattr(sys.stderr, "buffer", None)
        while chunk := os.read(stream.fileno(), 65536):
            self._tail = (self._tail + chunk)[-_STDERR_TAIL:]
            with contextlib.suppress(OSError, ValueError):
                if sink is not None:
                    sink.write(chunk)
                    sink.flush()

    def text(self) -> str:
        return quote_line(self._tail.strip().splitlines()[-1]) if self._tail.strip() else ""


def _record_client(
    raw: bytes,
    session: StandinSession,
    capture: CaptureFile,
    output: _Output,
    *,
    forward: Callable[[bytes, list[Any]], Any],
    schemas: dict[str, Any],
    counts: dict[str, int],
    faults: McpFaults | None = None,
) -> bool:
    """Answer, fault or forward one line of the agent's; True when a crash fault hit it."""
    message = _parse(raw)
    if message is _TOO_DEEP:  # answered as the HTTP boundary answers such a body
        capture.append(ERROR, text=sent_too_deep(session.server))
        output.write(_line(error_message(None, PARSE_ERROR, f"flowproof: {TOO_DEEP}")))
        return False
    if message is _NOT_JSON:
        message = None  # forwarded as it is: the real server answers what it cannot read
    elements = message if isinstance(message, list) else [message]
    passed: list[Any] = []
    for element in elements:
        decision = _decision(faults, element)
        if decision.fault is not None:
            if _faulted(element, decision.fault, capture, output):
                return True
            continue
        retry = {"retry_of": decision.retry_of.label} if decision.retry_of is not None else {}
        try:
            answer = (
                mock_answer(element, session.mocks, schemas, counts)
                if isinstance(element, dict)
                else None
            )
        except MOCK_REFUSALS as exc:  # the flow fails; the agent gets an error, not a crash
            text, answer = refusal(session.server, exc)
            capture.append(ERROR, text=text)
        if answer is None:
            if kind_of(element) is not Kind.INVALID:
                capture.append(CLIENT, element, **retry)
            passed.append(element)
            continue
        reply = with_id(element["id"], answer)
        capture.append(CLIENT, element, mock=True, **retry)
        capture.append(SERVER, reply)
        output.write(_line(reply))
    if passed:
        data = raw if raw.endswith(b"\n") else raw + b"\n"
        if len(passed) != len(elements):
            data = _line(passed if isinstance(message, list) else passed[0])
        forward(data, passed)
    return False


def _decision(faults: McpFaults | None, element: Any) -> Decision:
    if faults is None or kind_of(element) is not Kind.REQUEST:
        return Decision()
    return faults.decide(*canonical_request(element))


def _faulted(element: dict[str, Any], fault: Fault, capture: CaptureFile, output: _Output) -> bool:
    """A faulted attempt, never forwarded: captured with its fault, answered with it (or
    not at all: a hang). True for a crash (the caller ends the stand-in)."""
    answer = fault_answer(fault, modern=is_modern(element))
    crash = {"crash": True} if fault.kind == CRASH else {}
    extra = {"answer": answer} if answer is not None else crash
    capture.append(CLIENT, element, fault=fault.label, **extra)
    if answer is not None:
        output.write(_line(with_id(element["id"], answer)))
    return fault.kind == CRASH


def _stop(server: subprocess.Popen[bytes], threads: list[threading.Thread]) -> None:
    """Close the server's stdin, then SIGTERM, then SIGKILL; then its pipes' readers end."""
    with contextlib.suppress(Exception):
        assert server.stdin is not None
        server.stdin.close()
    try:
        server.wait(timeout=STOP_GRACE_S)
    except subprocess.TimeoutExpired:
        server.terminate()
        try:
            server.wait(timeout=STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()
    for thread in threads:
        thread.join(timeout=STOP_GRACE_S)


# -- replay ------------------------------------------------------------------------------


def _replay(
    session: StandinSession, capture: CaptureFile, source: IO[bytes], output: _Output
) -> int:
    lane = lane_from_document(session.lane or {}, f"the lane of '{session.server}'")
    replayer = Replayer(session.server, lane, session.mocks, session.fault_values())
    mine: set[int] = set()

    def catch_up() -> None:
        """Messages other stand-in processes of this server answered meanwhile."""
        for entry in capture.read_new():
            if entry.get("k") == CLIENT and entry.get("i") != capture.instance:
                replayer.receive(entry.get("m"))

    with capture.locked():
        catch_up()
        capture.append(START)

    for raw, fits in read_lines(source):
        if not fits:
            output.write(_line(error_message(None, INVALID_REQUEST, _OVERLONG)))
            continue
        if not raw.strip():
            continue
        with capture.locked():
            catch_up()
            lines = _replay_line(raw, session.server, replayer, capture, mine)
        for line in lines:
            if line is _CRASHED:
                return CRASH_EXIT  # a crash fault: the agent's pipes close as a server dies
            output.write(line)
    return 0


def _replay_line(
    raw: bytes, server: str, replayer: Replayer, capture: CaptureFile, mine: set[int]
) -> list[bytes]:
    """The answers to one line of the agent's: whatever it holds or whatever goes wrong,
    it is answered, and a line flowproof could not handle fails the flow."""
    try:
        message = _parse(raw)
        if message is _TOO_DEEP:
            capture.append(REFUSED, text=sent_too_deep(server))
            return [_line(error_message(None, PARSE_ERROR, f"flowproof: {TOO_DEEP}"))]
        return _replay_message(message, replayer, capture, mine)
    except Exception as exc:  # any line, any bug: an answer, never the stand-in's end
        text = could_not_handle_line(server, exc)
        capture.append(REFUSED, text=text)
        return [_line(error_message(None, INTERNAL_ERROR, f"flowproof: {text}"))]


def _replay_message(
    message: Any, replayer: Replayer, capture: CaptureFile, mine: set[int]
) -> list[bytes]:
    if message is _NOT_JSON:
        return [_line(error_message(None, PARSE_ERROR, "flowproof: the line is not JSON"))]
    if message == []:
        return [_line(error_message(None, INVALID_REQUEST, "flowproof: the batch is empty"))]
    if isinstance(message, list):
        refusal = batch_refusal(replayer.negotiated)
        if refusal is not None:
            text = f"flowproof: {refusal}"
            capture.append(REFUSED, text=text)
            return [_line(error_message(None, INVALID_REQUEST, text))]
        finals: list[Any] = []
        others: list[bytes] = []
        for element in message:
            for emission, final in _receive(element, replayer, capture, mine):
                if emission is None:
                    return [*others, _CRASHED]
                if final:
                    finals.append(emission)
                else:
                    others.append(_line(emission))
        return [*others, _line(finals)] if finals else others
    return [
        _CRASHED if emission is None else _line(emission)
        for emission, _ in _receive(message, replayer, capture, mine)
    ]


def _receive(
    message: Any, replayer: Replayer, capture: CaptureFile, mine: set[int]
) -> list[tuple[dict[str, Any] | None, bool]]:
    """(message, final) of each emission for this stand-in; a None message: a crash."""
    if kind_of(message) is Kind.INVALID:  # answered as JSON-RPC says, never silence
        return [(error_message(usable_id(message), INVALID_REQUEST, _NOT_RPC), True)]
    capture.append(CLIENT, message)
    emissions = replayer.receive(message)
    if kind_of(message) is Kind.REQUEST and replayer.last_position is not None:
        mine.add(replayer.last_position)
    return [
        (None if emission.crash else emission.message, emission.final)
        for emission in emissions
        if emission.channel is None or emission.channel in mine
    ]
