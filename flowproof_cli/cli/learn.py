"""`flowproof match learn SPEC`: the `match:` rules a flow needs, learned from two runs.

Text output is YAML on stdout: every line but the rules is a comment, so the whole output
parses, and the block under `match:` pastes into the spec as it is. Each run's verdict goes
to stderr as it ends. `--json` prints one document instead.

Exit codes (flowproof_cli/errors.py): 0 when the rules make the two runs' requests equal
(checked), 1 when they could not be made equal (a run failed, the runs made different
numbers of requests, a difference no rule removes), 2 when flowproof could not run them.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from flowproof_cli.cli.options import json_option, timeout_option
from flowproof_cli.cli.record import upstream_timeout_option
from flowproof_cli.errors import ExitCode

if TYPE_CHECKING:
    from flowproof_cli.cassette.learn import Learned, Seen
    from flowproof_cli.runner.learn import Dating, LearnRun


@click.command()
@click.argument("spec_path", metavar="SPEC", type=click.Path(dir_okay=False, path_type=Path))
@click.option(
    "--project",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="The folder copied for each run (default: the spec's folder); it must hold SPEC.",
)
@click.option(
    "--home-template",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="A folder copied into each run's fresh HOME (an agent's settings, say).",
)
@timeout_option
@upstream_timeout_option
@json_option
def learn(
    *,
    spec_path: Path,
    project: Path | None,
    home_template: Path | None,
    timeout: float | None,
    upstream_timeout: float | None,
    as_json: bool,
) -> None:
    """Run SPEC's agent twice against the record upstream and print the match rules that
    make the two runs' requests equal.

    The runs are records of two copies of the project, with two HOMEs, the second a month
    later when libfaketime's `faketime` is installed. Their requests are compared field by
    field; the rules (relocate, normalize, ignore), each with the values it saw, are checked
    by applying them to both runs, and printed as YAML to paste under the spec's `match:`.
    The spec's own rules are in force in both runs: what is printed is what is still
    needed. Exit 0: checked equal; 1: the runs could not be made equal; 2: could not run.
    """
    import os  # noqa: PLC0415

    from flowproof_cli.cassette.learn import learn_rules  # noqa: PLC0415
    from flowproof_cli.runner.learn import faketime_dating, learn_runs  # noqa: PLC0415

    dating = faketime_dating()
    runs = learn_runs(
        spec_path,
        environ=os.environ,
        project=project,
        home_template=home_template,
        timeout_s=timeout,
        upstream_timeout_s=upstream_timeout,
        dating=dating,
        on_run=None if as_json else _say_run,
    )
    first, second = runs
    learned = None
    if first.turns is not None and second.turns is not None:
        learned = learn_rules(first.turns, second.turns, (first.place, second.place))
    verified = learned is not None and learned.verified
    code = int(ExitCode.PASSED if verified else ExitCode.FAILED)
    if as_json:
        click.echo(json.dumps(learned_json(spec_path, runs, learned, dating, code), indent=2))
    else:
        click.echo("\n".join(learned_text(spec_path, runs, learned, dating)))
    sys.exit(code)


def _say_run(run: LearnRun) -> None:
    from flowproof_cli.cli.output import verdict_line  # noqa: PLC0415

    where = f"in {run.place.cwd}, HOME {run.place.home}, {run.date}"
    click.echo(f"run {run.number} of 2 ({where}):", err=True)
    click.echo("    " + verdict_line(run.result, with_time=True).replace("\n", "\n    "), err=True)


# -- text -------------------------------------------------------------------------------------


def _yaml_string(text: str) -> str:
    """A YAML scalar that reads back as `text`: single-quoted, or JSON's double quotes (which
    YAML reads too) when it holds a character a single-quoted scalar cannot."""
    if text.isprintable():
        return "'" + text.replace("'", "''") + "'"
    return json.dumps(text)


def _value(value: Any) -> str:
    """A value as a comment quotes it: on one line, escaped, clipped."""
    from flowproof_cli.cassette.diff import show  # noqa: PLC0415
    from flowproof_cli.cassette.learn import SHOWN  # noqa: PLC0415
    from flowproof_cli.quoting import printable  # noqa: PLC0415

    shown = printable(show(value, SHOWN))
    return json.dumps(shown, ensure_ascii=False) if isinstance(value, str) else shown


def _seen(seen: Seen) -> str:
    pairs = "; ".join(f"run 1 {_value(a)}, run 2 {_value(b)}" for a, b in seen.pairs)
    more = f"; and {seen.more} more" if seen.more else ""
    return f"{len(seen.requests)} request(s): {pairs}{more}"


def _rules_text(learned: Learned, runs: list[LearnRun]) -> list[str]:
    lines = ["match:"]
    if learned.relocate is not None:
        places = "; ".join(f"run {run.number} {run.place.cwd} and {run.place.home}" for run in runs)
        requests = len(learned.relocate.requests)
        lines.append(f"  relocate: true  # {requests} request(s) hold the paths: {places}")
    if learned.normalize:
        lines.append("  normalize:")
        for rule in learned.normalize:
            lines += [
                f"    # {rule.kind}, {_seen(rule.seen)}",
                f"    - pattern: {_yaml_string(rule.pattern)}",
                f"      replace: {_yaml_string(rule.replace)}",
                f"      at: {_yaml_string(rule.at)}",
            ]
    if learned.ignore:
        lines.append("  ignore:")
        for ignored in learned.ignore:
            lines += [f"    # {_seen(ignored.seen)}", f"    - {_yaml_string(ignored.path)}"]
    return lines


def _differences(learned: Learned) -> list[str]:
    from flowproof_cli.cassette.diff import describe  # noqa: PLC0415
    from flowproof_cli.quoting import printable  # noqa: PLC0415

    lines = []
    for difference in learned.remaining:
        if difference.change is None:
            lines.append(f"#   request {difference.request}: {difference.reason}")
            continue
        head, *rest = describe(difference.change)
        lines.append(f"#   request {difference.request}: {printable(head)}")
        lines += [f"#     {printable(line)}" for line in rest]
    return lines


def _failed(runs: list[LearnRun]) -> list[str]:
    from flowproof_cli.quoting import printable  # noqa: PLC0415

    lines = []
    for run in runs:
        if run.turns is not None:
            continue
        result = run.result
        skipped = f"it was skipped: {result.skipped}" if result.skipped else ""
        text = result.error or "\n".join(result.failure_texts) or skipped or "it failed"
        head, *rest = [printable(line) for line in text.splitlines()] or ["it failed"]
        lines.append(f"# run {run.number} failed: {head}")
        lines += [f"#     {line}" for line in rest]
    return [
        *lines,
        "# Nothing was learned: each run is a record, and a record must pass. Fix what "
        "failed, then learn again.",
    ]


def _compared(learned: Learned, runs: list[LearnRun], dating: Dating) -> list[str]:
    """What was compared, and under which rules already in force."""
    counts = learned.requests
    if counts[0] == counts[1]:
        lines = [f"#   each made {counts[0]} model request(s), compared field by field"]
    else:
        lines = [
            f"#   run 1 made {counts[0]} model request(s), run 2 made {counts[1]}: only the "
            f"first {min(counts)} could be compared"
        ]
    if not dating.varied:
        lines.append("#   the date was not varied (see run 2): no date rule can be learned")
    if runs[0].rules_in_force:
        lines.append(
            f"# The {len(runs[0].rules_in_force)} match rule(s) already in force (the spec's "
            "and its suite's `match:`) ran in both runs: the rules below are the ones still "
            "needed beyond them."
        )
    return lines


def _from_model(learned: Learned, shown: int = 5) -> list[str]:
    if not learned.from_model:
        return []
    lines = [
        f"# {len(learned.from_model)} field(s) differ only by values the model minted and "
        "the agent sent back; a replay serves the recorded answers, so they need no rule:"
    ]
    lines += [
        f"#   request {d.request}: {d.change.path}: run 1 {_value(d.change.recorded)}, "
        f"run 2 {_value(d.change.replayed)}"
        for d in learned.from_model[:shown]
        if d.change is not None
    ]
    if len(learned.from_model) > shown:
        lines.append(f"#   ... and {len(learned.from_model) - shown} more")
    return lines


def _verdict(learned: Learned) -> list[str]:
    if learned.verified:
        compared = min(learned.requests)
        return [
            f"# Verified: with these rules, the {compared} request(s) of the two runs are equal."
        ]
    return [
        f"# NOT verified: with these rules, {len(learned.remaining)} difference(s) remain "
        "that no rule removes (recorded is run 1, replayed run 2):",
        *_differences(learned),
    ]


def learned_text(
    spec_path: Path, runs: list[LearnRun], learned: Learned | None, dating: Dating
) -> list[str]:
    """The learning as YAML: comments, and the rules under `match:`."""
    name = runs[0].result.name
    lines = [f"# flowproof match learn {spec_path}: two runs of {name!r}"]
    lines += [
        f"#   run {run.number}: in {run.place.cwd}, HOME {run.place.home}, {run.date}"
        for run in runs
    ]
    if learned is None:
        return lines + _failed(runs)
    lines += _compared(learned, runs, dating)
    if learned.needs_rules:
        lines.append(
            "# Paste under the spec's `match:` (merged with what is there); review each rule "
            "and the values it saw:"
        )
        lines += _rules_text(learned, runs)
    else:
        lines.append("# No rule is needed: the two runs sent the same requests.")
    return lines + _from_model(learned) + _verdict(learned)


# -- JSON -------------------------------------------------------------------------------------


def learned_json(
    spec_path: Path, runs: list[LearnRun], learned: Learned | None, dating: Dating, code: int
) -> dict[str, Any]:
    rules: list[dict[str, Any]] = []
    if learned is not None:
        if learned.relocate is not None:
            places = [{"cwd": run.place.cwd, "home": run.place.home} for run in runs]
            requests = sorted(learned.relocate.requests)
            rules.append({"rule": "relocate", "seen": places, "requests": requests})
        rules += [rule.to_json() for rule in learned.normalize]
        rules += [rule.to_json() for rule in learned.ignore]
    return {
        "exit_code": code,
        "verified": code == ExitCode.PASSED,
        "spec": str(spec_path),
        "runs": [
            {
                "run": run.number,
                "cwd": run.place.cwd,
                "home": run.place.home,
                "date": run.date,
                "status": run.result.status,
                "model_calls": run.result.model_calls,
                "failures": run.result.failure_texts,
                "error": run.result.error,
            }
            for run in runs
        ],
        "date_varied": dating.varied,
        "rules_in_force": runs[0].rules_in_force,
        "requests": list(learned.requests) if learned else None,
        "match": learned.match_json() if learned else None,
        "rules": rules,
        "from_model": [d.to_json() for d in learned.from_model] if learned else [],
        "remaining": [d.to_json() for d in learned.remaining] if learned else [],
    }
