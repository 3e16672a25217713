"""Fake-model scripts that drive the real coding CLIs (Claude Code, Codex CLI, Gemini CLI,
opencode, Qwen Code).

Each script plays a model that reads the working directory from the CLI's own system context
and asks for a file there by its ABSOLUTE path, the way a real model does, then answers with
the file's text. The absolute path is what makes a recorded trace tied to one checkout: a
trace only replays from another checkout when its responses are relocated.

Side calls (a session title, a JSON-mode router) get a short answer of the right shape, so a
CLI that makes them still finishes.
"""

from __future__ import annotations

import json
import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from tests.fakes.fake_upstream import (
    DIALECT_ANTHROPIC,
    DIALECT_CHAT,
    DIALECT_GEMINI,
    DIALECT_RESPONSES,
    Reply,
    Script,
    conversation_of,
)

#: The file every scripted conversation reads, relative to the agent's working directory.
NOTES_FILE = "notes.txt"
#: The final answer starts with this; the text the tool returned follows it.
ANSWER_PREFIX = "The notes say:"

_CLAUDE_CWD = re.compile(r"Primary working directory: (\S+)")
_CODEX_CWD = re.compile(r"<cwd>([^<]+)</cwd>")
_GEMINI_CWD = re.compile(r"\*\*Workspace Directories:\*\*\s*\n\s*- (\S+)")
_OPENCODE_CWD = re.compile(r"<env>\s*\n\s*Working directory: (\S+)")
_QWEN_CWD = re.compile(r"I'm currently working in the directory: (\S+)")


@dataclass(frozen=True)
class CliScript:
    """What one CLI's scripted model needs: where the cwd shows, and how to call the tool.
    `then` is a second tool (an MCP server's) called with the first tool's text, before the
    answer, when the CLI offers it."""

    dialect: str
    cwd_pattern: re.Pattern[str]
    tool: str
    arguments: Callable[[str], dict[str, Any]]
    then: tuple[str, Callable[[str], dict[str, Any]]] | None = None

    def __call__(self, dialect: str, body: dict[str, Any]) -> Reply:
        if dialect != self.dialect:
            return Reply(status=404)
        if _wants_json(body):
            return Reply(text=json.dumps({"reasoning": "simple task", "model_choice": "flash"}))
        conversation = conversation_of(dialect, body)
        results = [_file_text(result) for result in conversation.tool_results]
        if results and self.then is not None and len(results) == 1:
            name, arguments = self.then
            if name in conversation.tools:
                return Reply(tool_calls=[(name, json.dumps(arguments(results[0])))])
        if results:
            return Reply(text=" ".join([ANSWER_PREFIX, *results]))
        cwd = _find(self.cwd_pattern, body)
        if cwd is None or self.tool not in conversation.tools:
            return Reply(text="Ready.")
        path = f"{cwd.rstrip('/')}/{NOTES_FILE}"
        return Reply(tool_calls=[(self.tool, json.dumps(self.arguments(path)))])


def _wants_json(body: dict[str, Any]) -> bool:
    config = body.get("generationConfig")
    return isinstance(config, dict) and config.get("responseMimeType") == "application/json"


def _find(pattern: re.Pattern[str], body: dict[str, Any]) -> str | None:
    match = pattern.search(json.dumps(body, ensure_ascii=False).replace("\\n", "\n"))
    return match.group(1) if match else None


def _file_text(result: str) -> str:
    """The file's text inside a tool result, without the tool's framing: Codex heads its
    output with `Chunk ID` / `Wall time` lines before `Output:`, Claude Code numbers the
    lines (`1\t`, `1→`), opencode too (`1: `, inside `<content>` with a closing note in
    parentheses), Gemini CLI wraps the text in a JSON `output`."""
    text = result
    try:
        parsed = json.loads(result)
    except json.JSONDecodeError:
        parsed = None
    if isinstance(parsed, dict) and isinstance(parsed.get("output"), str):
        text = parsed["output"]
    text = text.replace("\\n", "\n")
    if "\nOutput:\n" in text:
        text = text.split("\nOutput:\n", 1)[1]
    if "<content>" in text:
        text = text.split("<content>", 1)[1].split("</content>", 1)[0]
        text = _CLOSING_NOTE.sub("", text)
    lines = (_LINE_NUMBER.sub("", line).strip() for line in text.splitlines())
    return " ".join(line for line in lines if line)


_LINE_NUMBER = re.compile(r"^\s*\d+(?:→|\t|: )")
_CLOSING_NOTE = re.compile(r"\n\(End of file[^)]*\)\s*$")


def claude_code() -> Script:
    """Claude Code: `Read` of `<cwd>/notes.txt` (its system context names the cwd)."""
    return CliScript(DIALECT_ANTHROPIC, _CLAUDE_CWD, "Read", lambda path: {"file_path": path})


def codex() -> Script:
    """Codex CLI: `exec_command` running `cat <cwd>/notes.txt` (cwd from `<cwd>`)."""
    return CliScript(
        DIALECT_RESPONSES,
        _CODEX_CWD,
        "exec_command",
        lambda path: {"cmd": shlex.join(["cat", path])},
    )


def gemini_cli() -> Script:
    """Gemini CLI: `read_file` of `<cwd>/notes.txt` (cwd from its workspace directories)."""
    return CliScript(DIALECT_GEMINI, _GEMINI_CWD, "read_file", lambda path: {"file_path": path})


#: The MCP tool opencode's flow offers (server `dictionary`, tool `define`, as opencode names
#: it), called with the last word of the notes.
OPENCODE_MCP_TOOL = "dictionary_define"


def opencode() -> Script:
    """opencode (its built-in `openai` provider, Responses API): `read` of `<cwd>/notes.txt`
    (its `<env>` block names the cwd), then the MCP tool `dictionary_define` of the notes'
    last word. The session-title side call has no tools: `Ready.`"""
    return CliScript(
        DIALECT_RESPONSES,
        _OPENCODE_CWD,
        "read",
        lambda path: {"filePath": path},
        then=(OPENCODE_MCP_TOOL, lambda text: {"word": re.findall(r"\w+", text)[-1]}),
    )


def qwen_code() -> Script:
    """Qwen Code (`--auth-type openai`, Chat Completions): `read_file` of `<cwd>/notes.txt`
    (its startup context names the cwd)."""
    return CliScript(DIALECT_CHAT, _QWEN_CWD, "read_file", lambda path: {"file_path": path})


SCRIPTS: dict[str, Callable[[], Script]] = {
    "claude-code": claude_code,
    "codex": codex,
    "gemini-cli": gemini_cli,
    "opencode": opencode,
    "qwen-code": qwen_code,
}


#: The second message of the Claude Code conversation (tests/e2e/cli_agents/
#: claude-code-conversation): it asks again, and the answer comes from the history.
RECALL = "what was the secret word"
#: That answer starts with this; the tool result of turn 1 follows it.
RECALL_PREFIX = "As the notes said earlier:"


def claude_code_conversation() -> Script:
    """Claude Code over stream-json, two turns. Turn 1 as `claude_code()` (`Read` of
    `<cwd>/notes.txt`, then the notes); turn 2, whose message asks the word again, is
    answered from the history: the tool result turn 1 holds, with no tool call."""
    first = claude_code()

    def script(dialect: str, body: dict[str, Any]) -> Reply:
        if dialect == DIALECT_ANTHROPIC:
            conversation = conversation_of(dialect, body)
            asked = RECALL in conversation.last_user_text.lower()
            if asked and conversation.tool_results and "Read" in conversation.tools:
                earlier = _file_text(conversation.tool_results[-1])
                return Reply(text=f"{RECALL_PREFIX} {earlier}")
        return first(dialect, body)

    return script
