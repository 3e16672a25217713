"""Output a person reads: colour only on a terminal (NO_COLOR, FORCE_COLOR), `--quiet`, and
a progress line on a terminal's stderr that never reaches the results."""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path

import pytest

from flowproof_cli.cli import output
from flowproof_cli.cli.output import Settings, painted, wants_colour
from flowproof_cli.verdict import Failure, FlowResult

GREEN_PASS = "\x1b[32m\x1b[1mPASS:\x1b[0m"
RED_FAIL = "\x1b[31m\x1b[1mFAIL:\x1b[0m"


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture(autouse=True)
def fresh_settings(monkeypatch: pytest.MonkeyPatch) -> Iterator[Settings]:
    settings = Settings()
    monkeypatch.setattr(output, "SETTINGS", settings)
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    yield settings


def _result(**changes: object) -> FlowResult:
    result = FlowResult("weather", Path("w.flow.yaml"), "replay", Path("w.trace.yaml"))
    result.containment = "egress containment: enforced (linux seccomp)"
    result.notes = ["warning: tool `x` is mocked"]
    for key, value in changes.items():
        setattr(result, key, value)
    return result


@pytest.mark.parametrize(
    ("tty", "environ", "expected"),
    [
        (True, {}, True),
        (False, {}, False),
        (True, {"NO_COLOR": "1"}, False),
        (False, {"FORCE_COLOR": "1"}, True),
        (True, {"NO_COLOR": "1", "FORCE_COLOR": "1"}, False),  # NO_COLOR wins
        (False, {"FORCE_COLOR": "0"}, False),
        (True, {"NO_COLOR": ""}, True),  # set but empty: not a request
    ],
)
def test_colour_follows_the_terminal_and_the_variables(
    tty: bool, environ: dict[str, str], expected: bool
) -> None:
    stream = _Tty() if tty else io.StringIO()
    assert wants_colour(stream, environ) is expected


def test_labels_are_painted_by_verdict() -> None:
    assert painted("PASS: a (1.0s)", colour=True) == f"{GREEN_PASS} a (1.0s)"
    assert painted("FAIL: a - b", colour=True) == f"{RED_FAIL} a - b"
    assert painted("SKIP: a", colour=True).startswith("\x1b[33m")
    assert painted("ERROR: a", colour=True).startswith("\x1b[31m")
    assert painted("PASS: a", colour=False) == "PASS: a"
    assert painted("    note: PASS: a", colour=True) == "    note: PASS: a"  # labels only


def test_a_pipe_gets_no_escape_codes(capsys: pytest.CaptureFixture[str]) -> None:
    output.print_flow(_result(failures=[Failure("divergence at turn 1")]), with_time=False)
    out = capsys.readouterr().out
    assert out.startswith("FAIL: weather - divergence at turn 1\n")
    assert "\x1b" not in out


def test_force_colour_paints_a_pipe(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FORCE_COLOR", "1")
    output.print_flow(_result(), with_time=False)
    assert capsys.readouterr().out.startswith(f"{GREEN_PASS} weather\n")


def test_quiet_keeps_only_verdicts_and_failures(
    capsys: pytest.CaptureFixture[str], fresh_settings: Settings
) -> None:
    fresh_settings.quiet = True
    output.print_flow(_result(), with_time=False)
    output.print_flow(_result(failures=[Failure("first"), Failure("second")]), with_time=False)
    assert capsys.readouterr().out == ("PASS: weather\nFAIL: weather - first\n    also: second\n")


def test_without_quiet_the_notes_follow_the_verdict(capsys: pytest.CaptureFixture[str]) -> None:
    output.print_flow(_result(), with_time=False)
    assert capsys.readouterr().out == (
        "PASS: weather\n"
        "    egress containment: enforced (linux seccomp)\n"
        "    warning: tool `x` is mocked\n"
    )


def test_progress_is_drawn_on_a_terminal_and_erased_before_each_result(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    err = _Tty()  # stderr is a terminal, stdout the captured pipe
    monkeypatch.setattr(output.sys, "stderr", err)
    output.start_progress(2)
    output.print_flow(_result(), with_time=False)
    output.print_summary([_result()])
    assert err.getvalue() == (
        "\r\x1b[Krunning flows: 0/2 done\r\x1b[K\r\x1b[Krunning flows: 1/2 done\r\x1b[K"
    )
    out = capsys.readouterr().out
    assert "running flows" not in out and out.endswith("1 passed, 0 failed, 0 skipped\n")


def test_no_progress_when_stderr_is_not_a_terminal(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    output.start_progress(3)
    output.print_flow(_result(), with_time=False)
    output.print_summary([_result()])
    captured = capsys.readouterr()
    assert captured.err == ""
    assert "\x1b" not in captured.out


def test_a_directory_run_shows_a_passing_flows_tier_only_when_verbose(
    capsys: pytest.CaptureFixture[str], fresh_settings: Settings
) -> None:
    tier = "    egress containment: enforced (linux seccomp)\n"
    output.print_flow(_result(), with_time=True)
    assert tier not in capsys.readouterr().out
    output.print_flow(_result(failures=[Failure("boom")]), with_time=True)  # failing: always shown
    assert tier in capsys.readouterr().out
    fresh_settings.verbose = True
    output.print_flow(_result(), with_time=True)
    assert (
        capsys.readouterr().out == f"PASS: weather (0.0s)\n{tier}    warning: tool `x` is mocked\n"
    )


# -- --all-changes ------------------------------------------------------------------------------


def _diverged() -> FlowResult:
    """A replay whose request moved in six parameters: the message shows three of them."""
    from flowproof_cli.cassette.divergence import explain
    from flowproof_cli.cassette.turn import Turn

    recorded = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    replayed = {**recorded, **{f"p{n}": n for n in range(6)}}
    divergence = explain(1, Turn("openai-chat", recorded, 200, {}), "openai-chat", replayed)
    return _result(
        failures=[Failure(f"divergence at {divergence.message}")], divergence=divergence.to_json()
    )


def test_a_divergence_shows_its_first_changes_and_how_many_more() -> None:
    line = output.verdict_line(_diverged())
    assert line.splitlines() == [
        "FAIL: weather - divergence at turn 1: request parameters changed: p0: added in replay (0)",
        "      p1: added in replay (1)",
        "      p2: added in replay (2)",
        "      ... and 3 more change(s)",
    ]


def test_all_changes_lists_every_changed_field(fresh_settings: Settings) -> None:
    fresh_settings.all_changes = True
    line = output.verdict_line(_diverged())
    assert line.splitlines() == [
        "FAIL: weather - divergence at turn 1: request parameters changed: p0: added in replay (0)",
        "      p1: added in replay (1)",
        "      p2: added in replay (2)",
        "      every changed field of the request (6):",
        *(f"        p{n}: added in replay ({n})" for n in range(6)),
    ]


def test_all_changes_leaves_other_failures_alone(fresh_settings: Settings) -> None:
    fresh_settings.all_changes = True
    result = _result(failures=[Failure("reply does not contain sunny")])
    assert output.verdict_line(result) == "FAIL: weather - reply does not contain sunny"
