"""What every benchmark group shares: settings, server processes, ordering, the table.

Each server and each client is its own OS process, so the client's interpreter never
shares a GIL or an event loop with the server it measures. Rounds visit the contenders in
ABBA order so drift (thermal, page cache, a neighbour's load) cancels out of the ratios.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any

REPO = Path(__file__).resolve().parent.parent
BENCH = REPO / "benchmarks"
PYTHON = sys.executable
FLOWPROOF = str(Path(PYTHON).with_name("flowproof"))
MITMDUMP = str(Path(PYTHON).with_name("mitmdump"))
AIMOCK_CLI = REPO / "tests" / "node_modules" / "@copilotkit" / "aimock" / "dist" / "cli.js"
_READY_TIMEOUT_S = 60.0


_KEYS = (
    "OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
    "FLOWPROOF_AGENT_KEY",
    "FLOWPROOF_AGENT_UPSTREAM",
    "OPENAI_BASE_URL",
    "ANTHROPIC_BASE_URL",
    "GOOGLE_GEMINI_BASE_URL",
    "GEMINI_API_KEY",
    "GOOGLE_API_KEY",
)


def process_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """Every child's environment: no key, no upstream (as `make demo`), .venv first on PATH."""
    env = {k: v for k, v in os.environ.items() if k not in _KEYS}
    env["PATH"] = f"{Path(PYTHON).parent}{os.pathsep}{env.get('PATH', '')}"
    return {**env, **(extra or {})}


def _env_int(name: str, default: int) -> int:
    value = os.environ.get(name, "").strip()
    return int(value) if value else default


@dataclass(frozen=True)
class Settings:
    """Sizes of the run; FLOWPROOF_BENCH_QUICK=1 shrinks all of them for a smoke run."""

    quick: bool
    rounds: int  # alternating rounds per contender (medians over them)
    calls: int  # timed calls per client process at 2 KB (fewer at 50 KB and 500 KB)
    flow_rounds: int  # whole-flow processes per contender
    suite_flows: int
    suite_rounds: int
    scale_turns: int
    rss_turns: int

    @classmethod
    def from_environment(cls) -> Settings:
        quick = os.environ.get("FLOWPROOF_BENCH_QUICK", "") not in ("", "0")
        return cls(
            quick=quick,
            rounds=_env_int("FLOWPROOF_BENCH_ROUNDS", 2 if quick else 5),
            calls=_env_int("FLOWPROOF_BENCH_CALLS", 40 if quick else 200),
            flow_rounds=_env_int("FLOWPROOF_BENCH_FLOW_ROUNDS", 2 if quick else 10),
            suite_flows=_env_int("FLOWPROOF_BENCH_SUITE_FLOWS", 4 if quick else 50),
            suite_rounds=_env_int("FLOWPROOF_BENCH_SUITE_ROUNDS", 1),
            scale_turns=_env_int("FLOWPROOF_BENCH_SCALE_TURNS", 200 if quick else 2000),
            rss_turns=_env_int("FLOWPROOF_BENCH_RSS_TURNS", 200 if quick else 2000),
        )


@dataclass(frozen=True)
class Row:
    """One line of the ratio table."""

    group: str
    what: str
    measured: str
    ratio: str = ""
    target: str = ""
    verdict: str = ""  # "met", "not met", or "" where the issue sets no target


def verdict(ok: bool) -> str:
    return "met" if ok else "not met"


def print_table(rows: Sequence[Row]) -> None:
    """A Markdown table, so docs/performance.md can keep it as printed."""
    header = ("group", "what", "measured", "ratio", "target", "verdict")
    cells = [header, *((r.group, r.what, r.measured, r.ratio, r.target, r.verdict) for r in rows)]
    widths = [max(len(line[i]) for line in cells) for i in range(len(header))]

    def line(values: Sequence[str]) -> str:
        return "| " + " | ".join(v.ljust(w) for v, w in zip(values, widths, strict=True)) + " |"

    print(line(header))
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for values in cells[1:]:
        print(line(values))


def abba[T](names: Sequence[T], rounds: int) -> Iterator[T]:
    """The contenders in order on even rounds, reversed on odd ones."""
    for number in range(rounds):
        yield from names if number % 2 == 0 else reversed(names)


def median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else float("nan")


def log(message: str) -> None:
    """Progress on stderr; the table alone goes to stdout."""
    print(f"bench: {message}", file=sys.stderr, flush=True)


def free_port() -> int:
    """A loopback port free right now (for servers that cannot report the one they bound)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def wait_for_port(port: int, process: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + _READY_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"server exited with {process.returncode} before listening")
        with socket.socket() as probe:
            if probe.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.02)
    raise RuntimeError(f"nothing listened on 127.0.0.1:{port} within {_READY_TIMEOUT_S:.0f} s")


class Server:
    """A server in its own process, listening on 127.0.0.1.

    With `port=None` the script prints `PORT <n>` as its first stdout line (the scripts
    under benchmarks/servers/); otherwise the caller chose the port and it is polled.
    """

    def __init__(
        self,
        name: str,
        argv: Sequence[str],
        *,
        port: int | None = None,
        env: dict[str, str] | None = None,
    ):
        self.name = name
        self.process = subprocess.Popen(
            list(argv),
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL if port is not None else None,
            stdin=subprocess.DEVNULL,
            text=True,
            env=process_env(env),
            cwd=REPO,
        )
        try:
            self.port = self._await_port() if port is None else port
            if port is not None:
                wait_for_port(port, self.process)
        except BaseException:
            self.stop()
            raise

    def _await_port(self) -> int:
        assert self.process.stdout is not None
        line = self.process.stdout.readline()
        if not line.startswith("PORT "):
            self.process.wait(5)
            raise RuntimeError(f"{self.name}: no PORT line (exit {self.process.returncode})")
        return int(line.split()[1])

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def peak_rss_mb(self) -> float:
        """VmHWM: the process's peak resident set so far."""
        status = Path(f"/proc/{self.process.pid}/status").read_text()
        kb = next(int(line.split()[1]) for line in status.splitlines() if line.startswith("VmHWM"))
        return kb / 1024

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        if self.process.stdout is not None:
            self.process.stdout.close()

    def __enter__(self) -> Server:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


def _run(
    argv: Sequence[str], env: dict[str, str] | None, cwd: Path
) -> subprocess.CompletedProcess[str]:
    """One process run to completion, no stdin, its output captured."""
    return subprocess.run(
        list(argv),
        capture_output=True,
        text=True,
        env=process_env(env),
        cwd=cwd,
        check=False,
        stdin=subprocess.DEVNULL,
    )


def run_json(argv: Sequence[str], env: dict[str, str] | None = None) -> dict[str, Any]:
    """Run a client script to completion; its last stdout line is a JSON object."""
    done = _run(argv, env, REPO)
    if done.returncode != 0:
        raise RuntimeError(f"{argv[1]} failed ({done.returncode}):\n{done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def timed(argv: Sequence[str], env: dict[str, str] | None = None, cwd: Path = REPO) -> float:
    """Wall seconds of one process run to completion (it must exit 0)."""
    started = time.perf_counter()
    done = _run(argv, env, cwd)
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        output = (done.stdout + done.stderr)[-3000:]
        raise RuntimeError(f"{' '.join(argv[:3])} failed ({done.returncode}):\n{output}")
    return elapsed


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.2f} ms"


def seconds(value: float) -> str:
    return f"{value:.3f} s"
