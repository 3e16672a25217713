"""The mitmweb child `flowproof inspect` and `run --inspect` show flows in, and how a flow
reaches it (`frame`).

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
import queue
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from flowproof_cli.errors import ConfigError, PortInUseError
from flowproof_cli.process import held_temp_folder, remove_held_folder
from flowproof_cli.runner.listeners import LOOPBACK, bind_loopback, port_of

if TYPE_CHECKING:
    from mitmproxy import http

_READY_TIMEOUT_S = 60.0
_STOP_TIMEOUT_S = 5.0
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
