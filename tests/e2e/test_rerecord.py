"""Reviewed re-records end to end: a recording that would replace a trace shows its trajectory
diff and waits for approval (`--yes`, `y` on a terminal); with no terminal it waits beside the
trace as a candidate. Every red path checks the exit code, the message and both files.
"""

from __future__ import annotations

import json
import os
import select
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from flowproof_cli.cassette import Mode
from flowproof_cli.runner.job import plan_jobs
from flowproof_cli.runner.parallel import run_jobs
from flowproof_cli.runner.rerecord import commit, review
from flowproof_cli.verdict import Failure
from tests.conftest import REPO, CliResult, clean_environ, computed_once, run_cli
from tests.e2e.flows import copy_recording, set_agent_env, write_flow
from tests.fakes.fake_upstream import FakeUpstream

pytestmark = pytest.mark.slow

TERMINAL_WAIT_S = 120  # a guard against a hung prompt, never an assertion about time


def upstream(fake: FakeUpstream) -> dict[str, str]:
    return {"FLOWPROOF_AGENT_UPSTREAM": f"{fake.base_url}/v1", "FLOWPROOF_AGENT_KEY": "sk-test"}


def record(spec: Path, *extra: str) -> CliResult:
    """`flowproof record` with no terminal (run_cli's stdin is /dev/null)."""
    with FakeUpstream() as fake:
        return run_cli("record", spec, *extra, env=upstream(fake))


def trace_of(spec: Path) -> Path:
    return spec.with_name(spec.name.replace(".flow.yaml", ".trace.yaml"))


def candidate_of(spec: Path) -> Path:
    return spec.with_name(spec.name.replace(".flow.yaml", ".trace.candidate.yaml"))


def change_the_agent(spec: Path) -> None:
    """A code change a reviewer must see: a new tool offered, a terser system prompt."""
    set_agent_env(spec, AGENT_EXTRA_TOOL="check_visa", AGENT_SYSTEM="You are terse.")


@pytest.fixture(scope="module")
def recording(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A first record, once per session (`computed_once`): its folder, never written to
    again."""

    def record_once() -> str:
        spec = write_flow(tmp_path_factory.mktemp("first-record"))
        result = record(spec)
        assert result.code == 0, result.output
        assert f"wrote {trace_of(spec)} (2 turn(s))" in result.stdout  # a first record asks nothing
        assert "differs from" not in result.stdout and "trajectory unchanged" not in result.stdout
        assert not candidate_of(spec).exists()
        return str(spec.parent)

    return Path(computed_once(tmp_path_factory, "rerecord-first-record", record_once))


@pytest.fixture
def recorded(recording: Path, tmp_path: Path) -> Path:
    """The test's own copy of the first record's flow and trace, to re-record over."""
    return copy_recording(recording, tmp_path)


def test_an_unchanged_trajectory_is_rewritten_without_asking(recorded: Path) -> None:
    before = trace_of(recorded).read_text()
    result = record(recorded)
    assert result.code == 0, result.output
    assert f"note: trajectory unchanged: rewrote {trace_of(recorded)} without review" in (
        result.stdout
    )
    after = trace_of(recorded).read_text()
    assert after != before  # the fake minted new ids: the file is this run's recording
    assert not candidate_of(recorded).exists()


def test_without_a_terminal_the_old_trace_stays_and_the_candidate_waits(recorded: Path) -> None:
    old = trace_of(recorded).read_bytes()
    change_the_agent(recorded)
    result = record(recorded)
    assert result.code == 1, result.output
    trace, candidate = trace_of(recorded), candidate_of(recorded)
    assert trace.read_bytes() == old
    assert "check_visa" in candidate.read_text()
    assert f"weather flow: the new recording differs from {trace}" in result.stdout
    assert "    tools offered:\n      + check_visa\n" in result.stdout
    assert "    system prompt: You are a weather assistant. -> You are terse.\n" in result.stdout
    assert "  what the agent did differently:\n    nothing\n" in result.stdout
    assert (
        f"FAIL: weather flow - re-record not approved (no terminal to ask on): kept {trace}; "
        f"the new recording is {candidate}. Accept it with `flowproof record --yes {recorded}`, "
        f"or review it (`flowproof diff {trace} {candidate}`) and `mv {candidate} {trace}`"
    ) in result.stdout
    assert "wrote" not in result.stdout

    # The suggested review shows the same diff; moving the candidate accepts it.
    shown = run_cli("diff", trace, candidate)
    assert shown.code == 1, shown.output
    assert "  tools offered:\n    + check_visa\n" in shown.stdout
    shutil.move(candidate, trace)
    replayed = run_cli("run", recorded)
    assert replayed.code == 0, replayed.output


def test_yes_replaces_the_trace_after_printing_the_diff(recorded: Path) -> None:
    set_agent_env(recorded, AGENT_CITY_TYPE="integer")
    result = record(recorded, "--yes")
    assert result.code == 0, result.output
    assert "      ~ get_weather (asserted): its declaration changed" in result.stdout
    assert "get_weather.function.parameters.properties.city.type: string -> integer" in (
        result.stdout
    )
    assert f"wrote {trace_of(recorded)} (2 turn(s))" in result.stdout
    assert "integer" in trace_of(recorded).read_text()
    assert not candidate_of(recorded).exists()
    assert run_cli("run", recorded).code == 0


def test_a_failed_re_record_touches_neither_file(recorded: Path) -> None:
    old = trace_of(recorded).read_bytes()
    stale = b"an earlier candidate, left for review\n"
    candidate_of(recorded).write_bytes(stale)
    spec = yaml.safe_load(recorded.read_text())
    spec["steps"][0]["prompt"] = "What's the weather in Paris right now? Use both tools."
    recorded.write_text(yaml.safe_dump(spec, sort_keys=False))
    result = record(recorded, "--yes")
    assert result.code == 1, result.output
    assert "FAIL: weather flow - " in result.stdout
    assert "no trace written" in result.stdout
    assert "the new recording differs" not in result.stdout
    assert trace_of(recorded).read_bytes() == old
    assert candidate_of(recorded).read_bytes() == stale


def test_json_never_asks_and_carries_the_candidate_and_its_diff(recorded: Path) -> None:
    change_the_agent(recorded)
    result = record(recorded, "--json")
    assert result.code == 1, result.output
    (flow,) = json.loads(result.stdout)["flows"]
    assert flow["candidate_path"] == str(candidate_of(recorded))
    assert "  tools offered:" in flow["trajectory_diff"]
    assert flow["trace_written"] is False
    assert Failure.from_json(flow["failures"][0]).text.startswith("re-record not approved")


def test_a_custom_output_path_names_it_in_the_advice(recorded: Path, tmp_path: Path) -> None:
    custom = tmp_path / "kept.yaml"
    shutil.copy(trace_of(recorded), custom)
    change_the_agent(recorded)
    result = record(recorded, "-o", str(custom))
    assert result.code == 1, result.output
    candidate = tmp_path / "kept.candidate.yaml"
    assert candidate.exists()
    assert f"`flowproof record --yes -o {custom} {recorded}`" in result.stdout


# -- on a terminal ---------------------------------------------------------------------------


def _read_until(master: int, needle: bytes, process: subprocess.Popen[bytes]) -> bytes:
    """Output from the pseudo-terminal until `needle` (or the process ends)."""
    seen = b""
    deadline = time.monotonic() + TERMINAL_WAIT_S
    while needle not in seen and time.monotonic() < deadline:
        ready, _, _ = select.select([master], [], [], 1.0)
        if not ready:
            if process.poll() is not None:
                break
            continue
        try:
            chunk = os.read(master, 4096)
        except OSError:  # EIO: the other side closed
            break
        if not chunk:
            break
        seen += chunk
    return seen


def record_on_terminal(spec: Path, answer: bytes) -> tuple[int, str]:
    """`flowproof record SPEC` with a pseudo-terminal as stdin and stdout, answering the
    prompt with `answer`."""
    master, slave = os.openpty()
    with FakeUpstream() as fake:
        process = subprocess.Popen(
            [sys.executable, "-m", "flowproof_cli", "record", str(spec)],
            stdin=slave,
            stdout=slave,
            stderr=slave,
            env=clean_environ({**upstream(fake), "NO_COLOR": "1"}),  # a terminal gets colour
            cwd=REPO,
            start_new_session=True,
        )
        os.close(slave)
        try:
            before = _read_until(master, b"[y/N]", process)
            assert b"[y/N]" in before, before.decode(errors="replace")
            os.write(master, answer)
            after = _read_until(master, b"\x00never", process)
            code = process.wait(timeout=TERMINAL_WAIT_S)
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
            os.close(master)
    return code, (before + after).decode(errors="replace").replace("\r\n", "\n")


def test_on_a_terminal_yes_replaces_the_trace(recorded: Path) -> None:
    change_the_agent(recorded)
    code, output = record_on_terminal(recorded, b"y\n")
    assert code == 0, output
    assert "    tools offered:\n      + check_visa\n" in output
    assert f"Replace {trace_of(recorded)} with this recording? [y/N]:" in output
    assert f"wrote {trace_of(recorded)} (2 turn(s))" in output
    assert "check_visa" in trace_of(recorded).read_text()
    assert not candidate_of(recorded).exists()


def test_on_a_terminal_no_keeps_the_trace_and_discards_the_candidate(recorded: Path) -> None:
    old = trace_of(recorded).read_bytes()
    change_the_agent(recorded)
    code, output = record_on_terminal(recorded, b"n\n")
    assert code == 1, output
    assert (
        f"FAIL: weather flow - re-record refused: kept {trace_of(recorded)} and discarded "
        "the new recording"
    ) in output
    assert trace_of(recorded).read_bytes() == old
    assert not candidate_of(recorded).exists()


# -- -j N: each flow writes its candidate, the review follows once all have ended -----------


def test_parallel_flows_leave_candidates_for_the_review(tmp_path: Path) -> None:
    specs = [write_flow(tmp_path, name=name) for name in ("one", "two")]
    for spec in specs:
        assert record(spec).code == 0
    old = {spec: trace_of(spec).read_bytes() for spec in specs}
    change_the_agent(specs[0])  # only the first one's trajectory changes
    with FakeUpstream() as fake:
        jobs = plan_jobs(specs, mode=Mode.RECORD, environ=clean_environ(upstream(fake)))
        results = run_jobs(jobs, 2)  # two flows at once in this process
    first, second = results
    assert first.candidate_path == candidate_of(specs[0]), first
    assert first.candidate_path.exists()
    assert trace_of(specs[0]).read_bytes() == old[specs[0]]  # the flow replaced nothing
    assert "  tools offered:" in first.trajectory_diff
    assert second.candidate_path is None
    assert second.staged_trace is not None  # unchanged: staged as the flow ended
    printed: list[str] = []
    review(results, yes=True, ask=None, echo=printed.append)
    commit(results)
    assert first.trace_written and first.candidate_path is None
    assert second.trace_written
    assert "check_visa" in trace_of(specs[0]).read_text()
    assert not candidate_of(specs[0]).exists()
    assert printed[0] == f"one flow: the new recording differs from {trace_of(specs[0])}"
    assert first.passed and second.passed


def test_a_secret_in_the_old_trace_is_redacted_from_the_diff(tmp_path: Path) -> None:
    token = "sk-live-0123456789"
    prompt = "What's the weather in Nairobi right now? Use both tools."
    spec = write_flow(tmp_path, steps=[{"prompt": f"{prompt} My token is {token}."}])
    assert record(spec).code == 0
    assert token in trace_of(spec).read_text()  # recorded before the spec guarded it
    guarded = [{"prompt": prompt}, {"assert_no_secret_leak": "${MY_TOKEN}"}]
    write_flow(tmp_path, steps=guarded)
    with FakeUpstream() as fake:
        result = run_cli("record", spec, env={**upstream(fake), "MY_TOKEN": token})
    assert result.code == 1, result.output
    assert "~ user message: " in result.stdout
    assert "My token is [redacted ${MY_TOKE" in result.stdout  # the window may cut the marker
    assert token not in result.output
    assert token not in candidate_of(spec).read_text()
    assert token in trace_of(spec).read_text()  # kept: the re-record was not approved
