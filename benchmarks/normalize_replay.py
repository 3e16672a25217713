"""A normalize-heavy replay, in process: what declared patterns cost on the replay hot path.

    .venv/bin/python benchmarks/normalize_replay.py [--turns N] [--rounds N]

A replay session with every preset (23 normalize patterns, 8 ignore paths) and three
patterns of the spec's own replays a coding-agent-shaped conversation: a 20 KB system
prompt, and each turn adds a user message, an assistant tool call and a 2 KB tool output.
The figure is the median over rounds of the CPU time of the whole replay (rules applied to
the recorded turns when the session opens, then every live request matched and answered),
per turn and per pattern application (one rule over one request). It asserts nothing
(docs/performance.md); docs/matching.md keeps the figures before and after the pattern
budget.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from flowproof_cli.cassette import CassetteSession, Mode, Turn
from flowproof_cli.dialects import dialect_named
from flowproof_cli.match.build import Declared, build_rules
from flowproof_cli.match.presets import NormalizeEntry, preset_names

PATH = "/v1/chat/completions"
_PHRASE = (
    "the agent reads the file and runs the tests then edits src/app.py line 42 "
    "Today's date is 2026-12-01 session_id Chunk ID: 3fa1 Wall time: 0.2 seconds"
)
_WORDS = tuple(_PHRASE.split())
_OWN = (  # a spec's own patterns, the shapes docs/matching.md suggests
    NormalizeEntry(r"req_[0-9a-f]{8}", "req_<id>"),
    NormalizeEntry(r"\b\d+ ms\b", "<n> ms", "messages"),
    NormalizeEntry(r"(?m)^build \d+$", "build <n>", "messages"),
)


def _text(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(_WORDS) for _ in range(words))


def _requests(turns: int) -> list[dict[str, Any]]:
    """The live request of each turn: the whole conversation so far, as an agent sends it."""
    rng = random.Random(7)
    messages: list[dict[str, Any]] = [{"role": "system", "content": _text(rng, 3000)}]
    requests = []
    for turn in range(turns):
        messages.append({"role": "user", "content": _text(rng, 40)})
        requests.append({"model": "gpt-4o-mini", "messages": [dict(m) for m in messages]})
        call = {"id": f"call_{turn}", "type": "function"}
        call["function"] = {"name": "bash", "arguments": json.dumps({"cmd": _text(rng, 8)})}
        messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
        messages.append(
            {"role": "tool", "tool_call_id": f"call_{turn}", "content": _text(rng, 300)}
        )
    return requests


def _answer(turn: int) -> dict[str, Any]:
    message = {"role": "assistant", "content": f"done {turn}"}
    return {"id": f"r{turn}", "object": "chat.completion", "model": "gpt-4o-mini",
            "choices": [{"index": 0, "finish_reason": "stop", "message": message}]}  # fmt: skip


def _replay_once(requests: list[dict[str, Any]], home: Path) -> float:
    block = Declared("spec", presets=tuple(preset_names()), normalize=_OWN, relocate=False)
    rules, _ = build_rules([block], cwd=home, home=str(home))
    dialect = dialect_named("openai-chat")
    recorded = [
        Turn(
            dialect.name, dialect.canonical_request(dialect.normalize(PATH, body)), 200, _answer(i)
        )
        for i, body in enumerate(requests)
    ]
    bodies = [json.dumps(body).encode() for body in requests]
    started = time.process_time()  # CPU time: a neighbour's load counts less than in wall time
    session = CassetteSession(Mode.REPLAY, recorded=recorded, rules=rules)
    for body in bodies:
        answer = session.on_request(PATH, body, dialect)
        assert getattr(answer, "status", None) == 200, answer
    elapsed = time.process_time() - started
    assert not session.errors and session.divergence is None
    return elapsed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--turns", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=15)
    args = parser.parse_args()
    requests = _requests(args.turns)
    home = Path("/nonexistent-home")
    _replay_once(requests, home)  # warm up: imports, preset files, compiled patterns
    times = [_replay_once(requests, home) for _ in range(args.rounds)]
    median = statistics.median(times)
    rules = 23 + 3  # every preset's normalize patterns and the spec's own
    applications = 2 * args.turns * rules  # recorded side and live side
    size = sum(len(json.dumps(body)) for body in requests)
    print(
        f"normalize-heavy replay: {args.turns} turns ({size / 1e6:.1f} MB of requests), "
        f"{rules} patterns, median of {args.rounds}: {median * 1000:.1f} ms of CPU "
        f"({median / args.turns * 1000:.2f} ms/turn, "
        f"{median / applications * 1e6:.1f} us per pattern application)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
