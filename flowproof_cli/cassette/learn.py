"""Match rules learned from two recordings of the same flow (`flowproof match learn`).

The two runs differ only in what a replay elsewhere differs in: the working directory, HOME
and the date. Their requests are compared request by request and field by field (the
divergence diff, over canonical-request paths), and each difference becomes the narrowest
rule that removes it:

* the runs' own working directory and HOME: `relocate: true`;
* a span with a known shape (a date form, a UUID, a time, an id with a prefix, a number or
  token after unchanged text): a `normalize` entry, its pattern from match/shapes.py, `at:`
  the field's path (list positions that vary across requests become `*`);
* a field that differs otherwise (a number, a type, a text no shape covers, a key only one
  run sent): an `ignore` path;
* a value the model minted and the agent sent back (a tool call's id, the model's own text):
  no rule, since a replay serves the recorded answers and the agent echoes the same values.

Then the rules are checked: applied to both runs' requests exactly as a replay applies them
(match/rules.py), the requests must be equal but for values the model minted. A difference
no rule can express (a request only one run made, an item added to a list, another
protocol) stays a difference, and the learning says so.

Pure over recorded turns and the two runs' places: no processes, no files.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from flowproof_cli.cassette.diff import FieldChange, changes, show
from flowproof_cli.cassette.turn import Turn
from flowproof_cli.match.build import Declared, build_rules
from flowproof_cli.match.presets import NormalizeEntry
from flowproof_cli.match.relocate import Relocation
from flowproof_cli.match.shapes import Found, shape_of, token_around
from flowproof_cli.quoting import common_prefix

SHOWN = 60  # characters of a value a learned rule's comment quotes
_KEPT = 3  # value pairs kept per rule (the rest counted)
_MODEL_TOKEN = 4  # shortest token taken as the model's own when its answers hold it
_TOKENS = re.compile(r"\w+|\s+|[^\w\s]")
_LINES = re.compile(r"[^\n]*\n|[^\n]+")
_TOKEN_PAIRS = 250_000  # tokens of one side times the other's, aligned token by token at most
_WORD = re.compile(r"\w")


@dataclass(frozen=True)
class Place:
    """Where one run ran: its working directory and HOME."""

    cwd: str
    home: str

    def relocation(self) -> Relocation:
        return Relocation(self.cwd, self.home)


@dataclass
class Seen:
    """The values a rule saw, a pair (first run, second run) each, and in which requests."""

    pairs: list[tuple[Any, Any]] = field(default_factory=list)
    more: int = 0
    requests: set[int] = field(default_factory=set)

    def add(self, request: int, first: Any, second: Any) -> None:
        self.requests.add(request)
        if (first, second) in self.pairs:
            return
        if len(self.pairs) < _KEPT:
            self.pairs.append((first, second))
        else:
            self.more += 1

    def to_json(self) -> dict[str, Any]:
        return {
            "seen": [list(pair) for pair in self.pairs],
            "more": self.more,
            "requests": sorted(self.requests),
        }


@dataclass
class LearnedNormalize:
    kind: str
    pattern: str
    replace: str
    at: str
    seen: Seen

    def to_json(self) -> dict[str, Any]:
        rule = {"pattern": self.pattern, "replace": self.replace, "at": self.at}
        return {"rule": "normalize", "kind": self.kind, **rule, **self.seen.to_json()}


@dataclass
class LearnedIgnore:
    path: str
    seen: Seen

    def to_json(self) -> dict[str, Any]:
        return {"rule": "ignore", "path": self.path, **self.seen.to_json()}


@dataclass(frozen=True)
class Difference:
    """A difference between the runs: one no rule removes, or one the model made."""

    request: int  # 1-based
    reason: str
    change: FieldChange | None = None

    def to_json(self) -> dict[str, Any]:
        change = self.change.to_json() if self.change is not None else None
        return {"request": self.request, "reason": self.reason, "change": change}


@dataclass
class Learned:
    """The rules two runs need, what they saw, and whether they make the runs equal."""

    requests: tuple[int, int]  # model requests each run made
    relocate: Seen | None = None
    normalize: list[LearnedNormalize] = field(default_factory=list)
    ignore: list[LearnedIgnore] = field(default_factory=list)
    from_model: list[Difference] = field(default_factory=list)
    remaining: list[Difference] = field(default_factory=list)  # after the rules: unequal

    @property
    def verified(self) -> bool:
        return not self.remaining

    @property
    def needs_rules(self) -> bool:
        return bool(self.relocate or self.normalize or self.ignore)

    def block(self) -> Declared:
        """The rules as a `match:` block (its relocation on only when it is needed)."""
        return Declared(
            origin="learned",
            ignore=tuple(rule.path for rule in self.ignore),
            normalize=tuple(
                NormalizeEntry(rule.pattern, rule.replace, rule.at) for rule in self.normalize
            ),
            relocate=True if self.relocate else None,
        )

    def match_json(self) -> dict[str, Any]:
        """The rules as the spec's `match:` holds them."""
        block: dict[str, Any] = {"relocate": True} if self.relocate else {}
        if self.normalize:
            block["normalize"] = [
                {"pattern": rule.pattern, "replace": rule.replace, "at": rule.at}
                for rule in self.normalize
            ]
        if self.ignore:
            block["ignore"] = [rule.path for rule in self.ignore]
        return block


# -- spans of two strings --------------------------------------------------------------------


def _word_start(text: str, at: int) -> int:
    while at > 0 and _WORD.match(text, at - 1):
        at -= 1
    return at


def _word_end(text: str, at: int) -> int:
    while at < len(text) and _WORD.match(text, at):
        at += 1
    return at


Span = tuple[int, int, int, int]  # first[a0:a1] differs from second[b0:b1]


def _aligned(first: str, second: str, pieces: re.Pattern[str], region: Span) -> list[Span]:
    """The region's pieces (tokens, or lines) aligned: each run of them that differs, as a
    span (a point on the side that has none of them)."""
    a_low, a_high, b_low, b_high = region
    in_first = [m.span() for m in pieces.finditer(first, a_low, a_high)]
    in_second = [m.span() for m in pieces.finditer(second, b_low, b_high)]
    matcher = difflib.SequenceMatcher(
        None,
        [first[slice(*span)] for span in in_first],
        [second[slice(*span)] for span in in_second],
        autojunk=False,
    )

    def bounds(spans: list[tuple[int, int]], low: int, high: int, end: int) -> tuple[int, int]:
        if low == high:  # nothing on this side: the point where the other side's pieces go
            at = spans[low][0] if low < len(spans) else end
            return at, at
        return spans[low][0], spans[high - 1][1]

    return [
        (*bounds(in_first, i1, i2, a_high), *bounds(in_second, j1, j2, b_high))
        for tag, i1, i2, j1, j2 in matcher.get_opcodes()
        if tag != "equal"
    ]


def _small(first: str, second: str, region: Span) -> bool:
    a_low, a_high, b_low, b_high = region
    pairs = len(_TOKENS.findall(first, a_low, a_high)) * len(_TOKENS.findall(second, b_low, b_high))
    return pairs <= _TOKEN_PAIRS


def _spans_in(first: str, second: str, region: Span) -> list[Span]:
    """Token spans of a region small enough to align token by token; a larger one is
    aligned line by line first, and a part of it still too large is one span (aligning two
    unrelated texts token by token takes time quadratic in their length)."""
    if _small(first, second, region):
        return _aligned(first, second, _TOKENS, region)
    a_low, a_high, b_low, b_high = region
    if "\n" not in first[a_low:a_high] and "\n" not in second[b_low:b_high]:
        return [region]
    spans: list[Span] = []
    for part in _aligned(first, second, _LINES, region):
        if _small(first, second, part):
            spans += _aligned(first, second, _TOKENS, part)
        else:
            spans.append(part)
    return spans


def differing_spans(first: str, second: str) -> list[Span]:
    """Where two strings differ, as (a0, a1, b0, b1) character spans aligned on words: the
    unchanged start and end are skipped, the middle compared token by token (a word, a run
    of spaces, one other character), so a date or an id changes as one span or a few."""
    prefix = common_prefix(first, second)
    room = min(len(first), len(second)) - prefix
    suffix = min(common_prefix(first[::-1], second[::-1]), room)
    start = _word_start(first, prefix)
    end_first = _word_end(first, len(first) - suffix)
    end_second = _word_end(second, len(second) - suffix)
    return _spans_in(first, second, (start, end_first, start, end_second))


# -- one request pair --------------------------------------------------------------------------


@dataclass
class _Answers:
    """The strings of a run's model answers so far (relocated as its requests are)."""

    leaves: list[str] = field(default_factory=list)

    def holds(self, text: str) -> bool:
        return len(text) >= _MODEL_TOKEN and any(text in leaf for leaf in self.leaves)


def _strings(value: Any) -> Iterable[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


@dataclass
class _Findings:
    """What one request pair needs, before the requests are put together."""

    relocated: bool = False
    shapes: list[tuple[str, Found, str, str]] = field(default_factory=list)  # path, found, a, b
    ignored: list[FieldChange] = field(default_factory=list)
    from_model: list[FieldChange] = field(default_factory=list)
    structural: list[FieldChange] = field(default_factory=list)


def _string_rules(
    first: str, second: str, answers: tuple[_Answers, _Answers]
) -> tuple[list[Found], bool] | None:
    """The shapes that make two strings equal, and whether the model made what remains;
    None when some span has no shape and is not the model's."""
    found: dict[tuple[str, tuple[int, int], tuple[int, int]], Found] = {}
    model = False
    for span in differing_spans(first, second):
        a0, a1, b0, b1 = span
        if answers[0].holds(token_around(first, a0, a1)) and answers[1].holds(
            token_around(second, b0, b1)
        ):
            model = True
            continue
        if any(known.covers(span) for known in found.values()):
            continue  # a later part of a value already shaped (the day of a date)
        shaped = shape_of(first, span, second)
        if shaped is None:
            return None
        found.setdefault((shaped.shape.pattern, shaped.first, shaped.second), shaped)
    shapes = list(found.values())
    # Checked as a replay applies them: every span left must be one the model made.
    for shaped in shapes:
        first = shaped.shape.compiled.sub(shaped.shape.replace, first)
        second = shaped.shape.compiled.sub(shaped.shape.replace, second)
    for a0, a1, b0, b1 in differing_spans(first, second):
        if not (
            answers[0].holds(token_around(first, a0, a1))
            and answers[1].holds(token_around(second, b0, b1))
        ):
            return None
        model = True
    return shapes, model


def _is_index(segment: str) -> bool:
    return segment.isdigit()


def compare_pair(
    first: dict[str, Any],
    second: dict[str, Any],
    places: tuple[Place, Place] | None = None,
    answers: tuple[_Answers, _Answers] | None = None,
) -> _Findings:
    """What two requests of the same position need to be equal (see the module docstring)."""
    answers = answers or (_Answers(), _Answers())
    findings = _Findings()
    if places is not None:
        first, moved_first = places[0].relocation().to_placeholders(first)
        second, moved_second = places[1].relocation().to_placeholders(second)
        findings.relocated = bool(moved_first or moved_second)
    for change in changes(first, second):
        last = change.path.rsplit(".", 1)[-1]
        if change.kind != "changed":
            if _is_index(last):  # an item added to a list: no narrow rule removes it
                findings.structural.append(change)
            else:
                findings.ignored.append(change)
            continue
        a, b = change.recorded, change.replayed
        if isinstance(a, str) and isinstance(b, str):
            if answers[0].holds(a) and answers[1].holds(b):
                findings.from_model.append(change)
                continue
            ruled = _string_rules(a, b, answers)
            if ruled is not None:
                shapes, model = ruled
                findings.shapes.extend((change.path, found, a, b) for found in shapes)
                if model and not shapes:
                    findings.from_model.append(change)
                continue
        findings.ignored.append(change)
    return findings


# -- all requests -----------------------------------------------------------------------------


def _glob(paths: Iterable[str]) -> list[str]:
    """Paths that differ only in list positions, each put together with `*` there."""
    groups: dict[tuple[str, ...], list[list[str]]] = {}
    for path in sorted(set(paths)):
        segments = path.split(".")
        key = tuple("#" if _is_index(segment) else segment for segment in segments)
        groups.setdefault(key, []).append(segments)
    globs = []
    for members in groups.values():
        merged = [
            column[0] if len(set(column)) == 1 else "*" for column in zip(*members, strict=True)
        ]
        globs.append(".".join(merged))
    return sorted(globs)


def _covered(path: str, globs: Sequence[str]) -> bool:
    segments = path.split(".")
    for glob in globs:
        parts = glob.split(".")
        if len(parts) <= len(segments) and all(
            part in ("*", segment) for part, segment in zip(parts, segments, strict=False)
        ):
            return True
    return False


def _leaf(value: Any) -> Any:
    return value if isinstance(value, str | int | float | bool) or value is None else show(value)


def _gather(per_request: list[_Findings], learned: Learned) -> None:
    ignore_paths = _glob(change.path for findings in per_request for change in findings.ignored)
    ignores = {glob: LearnedIgnore(glob, Seen()) for glob in ignore_paths}
    normalize: dict[tuple[str, str], tuple[str, str, dict[str, Seen]]] = {}
    for number, findings in enumerate(per_request, start=1):
        if findings.relocated:
            learned.relocate = learned.relocate or Seen()
            learned.relocate.requests.add(number)
        for change in findings.ignored:
            glob = next(g for g in ignore_paths if _covered(change.path, [g]))
            ignores[glob].seen.add(number, _leaf(change.recorded), _leaf(change.replayed))
        for path, found, a, b in findings.shapes:
            if _covered(path, ignore_paths):
                continue
            shape = found.shape
            kind, replace, by_path = normalize.setdefault(
                (shape.pattern, shape.replace), (shape.kind, shape.replace, {})
            )
            by_path.setdefault(path, Seen()).add(number, *found.values(a, b))
        for change in findings.from_model:
            learned.from_model.append(Difference(number, "made by the model", change))
    for (pattern, _), (kind, replace, by_path) in normalize.items():
        for glob in _glob(by_path):
            seen = Seen()
            for path, one in by_path.items():
                if _covered(path, [glob]):
                    seen.requests |= one.requests
                    for pair in one.pairs:
                        seen.add(min(one.requests), *pair)
                    seen.more += one.more
            learned.normalize.append(LearnedNormalize(kind, pattern, replace, glob, seen))
    learned.ignore = list(ignores.values())


def _answers_before(turns: Sequence[Turn], place: Place | None) -> list[_Answers]:
    """For each request, the strings of the run's model answers before it."""
    relocation = place.relocation() if place is not None else None
    found: list[_Answers] = []
    leaves: list[str] = []
    for turn in turns:
        found.append(_Answers(list(leaves)))
        response = turn.response
        if relocation is not None:
            response = relocation.to_placeholders(response)[0]
        leaves.extend(_strings(response))
    return found


def learn_rules(
    first: Sequence[Turn], second: Sequence[Turn], places: tuple[Place, Place] | None = None
) -> Learned:
    """The rules that make the second run's requests equal to the first's, checked."""
    learned = Learned((len(first), len(second)))
    answers = _all_answers(first, second, places)
    per_request: list[_Findings] = []
    for number, (one, two) in enumerate(zip(first, second, strict=False), start=1):
        if one.protocol != two.protocol:
            per_request.append(_Findings())
            continue
        pair = (answers[0][number - 1], answers[1][number - 1])
        per_request.append(compare_pair(one.request, two.request, places, pair))
    _gather(per_request, learned)
    learned.remaining = verify(learned, first, second, places) + _unequal_counts(first, second)
    return learned


def _all_answers(
    first: Sequence[Turn], second: Sequence[Turn], places: tuple[Place, Place] | None
) -> tuple[list[_Answers], list[_Answers]]:
    return (
        _answers_before(first, places[0] if places else None),
        _answers_before(second, places[1] if places else None),
    )


def _unequal_counts(first: Sequence[Turn], second: Sequence[Turn]) -> list[Difference]:
    longer, run = (first, 1) if len(first) > len(second) else (second, 2)
    return [
        Difference(number, f"only run {run} made this model request")
        for number in range(min(len(first), len(second)) + 1, len(longer) + 1)
    ]


def verify(
    learned: Learned,
    first: Sequence[Turn],
    second: Sequence[Turn],
    places: tuple[Place, Place] | None = None,
) -> list[Difference]:
    """The differences left once the learned rules are applied to both runs' requests as a
    replay applies them (each run relocated with its own paths), but for the model's own."""
    block = learned.block()
    matched: list[list[dict[str, Any]]] = []
    for turns, place in zip((first, second), places or (None, None), strict=True):
        cwd = Path(place.cwd) if place is not None else Path.cwd()
        rules, _ = build_rules([block], cwd=cwd, home=place.home if place else None)
        matched.append([rules.matched(turn.protocol, turn.request, count=False) for turn in turns])
    answers = _all_answers(first, second, places)
    left: list[Difference] = []
    for number, (one, two) in enumerate(zip(first, second, strict=False), start=1):
        if one.protocol != two.protocol:
            reason = f"run 1 sent it as {one.protocol}, run 2 as {two.protocol}"
            left.append(Difference(number, reason))
            continue
        pair = (answers[0][number - 1], answers[1][number - 1])
        for change in changes(matched[0][number - 1], matched[1][number - 1]):
            if not _made_by_model(change, pair):
                left.append(Difference(number, "differs with the rules applied", change))
    return left


def _made_by_model(change: FieldChange, answers: tuple[_Answers, _Answers]) -> bool:
    a, b = change.recorded, change.replayed
    if change.kind != "changed" or not (isinstance(a, str) and isinstance(b, str)):
        return False
    if answers[0].holds(a) and answers[1].holds(b):
        return True
    spans = differing_spans(a, b)
    return bool(spans) and all(
        answers[0].holds(token_around(a, a0, a1)) and answers[1].holds(token_around(b, b0, b1))
        for a0, a1, b0, b1 in spans
    )
