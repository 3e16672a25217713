"""What a flow settles before its agent starts (`FlowSetup`): read by every step after it,
the drive in `runner/flow.py` and the verdict in `runner/verdict_phase.py`."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from flowproof_cli import trace as traces
from flowproof_cli.cassette import CassetteSession
from flowproof_cli.evidence import secrets as secret_scan
from flowproof_cli.faults.plan import Fault
from flowproof_cli.match.addons import LoadedScript, ScriptAddon
from flowproof_cli.match.rules import MatchRules
from flowproof_cli.mode import Mode
from flowproof_cli.spec import FlowSpec


def record_command(spec_path: Path) -> str:
    """The command a missing or stale trace's message tells the user to run."""
    return f"flowproof record {spec_path}"


@dataclass(frozen=True)
class FlowSetup:
    """Everything a flow settles before its agent starts; each step after reads from it."""

    spec: FlowSpec
    mode: Mode
    trace_path: Path
    spec_path: Path
    cwd: Path
    environ: dict[str, str]
    timeout_s: float
    secrets: list[secret_scan.Secret]
    rules: MatchRules
    scripts: list[LoadedScript]  # the matcher scripts: their addon objects join the proxy
    session: CassetteSession
    trace: traces.Trace | None  # the trace replayed; None when recording
    keep_going: bool = False  # the agent runs to its own end after a divergence
    injected: tuple[Fault, ...] = ()  # faults beyond the spec's (chaos)

    @property
    def faults(self) -> tuple[Fault, ...]:
        """Every fault the flow runs with: the spec's, then any injected."""
        return (*self.spec.fault_plan, *self.injected)

    @property
    def user_addons(self) -> list[ScriptAddon]:
        return [addon for script in self.scripts for addon in script.addons]

    def close(self) -> None:
        """The threads of its matcher scripts and of its session's rules end."""
        self.session.close()
        for script in self.scripts:
            script.close()
