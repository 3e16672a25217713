"""The coding CLIs' presets on the request layouts of the releases they name, and in a git
worktree: Claude Code 2.1.197 puts its git status and environment block in the system prompt
where 2.1.332 sends them among the messages, and 2.1.332 adds two lines to its environment
block in a git worktree (the committed example trace was recorded in a plain checkout).
The real CLIs play the same stories in tests/e2e/test_cli_agents.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from flowproof_cli.match.build import Declared, build_rules
from flowproof_cli.match.rules import MatchRules


def _anthropic(prompt: str) -> dict[str, Any]:
    return {
        "model": "claude-opus-5-5",
        "max_tokens": 64,
        "messages": [{"role": "user", "content": prompt}],
    }


ENVIRONMENT = (
    "# Environment\nYou have been invoked in the following environment: \n"
    " - Primary working directory: {checkout}\n{worktree}"
    " - Is a git repository: true\n - Platform: linux\n - Shell: {shell}\n"
    " - OS Version: {os}\n - You are powered by the model named Opus 4.8.\n"
)
WORKTREE = (
    " - This is a git worktree \u2014 an isolated copy of the repository. Run all commands "
    "from this directory. Do NOT `cd` to the original repository root.\n"
    " - The git stash stack is shared with the main checkout and all other worktrees, and "
    "other Claude sessions may push or pop it concurrently. Never use bare `git stash`.\n"
)
GIT_STATUS_197 = (
    "\n\ngitStatus: This is the git status at the start of the conversation. Note that this "
    "status is a snapshot in time, and will not update during the conversation.\n\n"
    "Current branch: {branch}\n\nMain branch (you will usually use this for PRs): main\n\n"
    "Status:\n{status}\n\nRecent commits:\n{commits}"
)


def _request_197(checkout: str, *, worktree: bool, branch: str, status: str) -> dict[str, Any]:
    """A 2.1.197-shaped first request: the environment block and the git status at the end
    of the third system text."""
    environment = ENVIRONMENT.format(
        checkout=checkout,
        worktree=WORKTREE if worktree else "",
        shell="bash" if worktree else "unknown",
        os="Linux 6.18.44" if worktree else "Linux 6.1.0",
    )
    git = GIT_STATUS_197.format(branch=branch, status=status, commits="39e209a A flow")
    system = [
        {"type": "text", "text": "x-anthropic-billing-header: cc_version=2.1.197.5b8;"},
        {"type": "text", "text": "You are a Claude agent."},
        {"type": "text", "text": f"Be brief.\n\n{environment}\nWhen you act, act.{git}"},
    ]
    return {**_anthropic("Read notes.txt"), "system": system}


def _claude_preset(checkout: str) -> MatchRules:
    rules, _ = build_rules(
        [Declared("spec", presets=("claude-code",))], cwd=Path(checkout), home="/home/ann"
    )
    return rules


def test_claude_code_2_1_197_git_status_in_the_system_prompt_is_normalized() -> None:
    laptop = _claude_preset("/home/ann/app").matched(
        "anthropic",
        _request_197("/home/ann/app", worktree=False, branch="main", status="(clean)"),
    )
    ci = _claude_preset("/ci/copy").matched(
        "anthropic",
        _request_197("/ci/copy", worktree=True, branch="HEAD", status="?? scratch.txt"),
    )
    assert laptop == ci
    text = laptop["system"][2]["text"]
    assert text.endswith("will not update during the conversation.\n\n<git status>")
    assert " - Shell: <shell>\n - OS Version: <os version>\n" in text
    assert "worktree" not in text and "Primary working directory: {cwd}\n" in text


def test_the_197_git_status_rule_stops_at_the_next_section_of_the_system_context() -> None:
    rules = _claude_preset("/home/ann/app")
    request = _request_197("/home/ann/app", worktree=False, branch="main", status="(clean)")
    request["system"][2]["text"] += "\n\nperforceMode: This is a Perforce workspace."
    text = rules.matched("anthropic", request)["system"][2]["text"]
    assert text.endswith("\n\n<git status>\n\nperforceMode: This is a Perforce workspace.")


def test_claude_code_2_1_332_environment_block_in_a_worktree_equals_a_plain_checkout() -> None:
    """The committed example trace was recorded in a plain checkout: replayed from a git
    worktree, Claude Code 2.1.332 adds two lines to the environment block (a system message
    among the messages)."""

    def request(checkout: str, worktree: bool) -> dict[str, Any]:
        block = ENVIRONMENT.format(
            checkout=checkout, worktree=WORKTREE if worktree else "", shell="bash", os="L"
        )
        body = _anthropic("Read notes.txt")
        body["messages"].append({"role": "system", "content": [{"type": "text", "text": block}]})
        return body

    plain = _claude_preset("/home/ann/app").matched("anthropic", request("/home/ann/app", False))
    worktree = _claude_preset("/w/wt").matched("anthropic", request("/w/wt", True))
    assert plain == worktree
    # the rule maps its output to itself (a stored request is rewritten to the same)
    rules = _claude_preset("/w/wt")
    assert rules.matched("anthropic", worktree) == worktree


def _gemini_request(skills: list[str]) -> dict[str, Any]:
    listed = "".join(
        f"\n  <skill>\n    <name>{name}</name>\n    <description>Use it.</description>\n"
        f"    <location>/x/node_modules/@google/gemini-cli/bundle/builtin/{name}/SKILL.md"
        "</location>\n  </skill>"
        for name in skills
    )
    text = f"You are Gemini CLI.\n<available_skills>{listed}\n</available_skills>\nBe brief."
    return {
        "model": "gemini-2.5-flash",
        "contents": [{"role": "user", "parts": [{"text": "Read notes.txt"}]}],
        "systemInstruction": {"parts": [{"text": text}]},
    }


def test_gemini_cli_lists_antigravity_support_in_some_runs_only_and_that_is_normalized() -> None:
    rules, _ = build_rules([Declared("spec", presets=("gemini-cli",))], cwd=Path("/w"), home="/h")
    with_it = rules.matched("gemini", _gemini_request(["antigravity-support", "skill-creator"]))
    without = rules.matched("gemini", _gemini_request(["skill-creator"]))
    assert with_it == without
    other = rules.matched("gemini", _gemini_request(["skill-creator", "pdf-reader"]))
    assert other != without  # another skill listed is still a change
