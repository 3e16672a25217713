"""Resumption ids at replay (handshake era), over real sockets.

A raw HTTP client against the replaying listener (mitmproxy, the addon, the loopback stream
server): it drops the GET stream and a POST's SSE answer mid-stream and resumes them with
`Last-Event-ID`. Then the real `mcp` 2.x client (legacy mode) resumes a POST answer that a
TCP relay cuts after its first event, through `flowproof run`.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from flowproof_cli.mcp.http_replay import HttpReplaySession
from flowproof_cli.mcp.sse import SseParser
from tests.conftest import run_cli
from tests.e2e import mcp_flows
from tests.unit.proxy_clients import mcp_client
from tests.unit.test_mcp_resumption import lane, tool

pytestmark = pytest.mark.slow

Event = tuple[str | None, str]  # (SSE id, JSON-RPC method or "answer")


class Events:
    """The SSE events of one streamed response, read as they come."""

    def __init__(self, response: httpx.Response):
        self.response = response
        self._chunks: AsyncIterator[bytes] = response.aiter_bytes()
        self._parser = SseParser()
        self._ready: list[Event] = []

    async def take(self, count: int) -> list[Event]:
        while len(self._ready) < count:
            chunk = await anext(self._chunks)
            for event in self._parser.feed(chunk):
                self._ready.append((event.id, json.loads(event.data).get("method", "answer")))
        taken, self._ready = self._ready[:count], self._ready[count:]
        return taken

    async def rest(self) -> list[Event]:
        """Everything up to the end of the stream."""
        async for chunk in self._chunks:
            for event in self._parser.feed(chunk):
                self._ready.append((event.id, json.loads(event.data).get("method", "answer")))
        taken, self._ready = self._ready, []
        return taken


def reply(request_id: int) -> bytes:
    """The agent's answer to the server's request `request_id` (roots/list is 3)."""
    return json.dumps({"jsonrpc": "2.0", "id": request_id, "result": {}}).encode()


async def finish(
    http: httpx.AsyncClient,
    url: str,
    session: HttpReplaySession,
    standalone: Events,
    seen: dict[str, Any],
) -> None:
    """The red path (an unknown id), then the end of the flow: nothing else was coming."""
    unknown = await http.get(url, headers={"last-event-id": "get-99"})
    seen["unknown"] = (unknown.status_code, unknown.json()["error"]["message"])
    session.close()  # the flow is over: the stream ends
    seen["after"] = await standalone.rest()


async def replay_over_http(*, drop: bool) -> dict[str, Any]:
    """One replay of `lane()`; with `drop`, both streams are lost after their first event."""
    seen: dict[str, Any] = {}
    session = HttpReplaySession("notes", lane=lane())
    async with mcp_client(session, "/mcp", "2025-11-25") as (http, url, init):
        assert init.status_code == 200
        slow = await http.post(url, content=tool(2, "slow"))
        seen["slow"] = [
            (e.id, json.loads(e.data).get("method", "answer"))
            for e in SseParser().feed(slow.content)
        ]
        async with http.stream("GET", url) as standalone_response:
            standalone = Events(standalone_response)
            # Call 3 waits for the agent's answer to roots/list: streamed over time.
            async with http.stream("POST", url, content=tool(3, "roots")) as roots_response:
                roots = Events(roots_response)
                seen["roots"] = await roots.take(1)
                if not drop:
                    assert (await http.post(url, content=reply(3))).status_code == 202
                    seen["roots"] += await roots.take(1)
            if drop:  # the POST's stream is gone before its answer: resume it
                assert (await http.post(url, content=reply(3))).status_code == 202
                last = seen["roots"][-1][0]
                resumed = await http.get(url, headers={"last-event-id": last})
                assert resumed.status_code == 200, resumed.text
                seen["roots"] += [
                    (e.id, json.loads(e.data).get("method", "answer"))
                    for e in SseParser().feed(resumed.content)
                ]
            await http.post(url, content=tool(4, "a"))
            seen["get"] = await standalone.take(1 if drop else 2)
            if not drop:
                await http.post(url, content=tool(5, "b"))
                seen["get"] += await standalone.take(2)
                await finish(http, url, session, standalone, seen)
        if drop:  # the GET stream was lost after its first event: resume it
            await http.post(url, content=tool(5, "b"))
            headers = {"last-event-id": seen["get"][-1][0]}
            async with http.stream("GET", url, headers=headers) as resumed_response:
                assert resumed_response.status_code == 200
                resumed = Events(resumed_response)
                seen["get"] += await resumed.take(3)
                await finish(http, url, session, resumed, seen)
    assert session.replayer.failures() == [] and session.errors == []
    return seen


@pytest.mark.timeout(120)
def test_a_raw_client_resumes_both_streams_with_the_same_ids() -> None:
    whole = asyncio.run(replay_over_http(drop=False))
    assert whole["slow"] == [
        ("call2-1", "notifications/progress"),
        ("call2-2", "notifications/message"),
        ("call2-3", "answer"),
    ]
    assert whole["roots"] == [("call3-1", "roots/list"), ("call3-2", "answer")]
    assert whole["get"] == [
        ("get-1", "notifications/one"),
        ("get-2", "notifications/two"),
        ("get-3", "notifications/three"),
        ("get-4", "notifications/four"),
    ]
    assert whole["after"] == []  # exactly the missing events, nothing again
    status, message = whole["unknown"]
    assert status == 400 and "Last-Event-ID 'get-99' names no event this replay sent" in message

    dropped = asyncio.run(replay_over_http(drop=True))
    assert dropped == whole
    assert asyncio.run(replay_over_http(drop=False)) == whole  # ids are the same every replay


# -- the real SDK client, cut off mid-answer by a relay, through `flowproof run` --------------

RELAY = r'''
"""Runs an MCP client through a TCP relay to $FLOWPROOF_MCP_URL_NOTES that, with `cut`,
closes the first SSE answer carrying a progress notification right after that event."""
import asyncio, json, os, sys

TRIGGER = b'"method":"notifications/progress"'
VARIABLE = "FLOWPROOF_MCP_URL_NOTES"


async def main() -> int:
    out, mode, *command = sys.argv[1:]
    host, port = os.environ[VARIABLE].split("/")[2].rsplit(":", 1)
    state = {"armed": mode == "cut", "cuts": 0, "last_event_ids": []}

    async def pump(reader, writer, chunk, *also):
        """Copy `reader` to `writer`, each read through `chunk` (the bytes to pass on, and
        whether to stop after them), until the end, a cut or a reset; then close `writer`
        and `also`."""
        try:
            while data := await reader.read(65536):
                data, stop = chunk(data)
                writer.write(data)
                await writer.drain()
                if stop:
                    break
        except OSError:
            pass
        finally:
            writer.close()
            for other in also:
                other.close()

    def note_last_event_ids(data):
        for line in data.split(b"\r\n"):
            if line.lower().startswith(b"last-event-id:"):
                state["last_event_ids"].append(line.split(b":", 1)[1].strip().decode())
        return data, False

    def cut_after_the_trigger():
        window = b""

        def chunk(data):
            nonlocal window
            if state["armed"]:
                seen = window + data
                at = seen.find(TRIGGER)
                end = seen.find(b"\n\n", at) if at >= 0 else -1
                if end >= 0:
                    state["armed"] = False
                    state["cuts"] += 1
                    return data[: end + 2 - len(window)], True
                window = seen[-4096:]
            return data, False

        return chunk

    async def relay(client_reader, client_writer):
        upstream_reader, upstream_writer = await asyncio.open_connection(host, int(port))
        await asyncio.gather(
            pump(client_reader, upstream_writer, note_last_event_ids),
            pump(upstream_reader, client_writer, cut_after_the_trigger(), upstream_writer),
        )

    server = await asyncio.start_server(relay, "127.0.0.1", 0)
    relay_url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}/mcp"
    process = await asyncio.create_subprocess_exec(
        *command, env={**os.environ, VARIABLE: relay_url}, stdout=asyncio.subprocess.PIPE
    )
    stdout, _ = await process.communicate()
    server.close()
    summary = json.loads(stdout) if stdout.strip() else None
    with open(out, "w") as handle:
        json.dump({"summary": summary, **state}, handle)
    sys.stdout.write(stdout.decode())
    return process.returncode


sys.exit(asyncio.run(main()))
'''


@pytest.mark.timeout(300)
def test_the_sdk_client_resumes_a_cut_post_answer_at_replay(tmp_path: Path) -> None:
    relay = tmp_path / "relay_agent.py"
    relay.write_text(RELAY)
    out = tmp_path / "relay.json"
    sdk = mcp_flows.client("py_client_v2.py", "--mode", "legacy", "--transport", "http")
    agent = [mcp_flows.PY, str(relay), str(out), "pass", *sdk, "--steps", "write,slow"]
    notes = tmp_path / "notes"
    env = {"NOTES_DIR": str(notes)}
    with mcp_flows.http_server(mcp_flows.notes_http(), env) as url:
        spec = mcp_flows.write_flow(tmp_path, agent, [{"name": "notes", "url": url}], env=env)
        recorded = mcp_flows.record(spec)
    assert recorded.code == 0, recorded.output
    at_record = json.loads(out.read_text())
    assert at_record["summary"]["protocol_version"] == "2025-11-25"
    assert len(at_record["summary"]["progress"]) == 3

    mcp_flows.edit_flow(
        spec, agent=[mcp_flows.PY, str(relay), str(out), "cut", *sdk, "--steps", "write,slow"]
    )
    replayed = mcp_flows.replay(spec)
    assert replayed.code == 0, replayed.output
    at_replay = json.loads(out.read_text())
    calls = mcp_flows.trace_of(spec)["mcp"]["notes"]["calls"]
    slow = next(
        number
        for number, call in enumerate(calls, start=1)
        if call["method"] == "tools/call" and call["params"]["name"] == "slow_count"
    )
    assert at_replay["cuts"] == 1
    assert at_replay["last_event_ids"] == [f"call{slow}-1"]  # the SDK resumed after event 1
    for key in ("calls", "progress", "log_messages"):
        assert at_replay["summary"][key] == at_record["summary"][key], key
    assert f"    mcp: notes {len(calls)} call(s)" in replayed.stdout.splitlines()

    as_json = run_cli("run", spec, "--json", timeout=180)  # still the cut agent: the same
    assert as_json.code == 0, as_json.output
    assert json.loads(as_json.stdout)["flows"][0]["mcp_calls"] == {"notes": len(calls)}
