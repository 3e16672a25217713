"""The bound of each MCP call at record: its wording, and the watchdog that enforces it."""

from __future__ import annotations

import threading
import time

from flowproof_cli.mcp.call_bound import CallBound, Deadlines, call_text

WAIT_S = 10.0  # a generous upper bound to catch a hang, never a timing assert


def test_a_call_is_named_by_method_tool_and_json_rpc_id() -> None:
    assert call_text("tools/call read_file", 3) == "tools/call read_file (JSON-RPC id 3)"
    assert call_text("initialize", "a-1") == 'initialize (JSON-RPC id "a-1")'
    assert call_text("ping", "x" * 200).endswith("xxx...)")


def test_the_bound_says_where_it_comes_from() -> None:
    assert CallBound(5, from_spec=True).not_answered("ping (JSON-RPC id 1)") == (
        "did not answer ping (JSON-RPC id 1) within 5 s (its `call_timeout`)"
    )
    default = CallBound(120).not_answered("ping (JSON-RPC id 1)")
    assert default.startswith("did not answer ping (JSON-RPC id 1) within 120 s (the upstream")
    assert "`call_timeout`" in default and "--upstream-timeout" in default
    assert CallBound(2.5).unanswered_at_end("files", "ping (JSON-RPC id 1)") == (
        "the MCP server 'files' had not answered ping (JSON-RPC id 1) when the agent stopped "
        "waiting (the call's bound: 2.5 s)"
    )


def _watch(seconds: float) -> tuple[Deadlines, list[str], threading.Event]:
    expired: list[str] = []
    fired = threading.Event()

    def on_expired(call: str) -> None:
        expired.append(call)
        fired.set()

    return Deadlines(CallBound(seconds), on_expired), expired, fired


def test_the_first_call_past_its_bound_fires_once() -> None:
    deadlines, expired, fired = _watch(0.05)
    deadlines.start("a", "call a")
    deadlines.start("b", "call b")
    assert fired.wait(WAIT_S), "the bound never fired: a hang"
    time.sleep(0.2)
    deadlines.stop()
    assert expired == ["call a"]


def test_an_answered_call_never_fires() -> None:
    deadlines, expired, fired = _watch(1.0)
    deadlines.start("a", "call a")
    deadlines.end("a")
    assert not fired.wait(1.5)
    deadlines.stop()
    assert expired == []


def test_progress_starts_the_wait_over() -> None:
    deadlines, expired, fired = _watch(1.0)
    deadlines.start("a", "call a")
    for _ in range(15):  # 1.5 s in all, beyond the bound, with progress every 0.1 s
        time.sleep(0.1)
        deadlines.extend("a")
    assert expired == [], "progress did not start the wait over"
    assert fired.wait(WAIT_S), "once progress stops the bound fires"
    deadlines.stop()


def test_a_stopped_watch_fires_nothing() -> None:
    deadlines, expired, fired = _watch(0.5)
    deadlines.start("a", "call a")
    deadlines.stop()
    assert not fired.wait(1.0)
    assert expired == []
