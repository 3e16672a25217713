"""`make mutate`'s gate: a surviving mutant passes only when docs/falsifiability.md names it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from tests.conftest import REPO

SCRIPT = REPO / "scripts" / "mutation_report.py"
SURVIVOR = "flowproof_cli.canonical.x_canonical_ascii__mutmut_4"
KILLED = "flowproof_cli.cassette.index.xǁTurnIndexǁclaim__mutmut_1"


def write_results(folder: Path, codes: dict[str, int | None]) -> Path:
    """A `mutants/` folder as mutmut leaves it: one `.py.meta` file of exit codes."""
    meta = folder / "mutants" / "flowproof_cli" / "canonical.py.meta"
    meta.parent.mkdir(parents=True)
    meta.write_text(json.dumps({"exit_code_by_key": codes}), encoding="utf-8")
    return folder / "mutants"


def write_doc(folder: Path, names: list[str]) -> Path:
    rows = "".join(f"| `{name}` | the codec name is case-insensitive |\n" for name in names)
    doc = folder / "falsifiability.md"
    doc.write_text(f"# F\n\n## Mutation testing\n\n| mutant | why |\n|---|---|\n{rows}\n## Next\n")
    return doc


def report(mutants: Path, doc: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), "--mutants", str(mutants), "--doc", str(doc)],
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )


def test_a_survivor_the_doc_names_as_equivalent_passes(tmp_path: Path) -> None:
    mutants = write_results(tmp_path, {SURVIVOR: 0, KILLED: 1})
    result = report(mutants, write_doc(tmp_path, [SURVIVOR]))
    assert result.returncode == 0, result.stdout
    rows = {line.split()[0]: line.split()[1:] for line in result.stdout.splitlines()}
    # total, killed, survived, equivalent
    assert rows["flowproof_cli.canonical"][:4] == ["1", "0", "0", "1"]
    assert rows["flowproof_cli.cassette.index"][:4] == ["1", "1", "0", "0"]


def test_an_unnamed_survivor_fails_naming_it_and_the_fix(tmp_path: Path) -> None:
    mutants = write_results(tmp_path, {SURVIVOR: 0, KILLED: 1})
    result = report(mutants, write_doc(tmp_path, []))
    assert result.returncode == 1
    assert f"  {SURVIVOR} (survived)" in result.stdout
    assert "mutmut show NAME" in result.stdout
    assert "## Mutation testing" in result.stdout


def test_a_mutant_no_test_reaches_fails_like_a_survivor(tmp_path: Path) -> None:
    result = report(write_results(tmp_path, {SURVIVOR: 33}), write_doc(tmp_path, []))
    assert result.returncode == 1
    assert f"{SURVIVOR} (no tests)" in result.stdout


def test_a_name_outside_the_section_does_not_count(tmp_path: Path) -> None:
    doc = tmp_path / "falsifiability.md"
    doc.write_text(f"# F\n\n`{SURVIVOR}`\n\n## Mutation testing\n\nnothing\n")
    result = report(write_results(tmp_path, {SURVIVOR: 0}), doc)
    assert result.returncode == 1
    assert SURVIVOR in result.stdout


def test_an_unfinished_run_fails(tmp_path: Path) -> None:
    result = report(write_results(tmp_path, {KILLED: 1, SURVIVOR: None}), write_doc(tmp_path, []))
    assert result.returncode == 1
    assert "were never run" in result.stdout


def test_a_listed_mutant_that_is_now_killed_is_noted_as_stale(tmp_path: Path) -> None:
    result = report(write_results(tmp_path, {SURVIVOR: 1}), write_doc(tmp_path, [SURVIVOR]))
    assert result.returncode == 0
    assert f"note: {SURVIVOR} (killed) is listed as equivalent but did not survive" in (
        result.stdout
    )


def test_no_results_at_all_is_exit_2_with_the_fix(tmp_path: Path) -> None:
    result = report(tmp_path / "nothing", write_doc(tmp_path, []))
    assert result.returncode == 2
    assert "no mutmut results under" in result.stdout
    assert "make mutate" in result.stdout
