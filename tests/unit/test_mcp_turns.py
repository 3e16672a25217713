"""MCP calls per conversation turn (mcp/turns.py, runner/mcp_servers.py): each call placed in
the turn it arrived in, stored in its lane, and at replay a call made in another turn than
recorded, an extra one or a missing one named by its turn."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from flowproof_cli.cassette.conversation import OpenTurn
from flowproof_cli.errors import TraceError
from flowproof_cli.mcp.capture import CaptureFile, read_entries
from flowproof_cli.mcp.http_replay import HttpReplaySession
from flowproof_cli.mcp.lane import Call, Lane, lane_from_document, lane_to_document
from flowproof_cli.mcp.replayer import Replayer
from flowproof_cli.mcp.turns import Turns, misplaced_call, turn_at
from flowproof_cli.mode import Mode
from flowproof_cli.runner.judge import _by_turn
from flowproof_cli.runner.mcp_servers import HttpServer, McpServers, McpVerdict, StdioServer
from flowproof_cli.spec.tools import McpServerSpec
from flowproof_cli.verdict import Failure

OPENED = {1: 10.0, 2: 20.0}
FIRST, SECOND = "My order 4711 has not arrived.", "Then cancel it, please."


def conversation() -> OpenTurn:
    turn = OpenTurn(number=2, message=SECOND, messages={1: FIRST, 2: SECOND})
    turn.opened_at.update(OPENED)
    return turn


def request(number: int, method: str, params: dict | None = None) -> dict:
    message = {"jsonrpc": "2.0", "id": number, "method": method}
    return {**message, "params": params} if params is not None else message


def tool(name: str) -> dict:
    return {"name": name, "arguments": {"order_id": "4711"}}


def recorded(turns: list[int | None]) -> Lane:
    """initialize, tools/list, then tools/call lookup_order, cancel_order... with `turns`."""
    methods = [("initialize", None), ("tools/list", None)]
    methods += [("tools/call", tool(n)) for n in ("lookup_order", "cancel_order", "refund")]
    return Lane(
        [
            Call(method, params, {}, answered=True, conversation_turn=turn)
            for (method, params), turn in zip(methods, turns, strict=False)
        ]
    )


def messages(count: int) -> list[dict]:
    lane = recorded([None] * count)
    return [request(n + 1, call.method, call.params) for n, call in enumerate(lane.calls)]


# -- the mapping ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("at", "turn"),
    [(5.0, 0), (10.0, 1), (15.0, 1), (19.999, 1), (20.0, 2), (99.0, 2), (None, None)],
)
def test_a_call_belongs_to_the_last_turn_opened_before_it_arrived(
    at: float | None, turn: int | None
) -> None:
    assert turn_at(OPENED, at) == turn


def test_a_one_turn_flow_places_no_call() -> None:
    assert turn_at({}, 12.0) is None


def test_the_turns_open_on_the_clock_the_stand_in_stamps_with() -> None:
    """CLOCK_MONOTONIC is system-wide: the runner's turn and the stand-in's stamp compare."""
    before = time.monotonic()
    turn = OpenTurn()
    turn.open(1, FIRST)
    assert before <= turn.opened_at[1] <= time.monotonic()


def test_the_capture_stamps_what_the_agent_sent(tmp_path: Path) -> None:
    capture = CaptureFile(tmp_path / "c.jsonl", "x")
    before = time.monotonic()
    capture.append("start")
    capture.append("c", request(1, "tools/list"))
    capture.append("s", {"jsonrpc": "2.0", "id": 1, "result": {}})
    capture.close()
    start, sent, answer = read_entries(tmp_path / "c.jsonl")
    assert "t" not in start and "t" not in answer
    assert before <= sent["t"] <= time.monotonic()


# -- the lane ---------------------------------------------------------------------------


def test_the_lane_keeps_each_calls_turn() -> None:
    lane = recorded([0, 0, 1, 2])
    document = lane_to_document(lane)
    assert [c.get("conversation_turn") for c in document["calls"]] == [0, 0, 1, 2]
    assert lane_from_document(document, "lane") == lane


def test_a_one_turn_lane_is_written_as_before() -> None:
    document = lane_to_document(recorded([None, None]))
    assert document == {
        "calls": [{"method": "initialize", "result": {}}, {"method": "tools/list", "result": {}}]
    }


def test_a_malformed_turn_is_named_with_its_call() -> None:
    document = {"calls": [{"method": "tools/list", "conversation_turn": "two"}]}
    with pytest.raises(TraceError, match=r"lane: call 1 is malformed \(conversation_turn is not"):
        lane_from_document(document, "lane")


# -- record -----------------------------------------------------------------------------


def stdio_flow(tmp_path: Path, mode: str, lane: Lane | None = None) -> McpServers:
    spec = McpServerSpec(name="orders", command="python orders.py")
    lanes = {"orders": lane} if lane is not None else None
    flow = McpServers([spec], mode=mode, environ={}, cwd=tmp_path, lanes=lanes)
    flow.prepare()
    return flow


def captured(flow: McpServers, sent: list[tuple[dict, float]], answer: bool = True) -> None:
    (server,) = flow.servers
    assert isinstance(server, StdioServer)
    capture = CaptureFile(server.capture, "x")
    capture.append("start")
    for message, at in sent:
        capture.append("c", message, t=at)
        if answer:
            capture.append("s", {"jsonrpc": "2.0", "id": message["id"], "result": {}})
    capture.close()


def test_record_tags_each_call_with_the_turn_it_arrived_in(tmp_path: Path) -> None:
    flow = stdio_flow(tmp_path, "record")
    captured(flow, list(zip(messages(4), [1.0, 2.0, 12.0, 21.0], strict=True)))
    verdict = flow.verdict(conversation())
    flow.close()
    assert [c.conversation_turn for c in verdict.lanes["orders"].calls] == [0, 0, 1, 2]


def test_record_of_a_one_turn_flow_tags_nothing(tmp_path: Path) -> None:
    flow = stdio_flow(tmp_path, "record")
    captured(flow, list(zip(messages(3), [1.0, 2.0, 12.0], strict=True)))
    verdict = flow.verdict()
    flow.close()
    assert [c.conversation_turn for c in verdict.lanes["orders"].calls] == [None] * 3
    assert "conversation_turn" not in str(lane_to_document(verdict.lanes["orders"]))


# -- replay -----------------------------------------------------------------------------


def replayed(tmp_path: Path, lane: Lane, stamps: list[float]) -> McpVerdict:
    flow = stdio_flow(tmp_path, "replay", lane)
    captured(flow, list(zip(messages(len(stamps)), stamps, strict=True)), answer=False)
    verdict = flow.verdict(conversation())
    flow.close()
    return verdict


def test_replay_in_the_recorded_turns_passes(tmp_path: Path) -> None:
    verdict = replayed(tmp_path, recorded([0, 0, 1, 2]), [1.0, 2.0, 12.0, 21.0])
    assert verdict.hard == [] and verdict.soft == []


def test_a_call_made_in_a_later_turn_than_recorded_fails_naming_both_turns(
    tmp_path: Path,
) -> None:
    verdict = replayed(tmp_path, recorded([0, 0, 1, 2]), [1.0, 2.0, 21.0, 22.0])
    failure = (
        f'conversation turn 2 ("{SECOND}"): MCP server orders, call 3 (tools/call '
        f'lookup_order) was recorded in conversation turn 1 ("{FIRST}")'
    )
    assert verdict.hard == [failure]
    assert verdict.turns == {failure: 2}
    assert _by_turn(verdict.hard, verdict) == [Failure(failure, turn=2)]


def test_a_call_made_before_its_turn_fails_naming_the_turn_it_was_made_in(
    tmp_path: Path,
) -> None:
    verdict = replayed(tmp_path, recorded([0, 0, 1, 2]), [1.0, 2.0, 12.0, 13.0])
    assert verdict.hard == [
        f'conversation turn 1 ("{FIRST}"): MCP server orders, call 4 (tools/call '
        f'cancel_order) was recorded in conversation turn 2 ("{SECOND}")'
    ]


def test_an_extra_call_is_named_by_the_turn_it_was_made_in(tmp_path: Path) -> None:
    verdict = replayed(tmp_path, recorded([0, 0, 1]), [1.0, 2.0, 12.0, 21.0])
    assert verdict.hard == [
        f"conversation turn 2 (\"{SECOND}\"): the MCP server 'orders' diverged at call 4: "
        "an extra call (tools/call cancel_order); the recording has 3 call(s)"
    ]
    assert list(verdict.turns.values()) == [2]


def test_a_missing_call_is_named_by_the_turn_it_was_recorded_in(tmp_path: Path) -> None:
    verdict = replayed(tmp_path, recorded([0, 0, 1, 2]), [1.0, 2.0, 12.0])
    assert verdict.hard == []
    assert verdict.soft == [
        f"conversation turn 2 (\"{SECOND}\"): the MCP server 'orders' ran short: the agent "
        "made 3 of the 4 recorded call(s) (never made: call 4 (tools/call cancel_order))"
    ]


def test_a_lane_recorded_without_turns_replays_in_a_conversation(tmp_path: Path) -> None:
    verdict = replayed(tmp_path, recorded([None] * 4), [1.0, 2.0, 21.0, 22.0])
    assert verdict.hard == [] and verdict.soft == []


def test_the_first_misplaced_call_is_the_one_named() -> None:
    replayer = Replayer("orders", recorded([0, 0, 1, 1]))
    for message, at in zip(messages(4), [1.0, 2.0, 21.0, 22.0], strict=True):
        replayer.receive(message, at)
    turns = Turns(OPENED, {1: FIRST, 2: SECOND})
    found = misplaced_call("orders", replayer.lane, replayer.arrivals, turns)
    assert found is not None and found[0] == 2 and "call 3 (" in found[1]


def test_the_http_boundary_stamps_each_call_as_it_arrives(tmp_path: Path) -> None:
    """Streamable HTTP is answered in-process: the replayer stamps the call on arrival."""
    spec = McpServerSpec(name="orders", url="http://127.0.0.1:9/mcp")
    server = HttpServer(spec, Mode.REPLAY, recorded([1, 2]), environ={})
    assert isinstance(server.session, HttpReplaySession)
    turn = OpenTurn(messages={1: FIRST, 2: SECOND})
    turn.open(1, FIRST)
    turn.open(2, SECOND)  # both calls arrive in turn 2: initialize was recorded in turn 1
    for message in messages(2):
        server.session.replayer.receive(message)
    replayer = server.replayer()
    assert replayer is server.session.replayer
    turns = Turns(turn.opened_at, turn.messages)
    found = misplaced_call("orders", replayer.lane, replayer.arrivals, turns)
    assert found is not None and found[1].startswith(
        f'conversation turn 2 ("{SECOND}"): MCP server orders, call 1 (initialize) was '
        f'recorded in conversation turn 1 ("{FIRST}")'
    )
    server.close()
