"""The counts of a mutation run (`make mutate`), per module, and the gate on them.

Reads the result files mutmut leaves under `mutants/` and the mutants that
docs/falsifiability.md names as equivalent (a backticked mutant name in its "Mutation
testing" section). Exits 1 when a mutant survived, or reached no test, and the doc does not
name it: such a mutant is a change to the code that no test notices.

    python scripts/mutation_report.py [--mutants DIR] [--doc FILE]
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

# mutmut's exit codes per mutant (mutmut.stats.status_by_exit_code), folded to what we report.
_STATUS = {1: "killed", 3: "killed", 0: "survived", 5: "no tests", 33: "no tests", 34: "skipped"}
_STATUS |= dict.fromkeys((36, 24, -24, 152, 255), "timeout")
_STATUS |= {37: "type check", None: "not checked"}
COLUMNS = ("killed", "survived", "equivalent", "timeout", "no tests", "not checked", "other")
_NAME = re.compile(r"`([A-Za-z_][\w.]*\.x[_ǁ][^`\s]*__mutmut_\d+)`")
_SECTION = re.compile(r"^## Mutation testing\s*$", re.MULTILINE)


@dataclass
class Report:
    counts: dict[str, Counter[str]] = field(default_factory=dict)
    unexplained: list[str] = field(default_factory=list)  # survived or untested, not named
    stale: list[str] = field(default_factory=list)  # named equivalent, but no longer survives


def module_of(mutant: str) -> str:
    """`flowproof_cli.canonical.x_parse_or__mutmut_1` -> `flowproof_cli.canonical`."""
    return re.split(r"\.x[_ǁ]", mutant, maxsplit=1)[0]


def equivalents(doc: Path) -> set[str]:
    """The mutant names the doc's "Mutation testing" section lists as equivalent."""
    if not doc.is_file():
        return set()
    text = doc.read_text(encoding="utf-8")
    start = _SECTION.search(text)
    if start is None:
        return set()
    section = text[start.end() :]
    end = re.search(r"^## ", section, re.MULTILINE)
    return set(_NAME.findall(section[: end.start()] if end else section))


def results(mutants: Path) -> dict[str, str]:
    """Every mutant's status, from mutmut's `*.py.meta` files."""
    statuses: dict[str, str] = {}
    for meta in sorted(mutants.rglob("*.py.meta")):
        codes = json.loads(meta.read_text(encoding="utf-8"))["exit_code_by_key"]
        for name, code in codes.items():
            statuses[name] = _STATUS.get(code, "other")
    return statuses


def build(statuses: dict[str, str], named: set[str]) -> Report:
    report = Report()
    for name, status in sorted(statuses.items()):
        loose = status in ("survived", "no tests")
        if loose and name not in named:
            report.unexplained.append(f"{name} ({status})")
        elif name in named and not loose:
            report.stale.append(f"{name} ({status})")
        shown = "equivalent" if loose and name in named else status
        bucket = shown if shown in COLUMNS else "other"
        report.counts.setdefault(module_of(name), Counter())[bucket] += 1
    return report


def render(report: Report) -> str:
    width = max((len(module) for module in report.counts), default=6)
    head = f"{'module':<{width}}  {'total':>5}  " + "  ".join(f"{c:>11}" for c in COLUMNS)
    lines = [head]
    totals: Counter[str] = Counter()
    for module, counts in sorted(report.counts.items()):
        totals.update(counts)
        cells = "  ".join(f"{counts[c]:>11}" for c in COLUMNS)
        lines.append(f"{module:<{width}}  {sum(counts.values()):>5}  {cells}")
    cells = "  ".join(f"{totals[c]:>11}" for c in COLUMNS)
    lines.append(f"{'all':<{width}}  {sum(totals.values()):>5}  {cells}")
    for name in report.stale:
        lines.append(f"note: {name} is listed as equivalent but did not survive; drop it")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mutants", type=Path, default=Path("mutants"))
    parser.add_argument("--doc", type=Path, default=Path("docs/falsifiability.md"))
    args = parser.parse_args(argv)
    statuses = results(args.mutants)
    if not statuses:
        print(f"mutation report: no mutmut results under {args.mutants}/. Fix: run `make mutate`")
        return 2
    report = build(statuses, equivalents(args.doc))
    print(render(report))
    if report.unexplained:
        print(f"\n{len(report.unexplained)} mutant(s) no test kills and {args.doc} does not name:")
        print("\n".join(f"  {name}" for name in report.unexplained))
        print(
            "Fix: `.venv/bin/mutmut show NAME` shows the change; add a test that fails on it, "
            f"or list it as equivalent, with the reason, under `## Mutation testing` in {args.doc}"
        )
    unchecked = sum(counts["not checked"] for counts in report.counts.values())
    if unchecked:
        print(f"\n{unchecked} mutant(s) were never run: the run stopped early. Fix: `make mutate`")
    return 1 if report.unexplained or unchecked else 0


if __name__ == "__main__":
    sys.exit(main())
