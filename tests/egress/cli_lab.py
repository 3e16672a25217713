"""End-to-end egress scenarios through the real CLI, inside a network namespace of their own.

Run as `unshare -n python -m tests.egress.cli_lab SPEC` by tests/egress/test_e2e.py: it
builds the same veth "internet" as tests/egress/lab.py, starts the fake model on this
namespace's loopback, and records and replays flows with real SDK agents.
"""

from __future__ import annotations

import json
import os
import shlex
import sys
import tempfile
from pathlib import Path
from typing import Any

import yaml

from tests.conftest import run_cli
from tests.e2e.flows import AGENTS, write_flow
from tests.egress.lab import Peer, tx_packets
from tests.fakes.fake_upstream import FakeUpstream

LEAKY = Path(__file__).with_name("agents") / "leaky_agent.py"


def command(script: Path) -> str:
    return f"{shlex.quote(sys.executable)} {shlex.quote(str(script))}"


def cli(*args: str | Path, env: dict[str, str] | None = None) -> dict[str, Any]:
    result = run_cli(*args, env=env)
    return {"code": result.code, "stdout": result.stdout, "stderr": result.stderr}


def nested_cli(*args: str | Path, env: dict[str, str]) -> dict[str, Any]:
    """The CLI itself run contained: its own agent's sandbox is then nested (EBUSY)."""
    from flowproof_cli.egress import Policy
    from tests.conftest import clean_environ
    from tests.egress.contained import run_contained

    folder = Path(tempfile.mkdtemp())
    out, err = folder / "out", folder / "err"
    with open(out, "w") as stdout, open(err, "w") as stderr:
        run = run_contained(
            [sys.executable, "-m", "flowproof_cli", *map(str, args)],
            Policy(),
            env=clean_environ(env),
            cwd=Path(__file__).resolve().parents[2],
            stdout=stdout.fileno(),
            stderr=stderr.fileno(),
        )
    return {"code": run.returncode, "stdout": out.read_text(), "stderr": err.read_text()}


def trace_text(spec: Path) -> str | None:
    path = spec.with_name(spec.name.replace(".flow.yaml", ".trace.yaml"))
    return path.read_text() if path.exists() else None


def scenarios(folder: Path) -> dict[str, Any]:
    out: dict[str, Any] = {}
    probe, scratch = folder / "probe.txt", folder / "scratch.txt"
    leaky_env = {"LEAKY_PROBE": str(probe), "LEAKY_SCRATCH": str(scratch)}
    with FakeUpstream() as fake:
        upstream = {"FLOWPROOF_AGENT_UPSTREAM": f"{fake.base_url}/v1", "FLOWPROOF_AGENT_KEY": "k"}
        # A: a real-SDK agent, certified contained at record and at replay.
        sdk = write_flow(
            folder,
            name="sdk",
            command=command(AGENTS / "py_openai_chat.py"),
            tools=[{"name": "get_weather"}, {"name": "get_time", "result": {"utc": "pinned"}}],
            steps=[
                {"prompt": "What's the weather in Nairobi right now? Use both tools."},
                {"assert_tool_call": "get_weather where city equals Nairobi"},
            ],
        )
        spec = yaml.safe_load(sdk.read_text())
        spec["agent"]["allow_egress"] = []
        spec["steps"].append("assert_no_egress")
        sdk.write_text(yaml.safe_dump(spec, sort_keys=False))
        tx = tx_packets()
        out["sdk_record"] = cli("record", sdk, env=upstream)
        out["sdk_trace"] = trace_text(sdk)
        out["sdk_replay"] = cli("run", sdk)
        out["sdk_tx"] = tx_packets() - tx

        # B: declared but not asserted: passes, the refusal is in the trace, fs observed.
        leaky = write_flow(folder, name="leaky", command=command(LEAKY), env=leaky_env)
        spec = yaml.safe_load(leaky.read_text())
        spec["agent"]["allow_egress"] = ["10.77.0.2:8080"]
        leaky.write_text(yaml.safe_dump(spec, sort_keys=False))
        tx = tx_packets()
        out["leaky_record"] = cli("record", leaky, env=upstream)
        out["leaky_trace"] = trace_text(leaky)
        out["leaky_replay"] = cli("run", leaky)
        out["leaky_replay_json"] = cli("run", leaky, "--json")
        out["leaky_tx"] = tx_packets() - tx

        # C: the same agent certified: record fails and writes no trace.
        certified = write_flow(folder, name="certified", command=command(LEAKY), env=leaky_env)
        spec = yaml.safe_load(certified.read_text())
        spec["agent"]["allow_egress"] = ["10.77.0.2:8080"]
        spec["steps"].append("assert_no_egress")
        certified.write_text(yaml.safe_dump(spec, sort_keys=False))
        out["certified_record"] = cli("record", certified, env=upstream)
        out["certified_trace"] = trace_text(certified)
        out["probe"] = probe.read_text().split()

        # D: where containment is unavailable (here: flowproof itself already contained).
        warned = write_flow(folder, name="warned")
        spec = yaml.safe_load(warned.read_text())
        spec["agent"]["allow_egress"] = ["api.example.invalid:443"]
        warned.write_text(yaml.safe_dump(spec, sort_keys=False))
        out["warned_record"] = nested_cli("record", warned, env=upstream)
        uncertified = write_flow(folder, name="uncertified")
        spec = yaml.safe_load(uncertified.read_text())
        spec["steps"].append("assert_no_egress")
        uncertified.write_text(yaml.safe_dump(spec, sort_keys=False))
        out["uncertified_record"] = nested_cli("record", uncertified, env=upstream)
        out["uncertified_trace"] = trace_text(uncertified)

        # F: a command that does not exist fails as it does uncontained (exit 2).
        missing = write_flow(folder, name="missing", command="definitely-not-a-command-xyz")
        spec = yaml.safe_load(missing.read_text())
        spec["agent"]["allow_egress"] = []
        missing.write_text(yaml.safe_dump(spec, sort_keys=False))
        out["missing_record"] = cli("record", missing, env=upstream)

        # E: a flow that engages nothing still says what it ran under.
        plain = write_flow(folder, name="plain")
        out["plain_record"] = cli("record", plain, env=upstream)
    return out


def main(argv: list[str]) -> None:
    spec = json.loads(argv[0])
    if os.readlink("/proc/self/ns/net") == spec["outer_netns"]:
        raise SystemExit("refusing to run: not inside a network namespace of its own")
    peer = Peer()
    try:
        folder = Path(tempfile.mkdtemp(prefix="flowproof-egress-e2e-"))
        print("CLI_LAB " + json.dumps(scenarios(folder)), flush=True)
    finally:
        peer.stop()


if __name__ == "__main__":
    main(sys.argv[1:])
