"""Per replayed turn: the bare stub, flowproof embedded, stock mitmdump, aimock.

One client process per (size, streamed, server, round); servers stay up for a whole size
and are visited in ABBA order. flowproof replays each recorded turn once, so its trace
holds the turn as many times as it will be asked, written out in full as a recording is
(about 50 MB for a full run); the embedded server repeats a one-turn trace in memory.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path

from benchmarks import harness, payloads
from benchmarks.harness import Row, Server, Settings

SIZES = (("2 KB", 2_000), ("50 KB", 50_000), ("500 KB", 500_000))
WARMUP = 3
NAMES = ("stub", "embedded", "mitmdump", "aimock")
LABELS = {
    "stub": "bare asyncio stub (floor)",
    "embedded": "flowproof replay, embedded ProxyEngine",
    "mitmdump": "flowproof replay, mitmdump -s addons/model.py",
    "aimock": "aimock",
}


def calls_for(settings: Settings, size: int) -> int:
    """Fewer calls as requests grow: 1, 1/4, 1/20 of FLOWPROOF_BENCH_CALLS (at least 5)."""
    share = {2_000: 1, 50_000: 4, 500_000: 20}[size]
    return max(5, settings.calls // share)


def _variants(settings: Settings) -> list[str]:
    """`SIZE:json|sse:CALLS` for every size, plain and streamed."""
    return [
        f"{size}:{kind}:{calls_for(settings, size)}"
        for _, size in SIZES
        for kind in ("json", "sse")
    ]


def _servers(stack: ExitStack, folder: Path, settings: Settings) -> dict[str, Server]:
    """All four servers, each its own process, ready for every variant."""
    # Every request each size gets in the whole run (warm-up included), with a margin.
    asked = {
        size: 2 * settings.rounds * (calls_for(settings, size) + WARMUP) + 10 for _, size in SIZES
    }
    responses = payloads.stub_responses(folder / "stub.json", [payloads.completion()])
    one = payloads.repeated_trace(folder / "one.trace.yaml", dict.fromkeys(asked, 1))
    many = payloads.repeated_trace(folder / "many.trace.yaml", asked)
    fixture = payloads.aimock_fixture(folder / "aimock.json")
    bench = harness.BENCH / "servers"
    mitm_port, aimock_port = harness.free_port(), harness.free_port()
    mitmdump = [harness.MITMDUMP, "-q", "-s", str(harness.REPO / "addons" / "model.py")]
    mitmdump += ["--mode", f"reverse:http://127.0.0.1:9@127.0.0.1:{mitm_port}"]
    mitmdump += ["--set", "connection_strategy=lazy", "--set", f"flowproof_trace={many}"]
    mitmdump += ["--set", f"confdir={folder / 'mitm'}"]
    aimock = ["node", str(harness.AIMOCK_CLI), "-p", str(aimock_port), "-f", str(fixture)]
    aimock += ["--log-level", "silent", "-c", "24"]  # 24: flowproof's delta size
    embedded = [harness.PYTHON, str(bench / "embedded.py"), "replay", str(one)]
    embedded += ["--repeat", str(max(asked.values()))]
    stub = [harness.PYTHON, str(bench / "stub.py"), str(responses)]
    return {
        "stub": stack.enter_context(Server("stub", stub)),
        "embedded": stack.enter_context(Server("embedded", embedded)),
        "mitmdump": stack.enter_context(Server("mitmdump", mitmdump, port=mitm_port)),
        "aimock": stack.enter_context(Server("aimock", aimock, port=aimock_port)),
    }


def _measure(settings: Settings, folder: Path) -> dict[tuple[str, str], list[float]]:
    """(variant, server) -> one median per round; one client process per server and round."""
    variants = _variants(settings)
    results: dict[tuple[str, str], list[float]] = {}
    with ExitStack() as stack:
        servers = _servers(stack, folder, settings)
        for name in harness.abba(NAMES, settings.rounds):
            argv = [harness.PYTHON, str(harness.BENCH / "clients" / "turns.py")]
            argv += [servers[name].base_url, "--warmup", str(WARMUP)]
            argv += [arg for variant in variants for arg in ("--variant", variant)]
            for variant, median in harness.run_json(argv).items():
                results.setdefault((variant, name), []).append(float(median))
    return results


def _target(size: int, name: str, value: float, floor: float, aimock: float) -> tuple[str, str]:
    if size == 2_000 and name == "embedded":
        ok = value < aimock and value - floor <= 0.0008
        return "< aimock and <= stub + 0.8 ms", harness.verdict(ok)
    if size == 50_000 and name in ("embedded", "mitmdump"):
        return "<= 1.05x stub", harness.verdict(value / floor <= 1.05)
    return "", ""


def _rows(settings: Settings, results: dict[tuple[str, str], list[float]]) -> Iterator[Row]:
    labels = dict((size, label) for label, size in SIZES)
    for variant in _variants(settings):
        size, kind = int(variant.split(":")[0]), variant.split(":")[1]
        values = {name: harness.median(results[(variant, name)]) for name in NAMES}
        floor, aimock = values["stub"], values["aimock"]
        for name in NAMES:
            value = values[name]
            target, verdict = _target(size, name, value, floor, aimock)
            extra = f" ({(value - floor) * 1000:+.2f} ms)" if name != "stub" else ""
            yield Row(
                "per-turn",
                f"{labels[size]} {'streamed' if kind == 'sse' else 'JSON'}: {LABELS[name]}",
                harness.ms(value),
                f"{value / floor:.2f}x{extra}",
                target,
                verdict,
            )


def run(settings: Settings) -> list[Row]:
    calls = ", ".join(f"{label} x{calls_for(settings, size)}" for label, size in SIZES)
    harness.log(f"per-turn: {calls} calls per client, {settings.rounds} rounds")
    with tempfile.TemporaryDirectory(prefix="flowproof-bench-") as temp:
        return list(_rows(settings, _measure(settings, Path(temp))))
