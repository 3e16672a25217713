"""A real flow for the per-flow, suite and cold-start groups: spec, trace, stub, cassette.

The agent (clients/agent.py) is recorded once through `flowproof record` against the bare
stub, which plays the model: `lookup` on every turn but the last, then the reply. The same
stub then serves the agent run alone, and vcrpy records its own cassette from it.
"""

from __future__ import annotations

import shlex
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from benchmarks import harness, payloads
from benchmarks.clients.agent import PROMPT

AGENT = harness.BENCH / "clients" / "agent.py"
VCR_AGENT = harness.BENCH / "clients" / "vcr_agent.py"


def model_script(turns: int) -> list[dict[str, Any]]:
    """The model's answers: a `lookup` call per turn, then the final text."""
    calls = [
        payloads.completion(
            None,
            [
                {
                    "id": f"call_{step:03d}",
                    "type": "function",
                    "function": {"name": "lookup", "arguments": f'{{"step": {step}}}'},
                }
            ],
        )
        for step in range(1, turns)
    ]
    return [*calls, payloads.completion(f"All {turns} steps done: the sky is clear.")]


def spec(name: str, turns: int) -> dict[str, Any]:
    return {
        "name": name,
        "app": "agent",
        "agent": {
            "command": f"{shlex.quote(harness.PYTHON)} {shlex.quote(str(AGENT))}",
            "env": {"BENCH_TURNS": str(turns)},
        },
        "tools": [{"name": "lookup"}],
        "steps": [
            {"prompt": PROMPT},
            *([{"assert_tool_call": "lookup"}] if turns > 1 else []),
            {"assert": "reply contains done"},
        ],
    }


@dataclass(frozen=True)
class Flow:
    """One recorded flow and the stub that plays its model."""

    spec_path: Path
    trace_path: Path
    cassette: Path  # vcrpy's
    stub: harness.Server
    turns: int

    def agent_env(self) -> dict[str, str]:
        """The agent alone: pointed at the stub, given the same task as under flowproof."""
        return {
            "OPENAI_BASE_URL": self.stub.base_url,
            "OPENAI_API_KEY": "sk-bench",
            "FLOWPROOF_PROMPT": PROMPT,
            "BENCH_TURNS": str(self.turns),
        }

    def copies(self, folder: Path, count: int) -> Path:
        """`count` flows from this one (own name, own trace) in `folder`, for a suite."""
        folder.mkdir(parents=True, exist_ok=True)
        document = yaml.safe_load(self.spec_path.read_text())
        trace_text = self.trace_path.read_text()
        for number in range(count):
            name = f"bench flow {number:03d}"
            document["name"] = name
            stem = folder / f"flow{number:03d}"
            Path(f"{stem}.flow.yaml").write_text(yaml.safe_dump(document, sort_keys=False))
            retitled = trace_text.replace(f"flow: agent{self.turns}\n", f"flow: {name}\n", 1)
            Path(f"{stem}.trace.yaml").write_text(retitled)
        return folder


@contextmanager
def recorded_flow(folder: Path, turns: int) -> Iterator[Flow]:
    """Record the agent once (flowproof and vcrpy), keep its stub running while in use."""
    folder.mkdir(parents=True, exist_ok=True)
    responses = payloads.stub_responses(folder / f"model{turns}.json", model_script(turns))
    spec_path = folder / f"agent{turns}.flow.yaml"
    spec_path.write_text(yaml.safe_dump(spec(f"agent{turns}", turns), sort_keys=False))
    stub_argv = [harness.PYTHON, str(harness.BENCH / "servers" / "stub.py"), str(responses)]
    with harness.Server("stub", stub_argv) as stub:
        record_env = {
            "FLOWPROOF_AGENT_UPSTREAM": stub.base_url,
            "FLOWPROOF_AGENT_KEY": "sk-bench",
        }
        harness.timed([harness.FLOWPROOF, "record", str(spec_path)], env=record_env, cwd=folder)
        flow = Flow(
            spec_path,
            spec_path.with_name(f"agent{turns}.trace.yaml"),
            folder / "vcr.yaml",
            stub,
            turns,
        )
        flow.cassette.unlink(missing_ok=True)
        harness.timed(
            [harness.PYTHON, str(VCR_AGENT), str(flow.cassette), "--record"], flow.agent_env()
        )
        yield flow


def clean(folder: Path) -> None:
    shutil.rmtree(folder, ignore_errors=True)
