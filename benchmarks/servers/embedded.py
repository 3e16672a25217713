"""flowproof's replay (or record) proxy, embedded the way the runner embeds it.

    python benchmarks/servers/embedded.py replay TRACE [--repeat N]
    python benchmarks/servers/embedded.py record UPSTREAM_BASE_URL

A `ProxyEngine` carrying `RequestGuard` and `ModelBoundary`, with one `CassetteSession`
keyed by the listening port, as `flowproof run` wires a flow. `--repeat N` replays the
trace's turns N times over (one request repeated many times, without a huge file).
First stdout line: `PORT <n>`; serves on 127.0.0.1 until SIGTERM.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from flowproof_addons.guard import RequestGuard
from flowproof_addons.model import ModelBoundary
from flowproof_cli import trace as traces
from flowproof_cli.cassette import CassetteSession, Mode, Upstream
from flowproof_cli.runner.proxy_engine import ProxyEngine


def session_for(args: argparse.Namespace) -> CassetteSession:
    if args.mode == "record":
        return CassetteSession(Mode.RECORD, upstream=Upstream(args.source, "sk-bench"))
    trace = traces.load(Path(args.source))
    return CassetteSession(Mode.REPLAY, mocks=trace.mocks, recorded=list(trace.turns) * args.repeat)


async def serve(args: argparse.Namespace) -> None:
    session = session_for(args)
    boundary = ModelBoundary()
    # As `flowproof run` wires it: a replay dials nothing, so it carries no TLS (no CA).
    proxy = ProxyEngine([RequestGuard(), boundary], port=0, upstream_tls=args.mode == "record")
    await proxy.start()
    boundary.sessions[proxy.port] = session
    print(f"PORT {proxy.port}", flush=True)
    stop = asyncio.Event()
    asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
    await stop.wait()
    await proxy.stop()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=["replay", "record"])
    parser.add_argument("source", help="replay: the trace file; record: the upstream base URL")
    parser.add_argument("--repeat", type=int, default=1)
    asyncio.run(serve(parser.parse_args()))


if __name__ == "__main__":
    main()
