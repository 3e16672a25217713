"""The coding CLIs' built-in tools, and what turns one off.

A tool the agent offers the model that no MCP server of the spec provides is the agent's
own: flowproof cannot answer it in its place, and declaring it under `mcp:` is impossible
(`Bash` is Claude Code's, not a server's). What stops the real call is the agent's own
configuration, which for a coding CLI is its permission flags. A CLI is recognised by the
wire protocol it speaks and by offering at least `MIN_SHARED` of its built-in tools, so a
fork that reuses the names over another protocol (Qwen Code's are Gemini CLI's, over
OpenAI Chat Completions) is not mistaken for it. The names and flags were read from the
versions the lockfile pins (`claude --help`, `gemini --help`, `codex exec --help`, and the
tools each offers in its requests).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Set
from dataclasses import dataclass

MIN_SHARED = 2  # built-in names a request must offer for its CLI to be recognised


@dataclass(frozen=True)
class BuiltIns:
    cli: str
    protocol: str  # the dialect its requests speak
    tools: frozenset[str]
    how_to_stop: Callable[[str], str]  # tool name -> what turns it off

    def offered_by(self, offered: Mapping[str, Set[str]]) -> bool:
        return len(self.tools & offered.get(self.protocol, frozenset())) >= MIN_SHARED


def _claude_code(tool: str) -> str:
    return (
        f"deny it with Claude Code's own permissions: `--disallowedTools {tool}` (or leave it "
        "out of `--tools`)"
    )


def _gemini_cli(tool: str) -> str:
    return (
        "deny it with Gemini CLI's policy engine: a policy file holding `[[rule]]`, "
        f'`toolName = "{tool}"`, `decision = "deny"`, given with `--policy FILE` '
        "(`--approval-mode plan` runs read-only)"
    )


def _codex(tool: str) -> str:
    return (
        f"Codex has no flag that removes {tool}; `--sandbox read-only` keeps the commands it "
        "runs from writing files or reaching the network"
    )


CLIS = (
    BuiltIns(
        "Claude Code",
        "anthropic",
        frozenset(
            {
                "Agent",
                "Bash",
                "Edit",
                "Glob",
                "Grep",
                "NotebookEdit",
                "Read",
                "Task",
                "TodoWrite",
                "WebFetch",
                "WebSearch",
                "Write",
            }
        ),
        _claude_code,
    ),
    BuiltIns(
        "Gemini CLI",
        "gemini",
        frozenset(
            {
                "glob",
                "google_web_search",
                "grep_search",
                "list_directory",
                "read_file",
                "read_many_files",
                "replace",
                "run_shell_command",
                "save_memory",
                "web_fetch",
                "write_file",
                "write_todos",
            }
        ),
        _gemini_cli,
    ),
    BuiltIns(
        "Codex",
        "openai-responses",
        frozenset(
            {
                "apply_patch",
                "exec_command",
                "shell",
                "shell_command",
                "update_plan",
                "view_image",
                "write_stdin",
            }
        ),
        _codex,
    ),
)


def built_in_of(tool: str, offered: Mapping[str, Set[str]]) -> BuiltIns | None:
    """The CLI whose built-in `tool` is, when the requests (`offered`: protocol -> tool
    names) show that CLI is the agent, whether or not this run offered `tool` itself (Gemini
    CLI leaves `run_shell_command` out of a headless run's requests); None for any other."""
    for cli in CLIS:
        if tool in cli.tools and cli.offered_by(offered):
            return cli
    return None
