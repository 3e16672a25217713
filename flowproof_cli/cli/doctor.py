"""`flowproof doctor --agent CMD`: check that an agent's model calls reach flowproof.

No spec, no trace, no key: exit 0 when at least one model request arrived, 1 when none did
(with what flowproof injected and how to map another variable), 2 when the command cannot
start. It prints its own report: a doctor's report is not a flow result (`cli/output.py`).
"""

from __future__ import annotations

import sys

import click

from flowproof_cli.cli.options import agent_option, agent_timeout_option
from flowproof_cli.doctor.diagnosis import DEFAULT_PROMPT, DEFAULT_TIMEOUT_S, DoctorReport
from flowproof_cli.errors import ExitCode
from flowproof_cli.providers import REGISTRY, ProxyAddress
from flowproof_cli.runner.environment import ORPHAN_MARKER_VARIABLE


def _ran(report: DoctorReport) -> str:
    outcome = report.outcome
    if outcome.timed_out:
        return f"was killed after {outcome.duration_s:.1f} s (--timeout)"
    return f"exited with code {outcome.exit_code} after {outcome.duration_s:.1f} s"


def _injected(port: int) -> list[str]:
    """What flowproof set for the agent: its own proxy variable, then each provider's
    variables grouped by value (from the provider registry), then the task."""
    proxy = ProxyAddress.on_port(port)
    lines = [f"{ORPHAN_MARKER_VARIABLE} = {proxy.v1}"]
    for provider in REGISTRY:
        by_value: dict[str, list[str]] = {}
        variables = {
            **provider.agent_variables({}, proxy),
            **provider.file_variables("<the flow's private folder>"),
        }
        for name, value in variables.items():
            by_value.setdefault(value, []).append(name)
        said = "; ".join(f"{', '.join(names)} = {value}" for value, names in by_value.items())
        lines.append(f"{provider.name}: {said}")
    return [
        *lines,
        "FLOWPROOF_PROMPT = the --prompt text",
        "FLOWPROOF_PROMPT_FILE = a file holding the same text",
    ]


def _stderr_tail(report: DoctorReport) -> list[str]:
    tail = report.outcome.stderr_tail()
    if not tail:
        return []
    return ["the agent's stderr ends with:", *(f"    {line}" for line in tail.splitlines())]


def render_report(report: DoctorReport) -> list[str]:
    lines = [
        f"ran: {report.command}",
        f"proxy: {report.proxy_url} (canned replies: no model, no key)",
        f"the agent {_ran(report)}",
        f"model requests: {report.model_requests}",
        *(
            f"    {arrival.route}: {arrival.count} ({arrival.dialect}, provider {arrival.provider})"
            for arrival in report.arrivals
        ),
    ]
    if report.refused:
        lines.append("other requests (not model routes, answered 404):")
        lines += [f"    {route}: {count}" for route, count in report.refused.items()]
    if report.model_requests:
        if report.outcome.exit_code != 0:
            lines += _stderr_tail(report)
        lines.append("OK: the agent's model client reaches flowproof's proxy")
        return lines
    lines.append("FAIL: no model request reached flowproof's proxy")
    lines.append("flowproof injected:")
    lines += [f"    {line}" for line in _injected(report.port)]
    lines += [
        "if the agent's model client reads another variable (or a config file), map it in the "
        "spec's agent.env with a handle:",
        "    agent:",
        "      env:",
        '        MY_LLM_BASE_URL: "${flowproof.proxy_url}"        # with /v1',
        '        MY_ANTHROPIC_BASE: "${flowproof.proxy_url_no_v1}" # without /v1',
    ]
    lines += _stderr_tail(report)
    return lines


@click.command()
@agent_option("The agent command, split like agent.command; it may use ${VAR} and the handles.")
@click.option(
    "--prompt",
    default=DEFAULT_PROMPT,
    show_default=True,
    help="The task given to the agent (FLOWPROOF_PROMPT, and ${flowproof.prompt} in CMD).",
)
@agent_timeout_option(DEFAULT_TIMEOUT_S)
def doctor(command: str, prompt: str, timeout: float) -> None:
    """Run CMD once and report whether its model requests reach flowproof (no spec, no key)."""
    import asyncio  # noqa: PLC0415 - not for --help

    from flowproof_cli.doctor.diagnosis import diagnose  # noqa: PLC0415

    report = asyncio.run(diagnose(command, prompt=prompt, timeout_s=timeout))
    for line in render_report(report):
        click.echo(line)
    sys.exit(ExitCode.PASSED if report.model_requests else ExitCode.FAILED)
