"""The MCP tool boundary: lanes, JSON-RPC matching, record/replay of stdio and HTTP servers.

lane.py           the recorded traffic of one server (calls, server-started messages)
canonical.py      message kinds and the canonical form of a client request
matching.py       positional matching: method, tool, protocol version, argument diff
recorder.py       messages -> lane (record)
replayer.py       lane -> answers (replay), the verdict
mocks.py          `result:` mocks as CallToolResults
capture.py        the stdio stand-in's append-only capture file
call_bound.py     the bound of each call to a real server at record, and its wording
stdio.py          the stdio stand-in (`flowproof mcp-stdio`)
http.py           the streamable-HTTP boundary's request front (addons/mcp_http.py is the glue)
http_record.py    record: forward to the real server, keep the lane
http_upstream.py  record: what the real server's answers mean for the lane
http_replay.py    replay: answer from the lane
replay_streams.py the replay's SSE streams, kept whole for resumption
sse.py            SSE framing and the loopback stream server used at replay

One flow's MCP servers as the runner drives them are `flowproof_cli.runner.mcp_servers`.
"""

from flowproof_cli.mcp.lane import Call, Lane, ServerEvent
from flowproof_cli.mcp.recorder import LaneRecorder
from flowproof_cli.mcp.replayer import Emission, Replayer

__all__ = ["Call", "Emission", "Lane", "LaneRecorder", "Replayer", "ServerEvent"]
