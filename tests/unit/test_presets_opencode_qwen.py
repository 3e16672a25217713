"""The `opencode` and `qwen-code` presets on their CLIs' own request text, without the CLIs.

Each request below is the shape the CLI sent (opencode 1.18.33 over the Responses API, Qwen
Code 0.24.4 over Chat Completions), cut to the parts that move between runs and some that do
not, written once on a laptop (the checkout under HOME) and once in CI (another path, HOME
beside it, a day later, the trace committed and a file added). With the preset the two
read the same; without any one of its rules they do not; a changed task still differs.
tests/e2e/test_cli_agents.py runs the real CLIs through the same story.
"""

from __future__ import annotations

import json
import posixpath
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from flowproof_cli.match.build import Declared, build_rules
from flowproof_cli.match.presets import load_preset
from flowproof_cli.match.rules import MatchRules

TASK = "Read notes.txt and tell me the secret word."


@dataclass(frozen=True)
class Machine:
    cwd: str
    home: str
    day: tuple[str, str]  # JavaScript's toDateString, and the long English form
    session: str
    files: tuple[str, ...]  # untracked files and what `git status` says of them
    commits: tuple[str, ...]


LAPTOP = Machine(
    "/home/ann/app",
    "/home/ann",
    ("Thu Dec 03 2026", "Thursday, December 3, 2026"),
    "ses_dbf80ebacffeHTC0YyHMPMhHMt",
    (),
    ("86b2143 A flow for the coding CLI",),
)
CI = Machine(
    "/ci/checkout",
    "/ci/home-ci",
    ("Fri Dec 04 2026", "Friday, December 4, 2026"),
    "ses_dba5a0cc4ffeKN0qUD3xuH1p0V",
    ("read-notes.trace.yaml", "scratch.txt"),
    ("2f2a75b Record the trace", "86b2143 A flow for the coding CLI"),
)


def opencode_request(at: Machine, task: str = TASK) -> dict[str, Any]:
    environment = (
        "You are OpenCode, You and the user share the same workspace.\n"
        "Here is some useful information about the environment you are running in:\n<env>\n"
        f"  Working directory: {at.cwd}\n  Workspace root folder: {at.cwd}\n"
        "  Is directory a git repo: yes\n  Platform: linux\n"
        f"  Today's date: {at.day[0]}\n</env>"
    )
    read = {"filePath": f"{at.cwd}/notes.txt"}
    output = (
        f"<path>{at.cwd}/notes.txt</path>\n<type>file</type>\n<content>\n"
        "1: The secret word is pelican.\n\n(End of file - total 1 lines)\n</content>"
    )
    return {
        "model": "gpt-5.5",
        "prompt_cache_key": at.session,
        "input": [
            {"role": "developer", "content": environment},
            {"role": "user", "content": [{"type": "input_text", "text": f'"{task}"'}]},
            {"type": "function_call", "name": "read", "arguments": json.dumps(read)},
            {"type": "function_call_output", "call_id": "call_1", "output": output},
        ],
    }


def qwen_request(at: Machine, task: str = TASK) -> dict[str, Any]:
    relative_home = posixpath.relpath(at.home, at.cwd)
    slug = at.cwd.replace("/", "-")
    status = "".join(f"git: ?? {name}\n" for name in at.files)
    commits = "".join(f"git: {commit}\n" for commit in at.commits)
    system = (
        "You are Qwen Code, a non-interactive CLI agent.\n\n"
        f"--- Context from: {relative_home}/.qwen/output-language.md ---\n"
        "# Output language preference: auto\n"
        f"--- End of Context from: {relative_home}/.qwen/output-language.md ---\n\n"
        "Git snapshot at conversation start.\n```text\ngit: Current branch: main\n"
        f"git: Status:\n{status}git: Recent commits:\n{commits}```\n\n"
        f"- USER memory: `{at.home}/.qwen/memories`\n"
        f"- PROJECT memory: `{at.home}/.qwen/projects/{slug}/memory`\n"
    )
    listing = "".join(f"├───{name}\n" for name in ("notes.txt", "read-notes.flow.yaml", *at.files))
    context = (
        "<system-reminder>\nThis is the Qwen Code. We are setting up the context for our chat.\n"
        f"Today's date is {at.day[1]}.\nMy operating system is: linux\n"
        f"I'm currently working in the directory: {at.cwd}\n"
        "Here is the folder structure of the current working directories:\n\n"
        f"Showing up to 20 items:\n\n{at.cwd}/\n{listing}└───.qwen/\n    └───settings.json\n"
        "</system-reminder>"
    )
    reminder = (
        f"<system-reminder>\nThe current date is: {at.day[1]}. Note: This is the "
        "authoritative current date.\n</system-reminder>"
    )
    parts = [context, reminder, task]
    call = {"name": "read_file", "arguments": json.dumps({"file_path": f"{at.cwd}/notes.txt"})}
    return {
        "model": "gpt-4o-mini",
        "messages": [
            {"role": "system", "content": system},
            {"role": "user", "content": [{"type": "text", "text": part} for part in parts]},
            {"role": "assistant", "tool_calls": [{"id": "c1", "function": call}]},
            {"role": "tool", "tool_call_id": "c1", "content": "The secret word is pelican.\n"},
        ],
    }


CLIS = {
    "opencode": ("openai-responses", opencode_request),
    "qwen-code": ("openai-chat", qwen_request),
}


def matched(preset: str, at: Machine, request: dict[str, Any], drop: int | None = None) -> Any:
    """`request` as the preset's rules store it on `at` (without rule `drop`, if given)."""
    rules, _ = build_rules([Declared("spec", presets=(preset,))], cwd=Path(at.cwd), home=at.home)
    kept = [rule for index, rule in enumerate(rules.rules) if index != drop]
    return MatchRules(kept, rules.relocation).matched(CLIS[preset][0], request)


@pytest.mark.parametrize("preset", sorted(CLIS))
def test_laptop_and_ci_read_the_same_with_the_preset(preset: str) -> None:
    build = CLIS[preset][1]
    assert matched(preset, LAPTOP, build(LAPTOP)) == matched(preset, CI, build(CI))


@pytest.mark.parametrize("preset", sorted(CLIS))
def test_every_rule_of_the_preset_is_needed(preset: str) -> None:
    build = CLIS[preset][1]
    for index, entry in enumerate(load_preset(preset).normalize):
        without = matched(preset, LAPTOP, build(LAPTOP), drop=index)
        assert without != matched(preset, CI, build(CI), drop=index), entry.pattern


@pytest.mark.parametrize("preset", sorted(CLIS))
def test_the_preset_needs_relocation(preset: str) -> None:
    assert load_preset(preset).relocate
    build = CLIS[preset][1]
    rules, _ = build_rules([Declared("spec", presets=(preset,))], cwd=Path("/"), home=None)
    bare = MatchRules(rules.rules)
    protocol = CLIS[preset][0]
    assert bare.matched(protocol, build(LAPTOP)) != bare.matched(protocol, build(CI))


@pytest.mark.parametrize("preset", sorted(CLIS))
def test_a_changed_task_still_differs(preset: str) -> None:
    build = CLIS[preset][1]
    edited = build(CI, TASK.replace("secret word", "secret animal"))
    assert matched(preset, LAPTOP, build(LAPTOP)) != matched(preset, CI, edited)


def test_qwen_code_names_home_from_the_checkout_in_either_form() -> None:
    """Laptop: HOME above the checkout (`../.qwen/...`); CI: beside it (`../home-ci/...`)."""
    for at in (LAPTOP, CI):
        system = matched("qwen-code", at, qwen_request(at))["messages"][0]["content"]
        assert "--- Context from: {cwd-to-home}/.qwen/output-language.md ---" in system


@pytest.mark.parametrize("preset", sorted(CLIS))
def test_the_preset_names_its_agent_and_the_versions_tested(preset: str) -> None:
    text = load_preset(preset).text
    agent = {"opencode": "agent: opencode", "qwen-code": "agent: QwenCode"}[preset]
    versions = {"opencode": '"1.18.33"', "qwen-code": '"0.24.4"'}[preset]
    assert agent in text and versions in text
