"""The stdio stand-in: the process an agent launches in place of a real MCP server.

An agent's MCP SDK usually starts servers with a trimmed environment (the Python SDK keeps
only HOME, PATH, SHELL, TERM, USER, LOGNAME), so everything the stand-in needs travels on
its command line: the path of a session file flowproof wrote before the agent started
(mode, server name, capture file, the real command, the mocks, the lane to replay).

- record: spawn the real server (with the environment the agent gave the stand-in, in the
  spec's folder), relay newline-delimited JSON-RPC both ways, capture every message to the
  append-only capture file before passing it on. A mocked `tools/call` is answered here and
  never reaches the server.
- replay: answer from the lane; spawn nothing. Several stand-in processes of one server
  share the lane position through the capture file (under a lock).
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
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import IO, Any

from flowproof_cli.canonical import parse_or
from flowproof_cli.dialects.base import ResultSequence
from flowproof_cli.mcp.canonical import Kind, batch_refusal, error_message, kind_of, with_id
from flowproof_cli.mcp.capture import CLIENT, SERVER, START, CaptureFile
from flowproof_cli.mcp.lane import lane_from_document
from flowproof_cli.mcp.mocks import MOCK_REFUSALS, mock_answer, output_schemas, refusal
from flowproof_cli.mcp.replayer import Replayer
from flowproof_cli.mode import Mode

ERROR = "error"  # capture entry: the stand-in could not do its job (the flow fails)
REFUSED = "refused"  # capture entry: a message flowproof refused (the flow fails)
STOP_GRACE_S = 2.0


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
            cwd=session.cwd or None,
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
    assert server.stdin is not None and server.stdout is not None
    server_stdout = server.stdout
    schemas: dict[str, Any] = {}  # the real server's outputSchemas, for mocked results
    counts: dict[str, int] = {}  # tool -> mocked calls answered, for `results:` sequences

    def pump_server() -> None:
        for raw in server_stdout:
            message = parse_or(raw)
            for element in message if isinstance(message, list) else [message]:
                if kind_of(element) is not Kind.INVALID:
                    capture.append(SERVER, element)
                    schemas.update(output_schemas([element.get("result")]))
            output.write(raw if raw.endswith(b"\n") else raw + b"\n")

    relay = threading.Thread(target=pump_server, name="mcp-server-relay", daemon=True)
    relay.start()

    def stop(*_: object) -> None:
        raise SystemExit(0)

    previous = signal.signal(signal.SIGTERM, stop)
    try:
        for raw in source:
            _record_client(
                raw,
                session,
                capture,
                output,
                forward=server.stdin.write,
                schemas=schemas,
                counts=counts,
            )
            with contextlib.suppress(BrokenPipeError, ValueError, OSError):
                server.stdin.flush()
    except (BrokenPipeError, OSError):
        pass
    finally:
        signal.signal(signal.SIGTERM, previous)
        _stop(server, relay)
    return 0


def _record_client(
    raw: bytes,
    session: StandinSession,
    capture: CaptureFile,
    output: _Output,
    *,
    forward: Callable[[bytes], Any],
    schemas: dict[str, Any],
    counts: dict[str, int],
) -> None:
    message = parse_or(raw)
    elements = message if isinstance(message, list) else [message]
    passed: list[Any] = []
    for element in elements:
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
                capture.append(CLIENT, element)
            passed.append(element)
            continue
        reply = with_id(element["id"], answer)
        capture.append(CLIENT, element, mock=True)
        capture.append(SERVER, reply)
        output.write(_line(reply))
    if len(passed) == len(elements):
        data = raw if raw.endswith(b"\n") else raw + b"\n"
    elif not passed:
        return
    else:
        data = _line(passed if isinstance(message, list) else passed[0])
    with contextlib.suppress(BrokenPipeError, ValueError, OSError):
        forward(data)


def _stop(server: subprocess.Popen[bytes], relay: threading.Thread) -> None:
    """The MCP shutdown sequence: close stdin, then SIGTERM, then SIGKILL."""
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
    relay.join(timeout=STOP_GRACE_S)


# -- replay ------------------------------------------------------------------------------


def _replay(
    session: StandinSession, capture: CaptureFile, source: IO[bytes], output: _Output
) -> int:
    lane = lane_from_document(session.lane or {}, f"the lane of '{session.server}'")
    replayer = Replayer(session.server, lane, session.mocks)
    mine: set[int] = set()

    def catch_up() -> None:
        """Messages other stand-in processes of this server answered meanwhile."""
        for entry in capture.read_new():
            if entry.get("k") == CLIENT and entry.get("i") != capture.instance:
                replayer.receive(entry.get("m"))

    with capture.locked():
        catch_up()
        capture.append(START)

    for raw in source:
        if not raw.strip():
            continue
        message = parse_or(raw)
        with capture.locked():
            catch_up()
            lines = _replay_message(message, replayer, capture, mine)
        for line in lines:
            output.write(line)
    return 0


def _replay_message(
    message: Any, replayer: Replayer, capture: CaptureFile, mine: set[int]
) -> list[bytes]:
    if message is None:
        return [_line(error_message(None, -32700, "flowproof: the line is not JSON"))]
    if isinstance(message, list):
        refusal = batch_refusal(replayer.negotiated)
        if refusal is not None:
            text = f"flowproof: {refusal}"
            capture.append(REFUSED, text=text)
            return [_line(error_message(None, -32600, text))]
        finals: list[Any] = []
        others: list[bytes] = []
        for element in message:
            for emission, final in _receive(element, replayer, capture, mine):
                if final:
                    finals.append(emission)
                else:
                    others.append(_line(emission))
        return [*others, _line(finals)] if finals else others
    return [_line(emission) for emission, _ in _receive(message, replayer, capture, mine)]


def _receive(
    message: Any, replayer: Replayer, capture: CaptureFile, mine: set[int]
) -> list[tuple[dict[str, Any], bool]]:
    capture.append(CLIENT, message)
    emissions = replayer.receive(message)
    if kind_of(message) is Kind.REQUEST and replayer.last_position is not None:
        mine.add(replayer.last_position)
    return [
        (emission.message, emission.final)
        for emission in emissions
        if emission.channel is None or emission.channel in mine
    ]
