"""The MCP tool boundary: lanes, JSON-RPC matching, record/replay of stdio and HTTP servers.

lane.py       the recorded traffic of one server (calls, server-started messages)
canonical.py  message kinds and the canonical form of a client request
matching.py   positional matching: method, tool, protocol version, argument diff
recorder.py   messages -> lane (record)
replayer.py   lane -> answers (replay), the verdict
mocks.py      `result:` mocks as CallToolResults
capture.py    the stdio stand-in's append-only capture file
stdio.py      the stdio stand-in (`flowproof mcp-stdio`)
http.py       the streamable-HTTP boundary's logic (addons/mcp_http.py is the glue)
sse.py        SSE framing and the loopback stream server used at replay
flow.py       one flow's MCP servers: session files, environment, lanes, failures
"""

from flowproof_cli.mcp.lane import Call, Lane, ServerEvent
from flowproof_cli.mcp.recorder import LaneRecorder
from flowproof_cli.mcp.replayer import Emission, Replayer

__all__ = ["Call", "Emission", "Lane", "LaneRecorder", "Replayer", "ServerEvent"]
