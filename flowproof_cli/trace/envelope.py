"""The trace: a versioned, committed, reviewable record of one flow's boundary traffic.

Layout (YAML; docs/trace-format.md is the reference):

    flowproof_trace: 1          # format version
    flow: <spec name>
    mocks: {tool: result}       # the spec's tools: mocks, snapshotted
    mock_results: {tool: [...]} # the `results:` sequences, snapshotted; omitted when none
    match: [{ignore: path}, ...] # the match rules in force, snapshotted; omitted when none
    turns:                      # model turns in recorded order
      - protocol: <tag>         # omitted for openai-chat, the default
        request: {...}          # canonical request, keys sorted
        response: {status: 200, body: {...}}
    egress:                     # omitted unless a contained run refused something
      blocked: [{destination: 203.0.113.7:443, protocol: tcp, at_ms: 412}]
    mcp:                        # one lane per MCP server; omitted when there are none
      <server>: {calls: [...], server: [...]}   # see flowproof_cli/mcp/lane.py

Never headers, never keys: only bodies cross into this file.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from flowproof_cli.canonical import sorted_keys
from flowproof_cli.cassette.turn import Turn
from flowproof_cli.dialects.base import ResultSequence
from flowproof_cli.errors import TraceError
from flowproof_cli.mcp.lane import Lane, lane_from_document, lane_to_document
from flowproof_cli.routes import DEFAULT_PROTOCOL

FORMAT_VERSION = 1


@dataclass
class Trace:
    flow: str
    turns: list[Turn] = field(default_factory=list)
    mocks: dict[str, Any] = field(default_factory=dict)
    version: int = FORMAT_VERSION
    #: Destinations the contained agent was refused ({destination, protocol, at_ms}); only a
    #: contained run has any, and an empty list leaves the document byte-identical.
    egress_blocked: list[dict[str, Any]] = field(default_factory=list)
    #: MCP server name -> its lane (flowproof_cli/mcp/lane.py); empty: no `mcp` key.
    mcp: dict[str, Lane] = field(default_factory=dict)
    #: The match rules in force when recorded (like mocks); empty: no `match` key.
    match: list[dict[str, Any]] = field(default_factory=list)


def to_document(trace: Trace) -> dict[str, Any]:
    turns = []
    for turn in trace.turns:
        entry: dict[str, Any] = {}
        if turn.protocol != DEFAULT_PROTOCOL:
            entry["protocol"] = turn.protocol
        entry["request"] = sorted_keys(turn.request)
        entry["response"] = {"status": turn.status, "body": sorted_keys(turn.response)}
        turns.append(entry)
    singles = {k: v for k, v in trace.mocks.items() if not isinstance(v, ResultSequence)}
    sequences = {k: v for k, v in trace.mocks.items() if isinstance(v, ResultSequence)}
    document: dict[str, Any] = {
        "flowproof_trace": trace.version,
        "flow": trace.flow,
        "mocks": sorted_keys(singles),
    }
    if sequences:  # absent without `results:`, so older traces stay byte-identical
        document["mock_results"] = sorted_keys({k: list(v) for k, v in sequences.items()})
    document["turns"] = turns
    if trace.match:  # absent without rules, so older traces stay byte-identical
        document["match"] = [sorted_keys(rule) for rule in trace.match]
    if trace.egress_blocked:
        document["egress"] = {"blocked": [_blocked_entry(item) for item in trace.egress_blocked]}
    if trace.mcp:  # absent without MCP servers, so older traces stay byte-identical
        document["mcp"] = {name: lane_to_document(trace.mcp[name]) for name in sorted(trace.mcp)}
    return document


def from_document(document: Any, source: str) -> Trace:
    """Rebuild a Trace, naming what is wrong when the document is not one."""
    if not isinstance(document, dict) or "flowproof_trace" not in document:
        raise TraceError(f"{source}: not a flowproof trace (no 'flowproof_trace' version key)")
    version = document["flowproof_trace"]
    if version != FORMAT_VERSION:
        raise TraceError(
            f"{source}: trace format version {version!r} is not supported by this flowproof "
            f"(it reads version {FORMAT_VERSION}); re-record it with `flowproof record`"
        )
    turns = []
    for number, entry in enumerate(document.get("turns") or [], start=1):
        try:
            response = entry["response"]
            turns.append(
                Turn(
                    protocol=entry.get("protocol", DEFAULT_PROTOCOL),
                    request=entry["request"],
                    status=int(response["status"]),
                    response=response["body"],
                )
            )
        except (KeyError, TypeError, ValueError) as exc:
            raise TraceError(f"{source}: turn {number} is malformed ({exc!r})") from exc
    return Trace(
        flow=str(document.get("flow", "")),
        turns=turns,
        mocks=_mocks(document, source),
        version=version,
        egress_blocked=_egress_blocked(document.get("egress"), source),
        mcp=_mcp_lanes(document.get("mcp"), source),
        match=_match_rules(document.get("match"), source),
    )


def _mocks(document: dict[str, Any], source: str) -> dict[str, Any]:
    """The mocks snapshot: single results, and `mock_results` sequences as ResultSequence."""
    mocks = dict(document.get("mocks") or {})
    sequences = document.get("mock_results")
    if sequences is None:
        return mocks
    if not isinstance(sequences, dict) or not all(
        isinstance(values, list) for values in sequences.values()
    ):
        raise TraceError(f"{source}: the mock_results section is malformed (expected tool: [...])")
    mocks.update({str(name): ResultSequence(values) for name, values in sequences.items()})
    return mocks


def _match_rules(section: Any, source: str) -> list[dict[str, Any]]:
    if section is None:
        return []
    if not isinstance(section, list) or not all(isinstance(rule, dict) for rule in section):
        raise TraceError(f"{source}: the match section is malformed (expected a list of rules)")
    return [dict(rule) for rule in section]


def _mcp_lanes(section: Any, source: str) -> dict[str, Lane]:
    if section is None:
        return {}
    if not isinstance(section, dict):
        raise TraceError(f"{source}: the mcp section is malformed (expected server name: lane)")
    return {
        str(name): lane_from_document(lane, f"{source}: the MCP lane '{name}'")
        for name, lane in section.items()
    }


def _egress_blocked(section: Any, source: str) -> list[dict[str, Any]]:
    if section is None:
        return []
    blocked = section.get("blocked") if isinstance(section, dict) else None
    if not isinstance(blocked, list):
        raise TraceError(f"{source}: the egress section is malformed (expected `blocked: [...]`)")
    items = []
    for number, item in enumerate(blocked, start=1):
        try:
            items.append(_blocked_entry(item))
        except (KeyError, TypeError, ValueError) as exc:
            raise TraceError(
                f"{source}: egress blocked entry {number} is malformed ({exc!r})"
            ) from exc
    return items


def _blocked_entry(item: Any) -> dict[str, Any]:
    """One refused destination in its stored shape (raises on a missing or bad field)."""
    return {
        "destination": str(item["destination"]),
        "protocol": str(item["protocol"]),
        "at_ms": int(item["at_ms"]),
    }
