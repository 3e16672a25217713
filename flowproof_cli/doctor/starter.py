"""`flowproof init`: a starter spec from one run of the agent against canned replies.

A new user knows their agent command, not the spec format. Running the command once the way
`flowproof doctor` does (canned replies: no model, no key) shows which dialect it speaks and
which tools it offers the model; those become a spec that loads, declares the tools (not
mocked: a mock is a decision the user makes) and says in comments what to do next.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from flowproof_addons.canned import ToolCollector
from flowproof_cli.doctor.diagnosis import DoctorReport, diagnose
from flowproof_cli.spec.schema import MODELINE

PROMPT_PLACEHOLDER = "Describe the task for the agent here."
DEFAULT_INIT_TIMEOUT_S = 60.0

#: Where `record` forwards each dialect's calls, as the comment suggests it.
UPSTREAMS = {
    "openai-chat": "https://api.openai.com/v1",
    "openai-responses": "https://api.openai.com/v1",
    "anthropic": "https://api.anthropic.com",
    "gemini": "https://generativelanguage.googleapis.com",
    "vertex-gemini": "https://us-central1-aiplatform.googleapis.com",  # the agent's region
    "vertex-anthropic": "https://us-east5-aiplatform.googleapis.com",
    "azure-chat": "https://<resource>.openai.azure.com",
    "azure-responses": "https://<resource>.openai.azure.com",
}
_SCRIPT = re.compile(r"\.(py|js|mjs|cjs|ts|sh)$")


@dataclass(frozen=True)
class Probe:
    report: DoctorReport
    tools: list[str]
    dialects: list[str]


async def probe(
    command: str,
    *,
    cwd: Path,
    timeout_s: float = DEFAULT_INIT_TIMEOUT_S,
    environ: Mapping[str, str] | None = None,
) -> Probe:
    """Run the command once as doctor does; AgentStartError, ConfigError propagate."""
    collector = ToolCollector()
    report = await diagnose(
        command,
        prompt=PROMPT_PLACEHOLDER,
        timeout_s=timeout_s,
        environ=environ,
        cwd=cwd,
        canned=collector,
    )
    return Probe(report, list(collector.tools), list(collector.dialects))


def default_spec_name(command: str) -> str:
    """`python weather_agent.py` -> weather_agent.flow.yaml: the script, else the program."""
    try:
        words = shlex.split(command)
    except ValueError:
        words = command.split()
    scripts = [word for word in words if _SCRIPT.search(word)]
    word = scripts[0] if scripts else (words[0] if words else "agent")
    stem = re.sub(r"[^A-Za-z0-9_.-]+", "_", Path(_SCRIPT.sub("", word)).name).strip("._")
    return f"{stem or 'agent'}.flow.yaml"


def _quoted(text: str) -> str:
    """A YAML scalar that reads back as exactly `text` (JSON strings are YAML)."""
    return json.dumps(text, ensure_ascii=False)


def starter_spec(command: str, found: Probe, spec_name: str) -> str:
    """The text of the starter spec: loads as it is, says in comments what to do next."""
    upstream = UPSTREAMS.get(found.dialects[0] if found.dialects else "", UPSTREAMS["openai-chat"])
    spoke = ", ".join(found.dialects) or "no model API"
    lines = [
        MODELINE,  # editors validate the spec against the schema file init writes beside it
        f"# Written by `flowproof init` from one run of the agent ({spoke}) against canned",
        "# replies. Next: replace the prompt, add assertions, then record it once:",
        f"#   FLOWPROOF_AGENT_UPSTREAM={upstream} FLOWPROOF_AGENT_KEY=... \\",
        f"#     flowproof record {spec_name}",
        f"# and replay it offline with `flowproof run {spec_name}`.",
        f"name: {_quoted(Path(spec_name).name.removesuffix('.flow.yaml'))}",
        "app: agent",
        "agent:",
        f"  command: {_quoted(command)}",
    ]
    if found.tools:
        lines += [
            "# The tools the agent offered the model: declared, not mocked. Give one a",
            "# `result: {...}` to pin what the model is told it returned (the agent still runs",
            "# it), or serve it from an MCP server under `mcp:` so flowproof answers it.",
            "tools:",
            *(f"  - name: {_quoted(name)}" for name in found.tools),
        ]
    lines += [
        "steps:",
        f"  - prompt: {_quoted(PROMPT_PLACEHOLDER)}",
        "  # Assertions, checked against what the agent did:",
        *(f"  # - assert_tool_call: {name}" for name in found.tools[:1]),
        *(["  # - assert_no_tool_call: <a tool it must never call>"] if found.tools else []),
        "  # - assert: reply contains <some text>",
    ]
    return "\n".join(lines) + "\n"
