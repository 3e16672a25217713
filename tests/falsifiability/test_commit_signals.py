"""A signal at the end of a record never splits the trace from what flowproof says of it.

The end of a record is one step: the new recording replaces the trace, its `wrote` line and
the verdict are printed, and the exit code is decided. A SIGINT or SIGTERM that lands before
the trace is replaced leaves the old trace, says `interrupted` (SIGTERM: the stop notice) and
exits 130 (143); one that lands after it finds the new trace in place, the `wrote` line and
the verdict printed, and the verdict's exit code (the signal is only noted on stderr).

Three probes: the signal sent the moment `PASS` shows on stdout (what an outside probe did,
five times out of five); the signal at each moment of the step, held there by the test-only
`FLOWPROOF_COMMIT_PROBE` folder (record stops at each moment until the test removes its file);
and seeded random moments around the verdict of an unstopped record. Each record gets new
ids from the fake model (a new seed), so the new trace differs from the old one in bytes
while its trajectory does not (it replaces the old one without review).
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import computed_once, start_cli
from tests.e2e.flows import copy_recording, write_flow
from tests.e2e.sockets_and_pids import eventually
from tests.fakes.fake_upstream import FakeUpstream

SIGNALS = (signal.SIGINT, signal.SIGTERM)
EXIT_WAIT_S = 60
SEED = int(os.environ.get("FLOWPROOF_KILL_SEED", "14"))
#: Random moments per signal around the verdict of an unstopped record.
SWEEP = int(os.environ.get("FLOWPROOF_COMMIT_CASES", "4"))
#: What a signal that lands before the trace is replaced may end with: the interrupt's
#: code, or (SIGTERM) death by the signal while the event loop's own clean-up ran, before
#: flowproof's handler was back (a shell reads both as 143).
INTERRUPTED = {signal.SIGINT: {130}, signal.SIGTERM: {143, -signal.SIGTERM}}


@dataclass
class Ended:
    code: int | None
    stdout: str
    stderr: str
    trace: bytes  # the trace's bytes once flowproof ended
    folder: Path  # the flow's folder

    def leftovers(self) -> list[str]:
        return sorted(p.name for p in self.folder.iterdir() if p.name.endswith(".tmp"))


@pytest.fixture(scope="module")
def recording(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The flow recorded once per session (seed 1; `computed_once`): its folder, never
    written to again."""

    def record_once() -> str:
        spec = write_flow(tmp_path_factory.mktemp("recording"))
        end = record(spec, seed=1)
        assert end.code == 0, end.stderr
        return str(spec.parent)

    return Path(computed_once(tmp_path_factory, "commit-signals-recording", record_once))


@pytest.fixture
def recorded(recording: Path, tmp_path: Path) -> tuple[Path, bytes]:
    """A flow with its trace in place (seed 1): the test's own copy of the recording."""
    spec = copy_recording(recording, tmp_path)
    return spec, trace_of(spec).read_bytes()


def trace_of(spec: Path) -> Path:
    return spec.with_name(spec.name.replace(".flow.", ".trace."))


def start_record(spec: Path, fake: FakeUpstream, **env: str) -> subprocess.Popen[str]:
    variables = {"FLOWPROOF_AGENT_UPSTREAM": f"{fake.base_url}/v1", **env}
    return start_cli("record", spec, cwd=spec.parent, env=variables)


def ended(process: subprocess.Popen[str], spec: Path, stdout: str = "") -> Ended:
    try:
        out, err = process.communicate(timeout=EXIT_WAIT_S)
        code: int | None = process.returncode
    except subprocess.TimeoutExpired:
        process.kill()
        out, err = process.communicate()
        code = None
    return Ended(code, stdout + out, err, trace_of(spec).read_bytes(), spec.parent)


def record(spec: Path, *, seed: int) -> Ended:
    with FakeUpstream(seed=seed) as fake:
        return ended(start_record(spec, fake), spec)


def problems(sig: signal.Signals, end: Ended, old: bytes) -> list[str]:
    """What breaks the rule: (old trace, interrupted) or (new trace, said, verdict's code)."""
    found = [f"left beside the trace: {end.leftovers()}"] if end.leftovers() else []
    if "Traceback" in end.stderr:
        found.append(f"a traceback: {end.stderr[-1500:]}")
    if end.trace == old:
        if end.code not in INTERRUPTED[sig]:
            found.append(f"the old trace stayed, but the exit is {end.code}")
        if "wrote " in end.stdout:
            found.append("the old trace stayed, but a `wrote` line says otherwise")
        if sig is signal.SIGINT and "interrupted" not in end.stderr:
            found.append("the old trace stayed, but nothing says interrupted")
        return found
    if end.code != 0:
        found.append(f"the new trace is in place, but the exit is {end.code}")
    if "PASS: weather flow" not in end.stdout:
        found.append("the new trace is in place, but no verdict was printed")
    if "    wrote " not in end.stdout:
        found.append("the new trace is in place, but no `wrote` line says so")
    return found


def read_until(process: subprocess.Popen[str], text: str) -> str:
    """stdout as it arrives until it holds `text`: read from the pipe itself, unbuffered, so
    that `communicate` reads on from exactly there (a buffered reader would keep what it
    read past `text` to itself)."""
    assert process.stdout is not None
    seen = b""
    while text.encode() not in seen:
        chunk = os.read(process.stdout.fileno(), 65536)
        if not chunk:
            break
        seen += chunk
    return seen.decode()


@pytest.mark.slow
@pytest.mark.parametrize("sig", SIGNALS, ids=[s.name for s in SIGNALS])
def test_a_signal_as_the_verdict_prints_never_splits_it_from_the_trace(
    recorded: tuple[Path, bytes], sig: signal.Signals
) -> None:
    """The outside probe's moment: the signal the instant `PASS` shows. Before the fix,
    SIGTERM killed flowproof by the signal with the new trace in place (a shell saw 143),
    and SIGINT said `interrupted`, exit 130, with the trace replaced and no `wrote` line."""
    spec, old = recorded
    with FakeUpstream(seed=2) as fake:
        process = start_record(spec, fake)
        seen = read_until(process, "PASS: weather flow")
        process.send_signal(sig)
        end = ended(process, spec, seen)
    assert end.trace != old, end.stdout + end.stderr  # PASS printed: the new one is in place
    assert problems(sig, end, old) == []


#: The moments of the step a test can hold, in order, with the side of the rename each is on.
MOMENTS = {"review": "before", "noting": "before", "replaced": "after", "printed": "after"}
#: Time for a signal sent to a waiting flowproof to reach its handler before it goes on.
HANDLED_S = 0.5


@pytest.mark.slow
@pytest.mark.parametrize("moment", MOMENTS)
@pytest.mark.parametrize("sig", SIGNALS, ids=[s.name for s in SIGNALS])
def test_a_signal_at_each_moment_of_the_step(
    recorded: tuple[Path, bytes], tmp_path: Path, sig: signal.Signals, moment: str
) -> None:
    spec, old = recorded
    held = tmp_path / "held"
    held.mkdir()
    with FakeUpstream(seed=2) as fake:
        process = start_record(spec, fake, FLOWPROOF_COMMIT_PROBE=str(held))
        signalled = False
        for each in MOMENTS:  # once signalled, each later moment is let go as it comes
            marker = held / each
            reached = lambda: marker.exists() or process.poll() is not None  # noqa: E731
            assert eventually(reached, EXIT_WAIT_S), f"record never reached {each}"
            assert signalled or marker.exists(), f"record ended before {each}"
            if each == moment:
                process.send_signal(sig)
                time.sleep(HANDLED_S)
                signalled = True
            marker.unlink(missing_ok=True)
        end = ended(process, spec)
    assert problems(sig, end, old) == []
    if MOMENTS[moment] == "before":
        assert end.trace == old
        assert "flowproof: " + f"{trace_of(spec)} was left as it was" in end.stderr
    else:
        assert end.trace != old
        assert end.code == 0
        assert (
            f"flowproof: {sig.name} arrived once the record was complete: the output above "
            "stands, and the exit code is its verdict's"
        ) in end.stderr


def unstopped_span(spec: Path) -> float:
    """How long an unstopped record of `spec` takes, start to exit."""
    started = time.monotonic()
    end = record(spec, seed=3)
    assert end.code == 0, end.stderr
    return time.monotonic() - started


@pytest.mark.slow
@pytest.mark.stress
@pytest.mark.parametrize("sig", SIGNALS, ids=[s.name for s in SIGNALS])
def test_a_signal_at_random_moments_around_the_verdict(
    recorded: tuple[Path, bytes], sig: signal.Signals
) -> None:
    """Seeded moments over the last 0.6 s of an unstopped record: the verdict prints in
    there. Whatever each one hit, the rule holds."""
    spec, _ = recorded
    span = unstopped_span(spec)
    rng = random.Random(SEED + sig)
    outcomes = []
    for number in range(SWEEP):
        old = trace_of(spec).read_bytes()
        delay = rng.uniform(max(0.0, span - 0.6), span)
        with FakeUpstream(seed=10 + number) as fake:
            process = start_record(spec, fake)
            time.sleep(delay)
            process.send_signal(sig)
            end = ended(process, spec)
        outcomes.append((round(delay, 3), end.code, problems(sig, end, old)))
    print(f"{sig.name}: span {span:.2f} s; (delay, exit) {[o[:2] for o in outcomes]}")
    assert [o for o in outcomes if o[2]] == []
