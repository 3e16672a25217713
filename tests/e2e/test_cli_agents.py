"""The coding CLIs, real, recorded once and replayed on "another machine".

Claude Code (`claude -p`), Codex CLI (`codex exec`), Gemini CLI (`gemini -p`), opencode
(`opencode run`, with an MCP server in its opencode.json) and Qwen Code (`qwen -p`) come from
the project's npm lockfile. Each runs only inside a fresh network namespace with nothing but
loopback (tests/e2e/cli_agents/scenario.py), against the scripted fake model of
tests/fakes/cli_scripts.py, which reads the checkout path from the CLI's own context and asks
for `<checkout>/notes.txt` by its absolute path.

Recorded in one checkout, HOME and day inside a git repository; replayed with no upstream
from a copy at another path, with another HOME, the trace committed and an untracked file
added, a day later, and from a git worktree of it. The flow's `match: {presets: [<cli>]}`
makes that replay pass; without it the same story diverges, and an edited task diverges with
the preset, naming the change. Re-recording in the new place stores the same requests.

Each CLI plays the story at two releases the lockfile installs, far enough apart that the
request layout changed (`scenario.VERSIONS`, the versions its preset names as tested): the
newest the whole story, the older one with its preset only, then its recording replayed by
the newest release, which diverges leading with the version change. Claude Code also plays a two-turn
conversation over stream-json (its `claude-code-conversation` folder): recorded, replayed
offline twice, and a changed second message diverges naming turn 2. The fast tests at the
end check the scripted model itself, and that the lockfile puts each CLI's own package on
PATH.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from flowproof_cli.match.presets import load_preset
from tests.conftest import computed_once
from tests.e2e.cli_agents.scenario import (
    BINARIES,
    CHANGED_SECOND_MESSAGE,
    CONVERSATION,
    EDITED_TASK,
    NODE_BIN,
    ORIGINAL_TASK,
    PACKAGES,
    SECOND_MESSAGE,
    VERSIONS,
    executable,
    libfaketime,
    newest,
)
from tests.fakes.cli_scripts import (
    ANSWER_PREFIX,
    OPENCODE_MCP_TOOL,
    RECALL_PREFIX,
    SCRIPTS,
    claude_code_conversation,
)
from tests.fakes.fake_upstream import Reply
from tests.namespace_run import run_captured

CLIS = ("claude-code", "codex", "gemini-cli", "opencode", "qwen-code")
#: Every story: each CLI at each release it is tested with.
STORIES = [(cli, version) for cli in CLIS for version in VERSIONS[cli]]
#: The product token of each CLI's User-Agent (its preset's `agent:`).
AGENTS = {
    "claude-code": "claude-cli",
    "codex": "codex_exec",
    "gemini-cli": "GeminiCLI",
    "opencode": "opencode",
    "qwen-code": "QwenCode",
}


def stored_agent(cli: str, version: str) -> str:
    """What a trace stores as the agent of the CLI's turns at `version`."""
    if cli == "gemini-cli" and version == "0.61.0":
        return f"GeminiCLI-tui/{version}"  # 0.61 sends GeminiCLI-tui/0.61.0/<model> (...)
    return f"{AGENTS[cli]}/{version}"


#: Where the same story without the preset first diverges: a volatile field of that CLI,
#: its recorded (laptop) and replayed (CI) values.
FIRST_VOLATILE = {
    # the auto-memory folder under HOME, in the system prompt
    "claude-code": ("(system) content", "laptop/home-ann/.claude/proj", "ci/home-ci/.claude/proj"),
    # the id Codex mints for every input item
    "codex": ("message 0 (developer) changed: id: recorded msg_", ", replayed msg_"),
    # the project's memory folder under HOME, in systemInstruction
    "gemini-cli": ("(system) content", "laptop/home-ann/.gemini/tmp/", "ci/home-ci/.gemini/tmp/"),
    # the checkout in the <env> block of the developer message (after the title call)
    "opencode": (
        "(developer) content",
        "Working directory: ",
        "laptop/opencode-bare",
        "ci/checkout-bare",
    ),
    # HOME named relative to the checkout, in the system prompt
    "qwen-code": (
        "(system) content",
        "Context from: ../home-ann/.qwen/",
        "Context from: ../home-ci/.qwen/",
    ),
}
#: Where that divergence may be, when not turn 1: opencode's session-title call holds no
#: <env> block (it matches), and it may come before or after the task's own request.
DIVERGING_TURNS = {"opencode": (1, 2)}
#: Where the task itself is first sent, when not in turn 1: Codex warms its WebSocket up
#: first (`generate: false`, its default transport), with the context but not the task.
TASK_TURNS = {"codex": 2}
#: Whichever test runs first runs the whole story of its CLI (six flowproof runs, each
#: starting the CLI) in the shared fixture: it gets the scenario's own limit.
STORY_SECONDS = 600
#: The MCP server a CLI's flow declares: its lane is recorded and replayed with the model's.
MCP_LANES = {"opencode": "mcp: dictionary 3 call(s)"}


def _why_not_runnable(cli: str, version: str, later_day: bool = True) -> str | None:
    if not executable(cli, version).exists():
        return (
            f"{BINARIES[cli]} {version} is not installed (run `npm ci` in tests/ for the "
            "lockfile's coding CLIs)"
        )
    if sys.platform != "linux" or os.geteuid() != 0:
        return "the coding CLIs run only in a loopback-only network namespace: needs Linux root"
    if shutil.which("unshare") is None or shutil.which("ip") is None:
        return "needs `unshare` (util-linux) and `ip` (iproute2) for the network namespace"
    if shutil.which("git") is None:
        return "needs git (the flows run inside a repository)"
    if later_day and cli != "codex" and libfaketime() is None:
        return "needs libfaketime (Debian package `faketime`) to replay on a later day"
    return None


def _run_scenario(cli: str, version: str, workdir: Path) -> dict[str, Any]:
    """The whole story for one CLI release, in a fresh loopback-only network namespace,
    with a private /dev/shm (where libfaketime keeps its clock, and leaves files behind)."""
    inner = (
        "mount -t tmpfs -o mode=1777 tmpfs /dev/shm && ip link set lo up && "
        f"exec {sys.executable} -m tests.e2e.cli_agents.scenario"
    )
    script = f'{inner} "$0" "$1" "$2"'
    command = ["unshare", "-n", "-m", "sh", "-c", script, cli, str(workdir), version]
    done = run_captured(command, timeout=STORY_SECONDS)
    assert done.returncode == 0, done.stderr[-3000:]
    outcome: dict[str, Any] = json.loads(done.stdout)
    return outcome


@dataclass(frozen=True)
class Story:
    cli: str
    version: str
    steps: dict[str, dict[str, Any]]  # see scenario.py: record, replay, edited_prompt, ...
    requests_unchanged: bool | None
    agents: list[str | None]  # the agent of each turn of the trace recorded first
    #: A conversation's: the conversation turn of each recorded model call
    conversation_turns: list[int | None] = field(default_factory=list)

    def step(self, name: str) -> dict[str, Any]:
        """One step's result; a clear failure when the scenario stopped before it."""
        if name not in self.steps:
            records = [
                self.steps[key] for key in ("record", "record_without_preset") if key in self.steps
            ]
            pytest.fail(
                f"the scenario stopped before `{name}` (a record failed):\n"
                + "\n".join(_explain(step) for step in records)
            )
        return self.steps[name]

    def exited(self, name: str, code: int) -> dict[str, Any]:
        """The step `name`, which must have exited with `code`."""
        step = self.step(name)
        assert step["code"] == code, _explain(step)
        return step

    def passed(self, name: str) -> dict[str, Any]:
        """The step `name`, which must have exited 0 printing its PASS line."""
        step = self.exited(name, 0)
        assert step["stdout"].startswith("PASS: "), _explain(step)
        return step


#: Each story once per test process, whichever fixture asks first.
_STORIES: dict[tuple[str, str], Story] = {}


def _story(cli: str, version: str, tmp_path_factory: pytest.TempPathFactory) -> Story:
    """The story's outcome, played once per session: whichever xdist worker asks first runs
    it (tens of seconds of CPU), any other reads that outcome (`computed_once`)."""
    reason = _why_not_runnable(cli, version)
    if reason is not None:
        pytest.skip(reason)
    if (cli, version) not in _STORIES:
        outcome = computed_once(
            tmp_path_factory,
            f"cli-story-{cli}-{version}",
            lambda: _run_scenario(cli, version, tmp_path_factory.mktemp(f"{cli}-{version}")),
        )
        _STORIES[cli, version] = Story(
            cli, version, outcome["steps"], outcome["requests_unchanged"], outcome["agents"]
        )
    return _STORIES[cli, version]


@pytest.fixture(scope="module", params=STORIES, ids=[f"{c}-{v}" for c, v in STORIES])
def story(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Story:
    """One run of the scenario per CLI release, shared by the tests below."""
    cli, version = request.param
    return _story(cli, version, tmp_path_factory)


@pytest.fixture(scope="module", params=CLIS)
def latest(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Story:
    """The story of each CLI's newest release (the whole story: bare and edited runs too)."""
    return _story(request.param, newest(request.param), tmp_path_factory)


#: The CLIs tested at more than one release (opencode and Qwen Code have one so far).
MULTI_RELEASE = [cli for cli in CLIS if len(VERSIONS[cli]) > 1]


@pytest.fixture(scope="module", params=MULTI_RELEASE)
def older(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Story:
    """The story of each CLI's older release (its recording then replayed by the newest)."""
    return _story(request.param, VERSIONS[request.param][0], tmp_path_factory)


def _spec_of(step: dict[str, Any]) -> str:
    """The spec path a step's run was given (its `flowproof record` hint names it)."""
    [path] = {word for word in step["stdout"].split() if word.endswith("read-notes.flow.yaml)")}
    return path[:-1]


def _explain(step: dict[str, Any]) -> str:
    return f"exit {step['code']}\n{step['stdout'][-4000:]}\n{step['stderr'][-3000:]}"


@pytest.mark.slow
@pytest.mark.timeout(STORY_SECONDS)
def test_the_flow_records_against_the_fake_model(story: Story) -> None:
    cli, record = story.cli, story.passed("record")
    assert f"(preset {cli})" in record["stdout"]  # the run says what it relaxed


@pytest.mark.slow
@pytest.mark.timeout(STORY_SECONDS)
def test_the_copy_replays_elsewhere_a_day_later_with_the_trace_committed(story: Story) -> None:
    replay = story.passed("replay")
    assert "relocate ({cwd}=" in replay["stdout"] and "/ci/checkout" in replay["stdout"]
    assert replay["day"] != story.step("record")["day"]  # the clock really moved across a day
    if story.cli in MCP_LANES:  # its tools/call answered from the trace, the server not started
        assert MCP_LANES[story.cli] in replay["stdout"], _explain(replay)


@pytest.mark.slow
def test_the_copy_replays_from_a_git_worktree(story: Story) -> None:
    """A coding CLI tells its model when it runs in a git worktree (Claude Code 2.1.332 adds
    two lines to its environment block): a trace recorded in a plain checkout replays."""
    story.passed("worktree")


@pytest.mark.slow
def test_the_recording_stores_the_agents_version_per_turn(story: Story) -> None:
    story.step("record")
    assert story.agents, "the trace holds no turn"
    assert set(story.agents) == {stored_agent(story.cli, story.version)}, story.agents


@pytest.mark.slow
@pytest.mark.timeout(STORY_SECONDS)
def test_an_edited_task_still_diverges_naming_the_change(latest: Story) -> None:
    story = latest
    edited = story.exited("edited_prompt", 1)
    turn = TASK_TURNS.get(story.cli, 1)
    assert f"divergence at turn {turn}" in edited["stdout"], _explain(edited)
    # (opencode `run` sends its message argument in double quotes)
    for side, task in (("recorded", ORIGINAL_TASK), ("replayed", EDITED_TASK)):
        named = re.compile(f'{side} "?Read notes.txt and {task}\\.')
        assert named.search(edited["stdout"]), _explain(edited)


@pytest.mark.slow
@pytest.mark.timeout(STORY_SECONDS)
def test_without_the_preset_the_same_story_diverges(latest: Story) -> None:
    story = latest
    bare = story.exited("without_preset", 1)
    turns = DIVERGING_TURNS.get(story.cli, (1,))
    assert any(f"divergence at turn {turn}:" in bare["stdout"] for turn in turns), _explain(bare)
    for fragment in FIRST_VOLATILE[story.cli]:
        assert fragment in bare["stdout"], _explain(bare)


@pytest.mark.slow
@pytest.mark.timeout(STORY_SECONDS)
def test_re_recording_elsewhere_leaves_the_stored_requests_unchanged(latest: Story) -> None:
    story = latest
    story.exited("rerecord", 0)
    assert story.requests_unchanged is True


@pytest.mark.slow
def test_the_newest_release_replaying_an_older_recording_leads_with_the_version(
    older: Story,
) -> None:
    """Each CLI's newest release sends other requests than its older one; replaying the
    older recording diverges, and the message says first that the agent changed version."""
    story = older
    replayed = story.exited("newer_release", 1)
    first, second = replayed["stdout"].splitlines()[:2]
    recorded = stored_agent(story.cli, story.version)
    now = stored_agent(story.cli, newest(story.cli))
    assert first.startswith("FAIL: "), _explain(replayed)
    assert first.endswith(
        f" - divergence at turn 1: the agent changed version: recorded {recorded}, replayed "
        f"{now}; re-record (flowproof record {_spec_of(replayed)})"
    ), _explain(replayed)
    assert second.startswith("      ") and "changed" in second  # then the field that moved


# -- Claude Code as a conversation (cli_agents/claude-code-conversation) -------------------


@pytest.fixture(scope="module")
def conversation(tmp_path_factory: pytest.TempPathFactory) -> Story:
    """Claude Code's newest release over stream-json, two turns: recorded, replayed twice
    offline from a copy elsewhere, and once with the second message changed."""
    version = newest("claude-code")
    reason = _why_not_runnable("claude-code", version, later_day=False)
    if reason is not None:
        pytest.skip(reason)
    outcome = computed_once(
        tmp_path_factory,
        "cli-story-claude-code-conversation",
        lambda: _run_scenario(CONVERSATION, version, tmp_path_factory.mktemp("conversation")),
    )
    story = Story(CONVERSATION, version, outcome["steps"], None, outcome["agents"])
    story.conversation_turns.extend(outcome["conversation_turns"])
    return story


@pytest.mark.slow
@pytest.mark.timeout(STORY_SECONDS)
def test_claude_code_records_a_conversation_turn_by_turn(conversation: Story) -> None:
    """Turn 1 reads notes.txt with `Read`, turn 2 answers from the history; each turn's
    assertions hold at record, and each recorded model call carries its turn."""
    conversation.passed("record")
    turns = conversation.conversation_turns
    assert turns[0] == 1 and turns[-1] == 2 and turns == sorted(turns), turns
    assert set(conversation.agents) == {stored_agent("claude-code", conversation.version)}


@pytest.mark.slow
@pytest.mark.timeout(STORY_SECONDS)
@pytest.mark.parametrize("replay", ["replay", "replay_again"])
def test_claude_code_replays_the_conversation_offline(conversation: Story, replay: str) -> None:
    conversation.passed(replay)


@pytest.mark.slow
@pytest.mark.timeout(STORY_SECONDS)
def test_a_changed_second_message_diverges_in_turn_2(conversation: Story) -> None:
    changed = conversation.exited("changed_turn_2", 1)
    first = changed["stdout"].splitlines()[0]
    assert f'divergence in conversation turn 2 ("{CHANGED_SECOND_MESSAGE}"), model call 1:' in (
        first
    ), _explain(changed)
    detail = f"recorded {SECOND_MESSAGE}, replayed {CHANGED_SECOND_MESSAGE}"
    assert detail in changed["stdout"], _explain(changed)


# -- the scripted model itself (fast: no CLI runs) ------------------------------------------

NOTES = "The secret word is pelican.\n"
#: The context's role and the tools offered, for the CLIs speaking the Responses API.
RESPONSES_SHAPES = {
    "codex": ("user", ["exec_command"]),
    "opencode": ("developer", ["read", OPENCODE_MCP_TOOL]),
}


def _first_request(cli: str, context: str) -> tuple[str, dict[str, Any]]:
    """A first request of `cli`'s shape whose context text is `context`."""
    if cli == "claude-code":
        message = {"role": "user", "content": [{"type": "text", "text": context}]}
        return "anthropic", {"messages": [message], "tools": [{"name": "Read", "input_schema": {}}]}
    if cli in ("codex", "opencode"):
        role, tools = RESPONSES_SHAPES[cli]
        item = {
            "type": "message",
            "role": role,
            "content": [{"type": "input_text", "text": context}],
        }
        return "responses", {
            "input": [item],
            "tools": [{"type": "function", "name": name} for name in tools],
        }
    if cli == "qwen-code":
        return "chat", {
            "messages": [{"role": "user", "content": [{"type": "text", "text": context}]}],
            "tools": [{"type": "function", "function": {"name": "read_file"}}],
        }
    declarations = [{"functionDeclarations": [{"name": "read_file"}]}]
    return "gemini", {
        "contents": [{"role": "user", "parts": [{"text": context}]}],
        "tools": declarations,
    }


def _with_tool_result(cli: str, body: dict[str, Any], output: str) -> dict[str, Any]:
    if cli == "claude-code":
        block = {"type": "tool_result", "tool_use_id": "t1", "content": f"1\t{output}"}
        return {**body, "messages": [*body["messages"], {"role": "user", "content": [block]}]}
    if cli in ("codex", "opencode"):
        framed = (
            f"Chunk ID: ab12\nWall time: 0.01 seconds\nOutput:\n{output}"
            if cli == "codex"
            else f"<path>/work/app/notes.txt</path>\n<type>file</type>\n<content>\n1: {output}"
            "\n(End of file - total 1 lines)\n</content>"
        )
        item = {"type": "function_call_output", "call_id": "c1", "output": framed}
        return {**body, "input": [*body["input"], item]}
    if cli == "qwen-code":
        message = {
            "role": "tool",
            "tool_call_id": "c1",
            "content": [{"type": "text", "text": output}],
        }
        return {**body, "messages": [*body["messages"], message]}
    part = {"functionResponse": {"name": "read_file", "response": {"output": output}}}
    return {**body, "contents": [*body["contents"], {"role": "user", "parts": [part]}]}


CONTEXTS = {
    "claude-code": " - Primary working directory: /work/app\n - Is a git repository: true",
    "codex": "<environment_context>\n  <cwd>/work/app</cwd>\n</environment_context>",
    "gemini-cli": "- **Workspace Directories:**\n  - /work/app\n- **Directory Structure:**",
    "opencode": "<env>\n  Working directory: /work/app\n  Workspace root folder: /work/app\n</env>",
    "qwen-code": "My operating system is: linux\nI'm currently working in the directory: /work/app\n",
}


EXPECTED_CALLS = {
    "claude-code": ("Read", {"file_path": "/work/app/notes.txt"}),
    "codex": ("exec_command", {"cmd": "cat /work/app/notes.txt"}),
    "gemini-cli": ("read_file", {"file_path": "/work/app/notes.txt"}),
    "opencode": ("read", {"filePath": "/work/app/notes.txt"}),
    "qwen-code": ("read_file", {"file_path": "/work/app/notes.txt"}),
}
DEFINITION = "pelican: a large water bird with a pouch under its beak"


@pytest.mark.parametrize("cli", CLIS)
def test_the_script_reads_the_notes_by_absolute_path_then_quotes_them(cli: str) -> None:
    script = SCRIPTS[cli]()
    dialect, body = _first_request(cli, CONTEXTS[cli])
    call = script(dialect, body)
    [(name, arguments)] = call.tool_calls
    assert (name, json.loads(arguments)) == EXPECTED_CALLS[cli]
    body = _with_tool_result(cli, body, NOTES)
    answer = script(dialect, body)
    if cli == "opencode":  # its MCP server's tool, with the notes' last word, then the answer
        [(name, arguments)] = answer.tool_calls
        assert (name, json.loads(arguments)) == (OPENCODE_MCP_TOOL, {"word": "pelican"})
        item = {"type": "function_call_output", "call_id": "c2", "output": DEFINITION}
        answer = script(dialect, {**body, "input": [*body["input"], item]})
        assert answer == Reply(text=f"{ANSWER_PREFIX} The secret word is pelican. {DEFINITION}")
        return
    assert answer == Reply(text=f"{ANSWER_PREFIX} The secret word is pelican.")


@pytest.mark.parametrize("cli", CLIS)
def test_the_script_calls_no_tool_without_a_working_directory(cli: str) -> None:
    dialect, body = _first_request(cli, "no context here")
    assert SCRIPTS[cli]()(dialect, body) == Reply(text="Ready.")


@pytest.mark.parametrize("cli", CLIS)
def test_each_preset_names_the_releases_its_story_plays(cli: str) -> None:
    preset = load_preset(cli)
    assert preset.agent == AGENTS[cli]
    assert preset.versions_tested == VERSIONS[cli]


@pytest.mark.parametrize("cli", CLIS)
def test_the_lockfile_puts_each_clis_own_package_on_path(cli: str) -> None:
    """The older releases are npm aliases that declare the same command: `npm ci` links
    the CLI's own package (npm links bins in path order, the scoped package first), but an
    incremental `npm install` of an alias can take the link, and the examples and docs call
    `tests/node_modules/.bin/<cli>`."""
    link = NODE_BIN / BINARIES[cli]
    if not link.exists():
        pytest.skip("tests/node_modules is not installed (`npm ci` in tests/)")
    assert link.resolve() == executable(cli).resolve(), (
        f"{link} is not {PACKAGES[cli]}'s: run `npm ci` in tests/"
    )


def test_the_script_refuses_another_dialect() -> None:
    dialect, body = _first_request("codex", CONTEXTS["codex"])
    assert SCRIPTS["claude-code"]()(dialect, body).status == 404


def test_the_conversation_script_answers_turn_2_from_the_history() -> None:
    script = claude_code_conversation()
    dialect, body = _first_request("claude-code", CONTEXTS["claude-code"])
    [(name, _)] = script(dialect, body).tool_calls
    assert name == "Read"
    body = _with_tool_result("claude-code", body, NOTES)
    assert script(dialect, body) == Reply(text=f"{ANSWER_PREFIX} The secret word is pelican.")
    answer = {"role": "assistant", "content": [{"type": "text", "text": "pelican"}]}
    asked = {"role": "user", "content": [{"type": "text", "text": SECOND_MESSAGE}]}
    body = {**body, "messages": [*body["messages"], answer, asked]}
    assert script(dialect, body) == Reply(text=f"{RECALL_PREFIX} The secret word is pelican.")
