"""A fork server for `run_cli`: the CLI's modules imported once per xdist worker, each run a
fork of that process instead of a new interpreter.

A `flowproof run` spends most of its own CPU importing (click, pydantic and the spec models,
the runner, mitmproxy and the addons), and the suite starts the CLI thousands of times. The
server (`python -m tests.cli_fork_server FOLDER`, started by the first `run_cli` of a worker
with `clean_environ()` from the repository) imports all of that once, checks that no thread
runs, then listens on a unix socket in FOLDER. A request carries the command's arguments,
its environment and folder, and the caller's two pipes for stdout and stderr; the server
forks a child that becomes what `python -m flowproof_cli ARGS` would be (`_become_cli`),
tells the caller the child's pid, and later its exit status (`-N` for a signal, as
`subprocess` says it). A caller whose deadline passes sends `K`: the server kills the child
through its pidfd, so a reused pid can never be hit.

What a forked run shares with the server, unlike a fresh process (tests/README.md):
- the hash seed: every run of one worker orders sets of strings alike;
- modules: every module the server imported is already loaded (a fresh `flowproof show`
  would not load the runner); anything an import does (a warning printed once, a variable
  read) happened in the server: `startup_names` makes a request whose environment differs in
  a variable read then (or one Python reads at startup) fall back to a real process;
- the parent: the child's parent is the server, not the xdist worker; process group and
  session are the worker's, as with `subprocess.run`;
- /proc/PID/cmdline and /proc/PID/environ name the server's command and its environment at
  start (`os.environ` and what the child's children inherit are the request's);
- signal dispositions are those the server started with (the worker's ignored ones, like
  a fresh interpreter's), not the worker's at the time of the request.

`request()` is the caller's side; it returns None whenever a request cannot be served the
same way (the switch `FLOWPROOF_TEST_FORK=0`, an environment differing in a startup
variable, a server that did not start or died), and `run_cli` then starts a real process.
"""

from __future__ import annotations

import atexit
import contextlib
import importlib
import io
import json
import locale
import os
import runpy
import selectors
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: Set to 0 to start every CLI run as a real process (`python -m flowproof_cli`).
SWITCH = "FLOWPROOF_TEST_FORK"
_HEADER = struct.Struct("!Q")
_START_TIMEOUT_S = 120.0  # the server's imports, on a loaded machine
_SOCKET_NAME = "cli.sock"

#: Modules imported into the server, each skipped when it does not exist (modules move): the
#: command modules (`COMMANDS`), then what `run` and `record` load around the agent's start.
#: `flowproof_cli.runner.proxy` installs `minimal_mitmproxy` itself before mitmproxy loads.
PRELOAD = (
    "flowproof_cli.cli.entry",
    "flowproof_cli.cli.main",
    "flowproof_cli.runner.minimal_mitmproxy",
    "flowproof_cli.runner.proxy_engine",
    "flowproof_addons.model",
    "flowproof_addons.mcp_http",
    "flowproof_addons.guard",
    "flowproof_addons.websocket",
    "flowproof_addons.conversation",
    "flowproof_addons.credentials",
    "flowproof_addons.deadline",
    "flowproof_cli.assertions",
    "flowproof_cli.cassette.conversation",
    "flowproof_cli.cassette.diff",
    "flowproof_cli.cassette.divergence",
    "flowproof_cli.cassette.faulted",
    "flowproof_cli.cassette.index",
    "flowproof_cli.cassette.session",
    "flowproof_cli.cassette.upstreams",
    "flowproof_cli.egress.launcher",
    "flowproof_cli.egress.policy",
    "flowproof_cli.egress.report",
    "flowproof_cli.egress.verdicts",
    "flowproof_cli.evidence.controls",
    "flowproof_cli.evidence.records",
    "flowproof_cli.evidence.secrets",
    "flowproof_cli.evidence.trace_view",
    "flowproof_cli.evidence.trajectory_diff",
    "flowproof_cli.faults.model_calls",
    "flowproof_cli.match.build",
    "flowproof_cli.match.presets",
    "flowproof_cli.match.relocate",
    "flowproof_cli.mcp.capture",
    "flowproof_cli.mcp.http_record",
    "flowproof_cli.mcp.http_replay",
    "flowproof_cli.mcp.recorder",
    "flowproof_cli.mcp.replayer",
    "flowproof_cli.mcp.stdio",
    "flowproof_cli.mcp.turns",
    "flowproof_cli.providers.google_credentials",
    "flowproof_cli.runner.run_proxy",
    "flowproof_cli.runner.port_scoped",
    "flowproof_cli.runner.turn_outcome",
    "flowproof_cli.runner.built_in_tools",
    "flowproof_cli.runner.cgroups",
    "flowproof_cli.runner.conversation",
    "flowproof_cli.runner.conversation_trace",
    "flowproof_cli.runner.discovery",
    "flowproof_cli.runner.drivers",
    "flowproof_cli.runner.fault_verdicts",
    "flowproof_cli.runner.flow",
    "flowproof_cli.runner.flow_setup",
    "flowproof_cli.runner.job",
    "flowproof_cli.runner.judge",
    "flowproof_cli.runner.junit",
    "flowproof_cli.runner.mcp_servers",
    "flowproof_cli.runner.orphans",
    "flowproof_cli.runner.parallel",
    "flowproof_cli.runner.rerecord",
    "flowproof_cli.runner.simulated_user",
    "flowproof_cli.runner.suite",
    "flowproof_cli.runner.termination",
    "flowproof_cli.runner.tool_warnings",
    "flowproof_cli.runner.turn_judge",
    "flowproof_cli.runner.url_driver",
    "flowproof_cli.runner.verdict_phase",
    "flowproof_cli.spec.loader",
    "flowproof_cli.spec.models",
    "flowproof_cli.spec.suite",
    "flowproof_cli.trace.storage",
)

#: Variables an interpreter (or the C library under it) reads when it starts, so a forked
#: child cannot take a new value of them: names, and prefixes ending in `_`.
_STARTUP_NAMES = frozenset({"LANG", "LANGUAGE", "TZ", "GLIBC_TUNABLES"})
_STARTUP_PREFIXES = ("PYTHON", "LC_", "LD_", "MALLOC_", "OPENSSL_")


#: Variables read during the imports whose value leaves no trace: sysconfig's import expands
#: `~/.local` only to learn that a user base exists (`_HAS_USER_BASE`, True for any HOME).
_READ_HARMLESSLY = frozenset({"HOME"})


def is_startup_name(name: str, read_at_import: frozenset[str] = frozenset()) -> bool:
    """Whether a fresh interpreter running the CLI would have used `name` before the command
    starts: a variable Python or the C library reads at start, or one an import read."""
    if name in _STARTUP_NAMES or name.startswith(_STARTUP_PREFIXES):
        return True
    return name in read_at_import and name not in _READ_HARMLESSLY


# -- the server ---------------------------------------------------------------------------


def _fresh_signals() -> dict[int, Any]:
    """Every signal's disposition now, at the server's start: what a fresh interpreter
    started by the worker has (handlers reset by exec, ignored ones inherited, Python's own
    SIGINT handler, SIGPIPE and SIGXFSZ ignored)."""
    found: dict[int, Any] = {}
    for number in signal.valid_signals():
        with contextlib.suppress(ValueError, OSError):
            handler = signal.getsignal(number)
            if handler is not None:
                found[int(number)] = handler
    return found


class _Recorder:
    """The environment variables read while the server imports (any module's `os.environ`
    lookups): a request whose value of one differs cannot be served by a fork."""

    def __init__(self) -> None:
        self.names: set[str] = set()
        self._saved: dict[str, Any] = {}

    def __enter__(self) -> _Recorder:
        environ_type = type(os.environ)
        names = self.names
        for method in ("__getitem__", "__contains__"):
            original = getattr(environ_type, method)
            self._saved[method] = original

            def spy(mapping: Any, key: Any, _original: Any = original) -> Any:
                if mapping is os.environ and isinstance(key, str):
                    names.add(key)
                return _original(mapping, key)

            setattr(environ_type, method, spy)
        return self

    def __exit__(self, *exc: object) -> None:
        for method, original in self._saved.items():
            setattr(type(os.environ), method, original)


def preload() -> tuple[list[str], set[str]]:
    """Import PRELOAD (missing modules skipped); the modules missing and the variables read."""
    missing: list[str] = []
    with _Recorder() as recorder:
        for name in PRELOAD:
            try:
                importlib.import_module(name)
            except ModuleNotFoundError as exc:
                if exc.name is None or not name.startswith(exc.name):
                    raise  # the module exists, one of its own imports is missing
                missing.append(name)
        commands = getattr(sys.modules.get("flowproof_cli.cli.main"), "COMMANDS", {})
        for entry in commands.values():
            importlib.import_module(f"flowproof_cli.cli.{entry.module}")
    return missing, recorder.names


def _clear_caches() -> list[str]:
    """Empty every functools cache of the project's modules; the names that held entries."""
    filled = []
    for name, module in list(sys.modules.items()):
        if not name.startswith(("flowproof_cli", "flowproof_addons", "flowproof.")):
            continue
        for attribute, value in list(vars(module).items()):
            info = getattr(value, "cache_info", None)
            if callable(info) and callable(getattr(value, "cache_clear", None)):
                if info().currsize:
                    filled.append(f"{name}.{attribute}")
                value.cache_clear()
    return filled


@dataclass
class _Run:
    connection: socket.socket
    pid: int
    pidfd: int


@dataclass
class _Server:
    listener: socket.socket
    signals: dict[int, Any]
    selector: selectors.BaseSelector = field(default_factory=selectors.DefaultSelector)
    runs: dict[int, _Run] = field(default_factory=dict)  # by the connection's fd

    def serve(self) -> None:
        self.listener.setblocking(False)
        self.selector.register(self.listener, selectors.EVENT_READ, "accept")
        self.selector.register(0, selectors.EVENT_READ, "parent")  # EOF: the worker ended
        while True:
            for key, _ in self.selector.select():
                if key.data == "parent":
                    if not os.read(0, 4096):
                        return
                elif key.data == "accept":
                    with contextlib.suppress(BlockingIOError):
                        connection, _ = self.listener.accept()
                        self._start(connection)
                elif key.data == "exit":
                    self._reap(key.fd)
                else:
                    self._from_caller(key.data)

    def _start(self, connection: socket.socket) -> None:
        connection.setblocking(True)
        connection.settimeout(30)
        fds: list[int] = []
        try:
            header, fds, _, _ = socket.recv_fds(connection, _HEADER.size, 2)
            size = _HEADER.unpack(header)[0]
            payload = b""
            while len(payload) < size:
                chunk = connection.recv(size - len(payload))
                if not chunk:
                    raise OSError("the caller hung up")
                payload += chunk
            request = json.loads(payload)
        except (OSError, ValueError, struct.error):
            for fd in fds:
                os.close(fd)
            connection.close()
            return
        connection.settimeout(None)
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        pid = os.fork()
        if pid == 0:
            self._child(connection, fds, request)  # never returns
        for fd in fds:
            os.close(fd)
        pidfd = os.pidfd_open(pid)
        run = _Run(connection, pid, pidfd)
        self.runs[connection.fileno()] = run
        self.selector.register(pidfd, selectors.EVENT_READ, "exit")
        self.selector.register(connection, selectors.EVENT_READ, run)
        with contextlib.suppress(OSError):
            connection.sendall(f"P{pid}\n".encode())

    def _child(self, connection: socket.socket, fds: list[int], request: dict[str, Any]) -> None:
        code = 1
        try:
            for run in self.runs.values():
                run.connection.close()
                os.close(run.pidfd)
            self.selector.close()
            self.listener.close()
            connection.close()
            code = _become_cli(fds, request, self.signals)
        except BaseException:  # before the CLI ran: said on the child's stderr (its pipe)
            os.write(2, traceback.format_exc().encode())
        finally:
            os._exit(code)

    def _from_caller(self, run: _Run) -> None:
        """`K` (the caller's deadline passed) or the caller gone: the child is killed."""
        try:
            data = run.connection.recv(64)
        except OSError:
            data = b""
        if not data or b"K" in data:
            with contextlib.suppress(ProcessLookupError):
                signal.pidfd_send_signal(run.pidfd, signal.SIGKILL)
        if not data:
            self.selector.unregister(run.connection)

    def _reap(self, pidfd: int) -> None:
        run = next(run for run in self.runs.values() if run.pidfd == pidfd)
        _, status = os.waitpid(run.pid, 0)
        self.selector.unregister(pidfd)
        os.close(pidfd)
        with contextlib.suppress(KeyError, ValueError):
            self.selector.unregister(run.connection)
        with contextlib.suppress(OSError):
            run.connection.sendall(f"S{os.waitstatus_to_exitcode(status)}\n".encode())
        self.runs.pop(run.connection.fileno())
        run.connection.close()


def _std_streams() -> None:
    """sys.stdin/stdout/stderr made anew on fds 0-2, as the interpreter makes them at start
    (the server's were made for its own fds: another file type, another seekability)."""
    assert sys.__stdout__ is not None
    unbuffered = sys.__stdout__.write_through  # -u or PYTHONUNBUFFERED, the same here
    made = []
    for fd, mode, template in (
        (0, "r", sys.__stdin__),
        (1, "w", sys.__stdout__),
        (2, "w", sys.__stderr__),
    ):
        assert template is not None
        raw = io.FileIO(fd, mode, closefd=False)
        raw.name = f"<{('stdin', 'stdout', 'stderr')[fd]}>"
        buffered: Any = raw
        if mode == "r":
            buffered = io.BufferedReader(raw)  # stdin is buffered even under -u
        elif not unbuffered:
            buffered = io.BufferedWriter(raw)
        stream = io.TextIOWrapper(
            buffered,
            encoding=template.encoding,
            errors=template.errors,
            newline="\n",
            line_buffering=not unbuffered and (fd == 2 or raw.isatty()),
            write_through=unbuffered,
        )
        stream.mode = mode  # type: ignore[misc]
        made.append(stream)
    for name, stream in zip(("stdin", "stdout", "stderr"), made, strict=True):
        setattr(sys, name, stream)
        setattr(sys, f"__{name}__", stream)  # as the interpreter sets both


def _become_cli(fds: list[int], request: dict[str, Any], signals: dict[int, Any]) -> int:
    """In the forked child: everything `python -m flowproof_cli ARGS` starts with, then run it.
    The exit code (the CLI itself ends in `os._exit`, so this returns only for a command
    that ends another way)."""
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)
    os.close(devnull)
    os.dup2(fds[0], 1)
    os.dup2(fds[1], 2)
    for fd in fds:
        os.close(fd)
    for number, handler in signals.items():
        with contextlib.suppress(OSError, ValueError, TypeError):
            signal.signal(number, handler)
    os.environ.clear()
    os.environ.update(request["env"])
    os.chdir(request["cwd"])
    sys.path[0] = os.getcwd()  # `python -m` puts the folder it starts in first
    tempfile.tempdir = None  # TMPDIR is read again on first use
    _std_streams()
    module = request["module"]
    sys.argv = ["-m", *request["args"]]
    sys.orig_argv = [sys.executable, "-m", module, *request["args"]]
    code: int = 0
    interrupted = False
    try:
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    except SystemExit as exc:
        code = _system_exit_code(exc)
    except KeyboardInterrupt:
        sys.excepthook(*sys.exc_info())
        interrupted, code = True, 1
    except BaseException:
        sys.excepthook(*sys.exc_info())
        code = 1
    threading._shutdown()  # type: ignore[attr-defined]  # non-daemon threads, as at exit
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # a closed pipe: the interpreter says 120
            code = code or 120
    if interrupted:  # an uncaught Ctrl-C ends the interpreter by the signal itself
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
    return code


def _system_exit_code(exc: SystemExit) -> int:
    if exc.code is None:
        return 0
    if isinstance(exc.code, int):
        return exc.code & 0xFF  # what exit(3) keeps of it
    print(exc.code, file=sys.stderr)
    return 1


def _open_files() -> list[str]:
    """What the process holds open beyond fds 0-2 (the listing's own fd, closed by now, not)."""
    found = []
    for fd in os.listdir("/proc/self/fd"):
        if int(fd) > 2:
            with contextlib.suppress(OSError):
                os.fstat(int(fd))
                found.append(os.readlink(f"/proc/self/fd/{fd}"))
    return found


def main() -> None:
    signals = _fresh_signals()  # before anything imported can change one
    folder = Path(sys.argv[1])
    missing, read = preload()
    filled = _clear_caches()
    threads = max(threading.active_count(), len(os.listdir("/proc/self/task")))  # C ones too
    if threads != 1:
        raise SystemExit(f"cli_fork_server: {threads} threads after the imports: cannot fork")
    extra = _open_files()
    if extra:  # a file an import opened would be shared by every forked run (its offset too)
        raise SystemExit(f"cli_fork_server: files open after the imports: {extra}")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(folder / _SOCKET_NAME))
    listener.listen(64)
    report = {"read": sorted(read), "missing": missing, "caches": filled}
    sys.stdout.write(json.dumps(report) + "\n")
    sys.stdout.flush()
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    os.close(devnull)
    try:
        _Server(listener, signals).serve()
    except KeyboardInterrupt:
        pass
    finally:
        listener.close()
        shutil.rmtree(folder, ignore_errors=True)


# -- the caller's side --------------------------------------------------------------------


@dataclass
class Served:
    code: int
    stdout: str
    stderr: str


@dataclass
class _Handle:
    process: subprocess.Popen[bytes]
    folder: Path
    env: dict[str, str]
    read: frozenset[str]


_LOCK = threading.Lock()
_HANDLES: dict[int, _Handle | None] = {}  # by the worker's pid: None once it failed


def enabled(env: Mapping[str, str] | None = None) -> bool:
    return os.environ.get(SWITCH, "1") != "0" and (env or {}).get(SWITCH, "1") != "0"


def _server(env: dict[str, str], cwd: Path) -> _Handle | None:
    with _LOCK:
        pid = os.getpid()
        if pid not in _HANDLES:
            _HANDLES[pid] = _start_server(env, cwd)
        handle = _HANDLES[pid]
        if handle is not None and handle.process.poll() is not None:
            _HANDLES[pid] = handle = None  # it died: real processes from now on
        return handle


def _start_server(env: dict[str, str], cwd: Path) -> _Handle | None:
    folder = Path(tempfile.mkdtemp(prefix="flowproof-fork-"))
    try:
        with (folder / "server.log").open("wb") as log:
            process = subprocess.Popen(
                [sys.executable, "-m", "tests.cli_fork_server", str(folder)],
                env=env,
                cwd=cwd,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=log,
            )
        assert process.stdout is not None
        selector = selectors.DefaultSelector()
        selector.register(process.stdout, selectors.EVENT_READ)
        line = process.stdout.readline() if selector.select(_START_TIMEOUT_S) else b""
        selector.close()
        process.stdout.close()
        report = json.loads(line) if line else None
    except (OSError, ValueError):
        report = None
    if report is None:
        with contextlib.suppress(Exception):
            process.kill()
            process.wait()
        text = (folder / "server.log").read_text(errors="replace")[-2000:]
        sys.stderr.write(f"cli_fork_server did not start; real processes instead:\n{text}\n")
        shutil.rmtree(folder, ignore_errors=True)
        return None
    atexit.register(_stop, process, folder, os.getpid())
    return _Handle(process, folder, dict(env), frozenset(report["read"]))


def _stop(process: subprocess.Popen[bytes], folder: Path, owner: int) -> None:
    if os.getpid() != owner:  # a fork of the worker exiting: the server is not its own
        return
    with contextlib.suppress(Exception):
        assert process.stdin is not None
        process.stdin.close()
        process.wait(timeout=5)
    shutil.rmtree(folder, ignore_errors=True)


def startup_difference(
    server: Mapping[str, str], wanted: Mapping[str, str], read: frozenset[str]
) -> str | None:
    """The first variable a fresh interpreter would see differently from the server, or None."""
    for name in sorted(set(server) | set(wanted)):
        if is_startup_name(name, read) and server.get(name) != wanted.get(name):
            return name
    return None


def request(
    args: Sequence[str],
    env: dict[str, str],
    cwd: Path,
    timeout: float,
    *,
    server_env: dict[str, str],
    server_cwd: Path,
    module: str = "flowproof_cli",
) -> Served | None:
    """`python -m MODULE ARGS` (the CLI) in `cwd` with exactly `env`, as a fork of the
    worker's server (started on first use with `server_env` in `server_cwd`); None when it
    cannot be served the same way (then the caller starts a real process)."""
    if not enabled(env):
        return None
    handle = _server(server_env, server_cwd)
    if handle is None or startup_difference(handle.env, env, handle.read) is not None:
        return None
    try:
        connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        connection.connect(str(handle.folder / _SOCKET_NAME))
    except OSError:
        return None
    with connection:
        return _exchange(connection, [module, *args], env, cwd, timeout)


def _exchange(
    connection: socket.socket, argv: list[str], env: dict[str, str], cwd: Path, timeout: float
) -> Served | None:
    where = os.path.abspath(cwd)  # relative to the caller, as subprocess takes it
    payload = json.dumps({"module": argv[0], "args": argv[1:], "env": env, "cwd": where})
    data = payload.encode()
    out_read, out_write = os.pipe()
    err_read, err_write = os.pipe()
    try:
        socket.send_fds(connection, [_HEADER.pack(len(data))], [out_write, err_write])
        connection.sendall(data)
    except OSError:
        for fd in (out_read, out_write, err_read, err_write):
            os.close(fd)
        return None
    os.close(out_write)
    os.close(err_write)
    return _collect(connection, out_read, err_read, argv, timeout)


def _collect(
    connection: socket.socket, out_read: int, err_read: int, argv: list[str], timeout: float
) -> Served:
    """Both pipes to their end and the child's status, within `timeout` (as
    `subprocess.run` does: past it the child is killed, then TimeoutExpired)."""
    deadline = time.monotonic() + timeout
    chunks: dict[int, list[bytes]] = {out_read: [], err_read: []}
    replies = b""
    selector = selectors.DefaultSelector()
    for fd in chunks:
        selector.register(fd, selectors.EVENT_READ)
    selector.register(connection, selectors.EVENT_READ)
    status: int | None = None
    try:
        while status is None or any(fd in selector.get_map() for fd in chunks):
            left = deadline - time.monotonic()
            events = selector.select(left) if left > 0 else []
            if not events:
                with contextlib.suppress(OSError, RuntimeError):
                    connection.sendall(b"K")  # the server kills it through its pidfd
                    _wait_status(connection, replies)
                raise subprocess.TimeoutExpired(
                    [sys.executable, "-m", *argv],
                    timeout,
                    output=b"".join(chunks[out_read]),
                    stderr=b"".join(chunks[err_read]),
                )
            for key, _ in events:
                if key.fileobj is connection:
                    data = connection.recv(4096)
                    if not data:
                        raise RuntimeError("cli_fork_server ended during a run")
                    replies += data
                    if b"\nS" in b"\n" + replies and replies.endswith(b"\n"):
                        status = _status(replies)
                        selector.unregister(connection)
                else:
                    data = os.read(key.fd, 65536)
                    if data:
                        chunks[key.fd].append(data)
                    else:
                        selector.unregister(key.fd)
    finally:
        selector.close()
        os.close(out_read)
        os.close(err_read)
    return Served(status, _text(chunks[out_read]), _text(chunks[err_read]))


def _wait_status(connection: socket.socket, replies: bytes) -> int:
    connection.settimeout(30)
    while b"\nS" not in b"\n" + replies:
        data = connection.recv(4096)
        if not data:
            break
        replies += data
    return _status(replies)


def _status(replies: bytes) -> int:
    for line in replies.decode().splitlines():
        if line.startswith("S"):
            return int(line[1:])
    raise RuntimeError("cli_fork_server gave no exit status")


def _text(chunks: list[bytes]) -> str:
    """Decoded as `subprocess.run(text=True)` decodes: the locale's encoding (UTF-8 in UTF-8
    mode), strict, and universal newlines."""
    encoding = "utf-8" if sys.flags.utf8_mode else locale.getencoding()
    data = b"".join(chunks).decode(encoding)
    return data.replace("\r\n", "\n").replace("\r", "\n")


if __name__ == "__main__":
    main()
