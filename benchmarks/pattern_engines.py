"""The engines a declared pattern could run on, measured against the presets' patterns.

    .venv/bin/python benchmarks/pattern_engines.py

For each engine: how many of the presets' 23 normalize patterns it compiles (they use
lookbehind and lookahead), its cost per application over request-shaped text, how it ends
`(a+)+$` against 41 `a`s and a `-` (and a longer run), and, for the `regex` library, the
code points where its character classes differ from Python's `re`. Engines that are not
installed (`regex` comes with tiktoken; google-re2 is `pip install google-re2`) are
skipped. The figures and the decision are in docs/matching.md; nothing is asserted.
"""

from __future__ import annotations

import random
import re
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from flowproof_cli.match.patterns import PatternBudgetExceeded, within_budget
from flowproof_cli.match.presets import load_preset, preset_names

try:
    import regex
except ImportError:
    regex = None
try:
    import re2  # type: ignore[import-not-found]
except ImportError:
    re2 = None

ROUNDS = 15
_PHRASE = (
    "the quick brown fox jumps over lazy dog Today's date is 2026-12-01 tool call result "
    "session_id Chunk ID: 3fa1 Wall time: 0.2 seconds <shell>bash</shell> .gemini/tmp/x"
)


def _texts() -> list[str]:
    rng = random.Random(1)
    words = _PHRASE.split()
    texts = [" ".join(rng.choice(words) for _ in range(rng.randint(1, 40))) for _ in range(400)]
    return [*texts, " ".join(rng.choice(words) for _ in range(3000))]  # a 20 KB prompt


def _patterns() -> list[tuple[str, str]]:
    return [(e.pattern, e.replace) for name in preset_names() for e in load_preset(name).normalize]


def _compiled(compile_one: Callable[[str], Any]) -> list[tuple[Any, str]]:
    kept = []
    for pattern, replace in _patterns():
        try:
            compiled = compile_one(pattern)
        except Exception:  # an engine refusing a preset is the finding: counted, not run
            compiled = None
        if compiled is not None:
            kept.append((compiled, replace))
    return kept


def _per_application(
    contenders: dict[str, tuple[list[tuple[Any, str]], Callable[..., None]]], texts: list[str]
) -> dict[str, float]:
    """Microseconds per (pattern, text), best of ROUNDS, the contenders taking turns in
    each round so that a neighbour's load falls on all of them alike."""
    best = dict.fromkeys(contenders, float("inf"))
    for _ in range(ROUNDS):
        for name, (rules, apply) in contenders.items():
            started = time.perf_counter()
            apply(rules, texts)
            best[name] = min(best[name], time.perf_counter() - started)
    return {
        name: best[name] / (len(rules) * len(texts)) * 1e6
        for name, (rules, _) in contenders.items()
    }


def _each(rules: list[tuple[Any, str]], texts: list[str], **options: Any) -> None:
    for pattern, replace in rules:
        for text in texts:
            pattern.sub(replace, text, **options)


def _budgeted(rules: list[tuple[Any, str]], texts: list[str]) -> None:
    """flowproof's way: one budget per rule over all the strings of a request."""
    for pattern, replace in rules:
        within_budget(
            lambda p=pattern, r=replace: [p.sub(r, text) for text in texts],
            kind="p",
            pattern="p",
            declared="d",
            subject="s",
        )


def _ends(run: Callable[[], object]) -> str:
    started = time.perf_counter()
    try:
        run()
    except (PatternBudgetExceeded, TimeoutError) as exc:
        return f"stopped after {time.perf_counter() - started:.2f} s ({type(exc).__name__})"
    return f"finished in {(time.perf_counter() - started) * 1000:.2f} ms"


def _class_differences() -> list[str]:
    """Code points where `regex` (version 0, its `re`-compatible mode) and `re` disagree."""
    assert regex is not None
    rows = []
    for pattern in (r"\s", r"\w", r"\d", r"\b", r"(?i)[a-z]", r"(?i)k", r"(?i)s"):
        ours, theirs = re.compile(pattern), regex.compile(pattern)
        differ = [
            f"U+{point:04X}"
            for point in range(sys.maxunicode + 1)
            if not 0xD800 <= point <= 0xDFFF
            and bool(ours.search(chr(point))) != bool(theirs.search(chr(point)))
        ]
        shown = ", ".join(differ[:6]) + (", ..." if len(differ) > 6 else "")
        rows.append(f"    {pattern:12} {len(differ):5} code point(s) differ  {shown}")
    return rows


def main() -> int:
    texts = _texts()
    held = "a" * 41 + "-"
    print(f"python {sys.version.split()[0]}; {len(_patterns())} preset normalize patterns")
    print(f"  x {len(texts)} request strings ({sum(map(len, texts))} characters)\n")
    contenders = {
        "re": (_compiled(re.compile), _each),
        "re + flowproof's CPU budget per rule": (_compiled(re.compile), _budgeted),
    }
    if regex is not None:
        contenders[f"regex {regex.__version__}"] = (_compiled(regex.compile), _each)
        contenders["regex, timeout=1.0 per call"] = (
            _compiled(regex.compile),
            lambda r, t: _each(r, t, timeout=1.0),
        )
    if re2 is not None:
        contenders["google-re2"] = (_compiled(re2.compile), _each)
    costs = _per_application(contenders, texts)
    for name, (rules, _) in contenders.items():
        print(f"{name:40} compiles {len(rules):2}   {costs[name]:5.2f} us/application")
    print("\n(a+)+$ against 41 a's and a '-':")
    pathological = [(re.compile("(a+)+$"), "")]
    print(f"  re + flowproof's budget: {_ends(lambda: _budgeted(pathological, [held]))}")
    if regex is not None:
        for run in (41, 1000):
            text = "a" * run + "-"
            ended = _ends(lambda t=text: regex.search("(a+)+$", t, timeout=1.0))
            print(f"  regex, timeout=1.0, {run} a's: {ended}")
    if re2 is not None:
        print(f"  google-re2: {_ends(lambda: re2.search('(a+)+$', held))}")
    if regex is not None:
        print("\ncode points where regex's classes differ from re's:")
        print("\n".join(_class_differences()))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
