"""Hostile input to the trace loader, and proof that `run` never rewrites a trace.

The property: whatever a trace file holds, loading it gives a Trace that the rest of
flowproof can use (show, diff, the trajectory, rendering) or a TraceError naming the file,
the line where there is one, and a fix; never another exception. The named cases are the
ones a probe found (each failed before its fix); hypothesis mutates the committed traces,
line by line and value by value, through the loader in-process; a few go through the CLI.
"""

from __future__ import annotations

import itertools
import shutil
import sys
from pathlib import Path

import pytest
import yaml
from hypothesis import strategies as st

from flowproof_cli.dialects import dialect_named
from flowproof_cli.errors import TraceError
from flowproof_cli.evidence.timeline import timeline
from flowproof_cli.spec.yaml_limits import MAX_TRACE_BYTES, MAX_TRACE_DEPTH
from flowproof_cli.trace import Trace
from flowproof_cli.trace.envelope import other_flow_note
from flowproof_cli.trace.storage import dumps, load, loads
from tests.conftest import REPO, run_cli
from tests.e2e.flows import write_flow
from tests.fakes.fake_upstream import FakeUpstream
from tests.falsifiability import hostile_yaml as hostile

TRACE_FILES = sorted([*REPO.glob("examples/*/*.trace.yaml"), *REPO.glob("specs/*.trace.yaml")])
CHAT = REPO / "specs" / "chat.trace.yaml"
BASE = CHAT.read_text(encoding="utf-8")
#: The one refusal that names no fix: the file is no trace at all.
NOT_A_TRACE = "not a flowproof trace (no 'flowproof_trace' version key)"


def refused(text: str, source: str = "x.trace.yaml") -> str:
    """The message of the TraceError `loads` raises: the file first, and a fix."""
    with pytest.raises(TraceError) as info:
        loads(text, source)
    message = str(info.value)
    assert message.startswith(source), message
    assert "Fix:" in message, message
    return message


def edited(old: str, new: str, text: str = BASE) -> str:
    assert old in text, old
    return text.replace(old, new, 1)


def line_of(text: str, fragment: str) -> int:
    return text[: text.index(fragment)].count("\n") + 1


def usable(trace: Trace, source: str) -> None:
    """What show, diff, the judge and a re-record do with a loaded trace: none may crash.
    (Rendering a hand-edited body at replay is the model boundary's: it answers any failure
    with a flowproof error that fails the flow, see test_boundary_fail_closed.py.)"""
    timeline(trace, source)
    dumps(trace)
    for number, turn in enumerate(trace.turns, start=1):
        dialect = dialect_named(turn.protocol)
        dialect.outline(turn.request)
        if turn.status == 200 and isinstance(turn.response, dict):
            dialect.assistant_turn(turn.request, turn.response, number)


def loads_or_refuses(text: str) -> None:
    """The hostile-input property: a usable Trace, or a TraceError with the file and a fix."""
    try:
        trace = loads(text, "h.trace.yaml")
    except TraceError as error:
        message = str(error)
        assert message.startswith("h.trace.yaml"), message
        assert "Fix:" in message or NOT_A_TRACE in message, message
    else:
        usable(trace, "h.trace.yaml")


# --- the cases the probe found ---------------------------------------------------------

_HEAD_END = BASE.index("turns:")


@pytest.mark.parametrize(
    ("text", "fragment", "words"),
    [
        (BASE[:_HEAD_END] + "turns: 5\nend_of_trace: true\n", "turns: 5", "`turns` must be a list"),
        (
            edited("mocks:\n  get_time:", "mocks: [1]\nxmocks:\n  get_time:"),
            "mocks: [1]",
            "`mocks`",
        ),
        (
            edited("flowproof_trace: 2", "flowproof_trace: true"),
            "flowproof_trace",
            "format version",
        ),
        (edited("flowproof_trace: 2", "flowproof_trace: 2.0"), "flowproof_trace", "format version"),
        (edited("flow: Chat", "flow: [Chat]\nxflow: Chat"), "flow: [", "`flow`"),
        (edited("- request:\n", "- request: [1]\n  xrequest:\n"), "- request: [1]", "`request`"),
        (edited("    status: 200", "    status: '200'"), "- request:", "`response.status`"),
        (edited("    status: 200", "    status: true"), "- request:", "`response.status`"),
        (edited("- request:\n", "- protocol: 5\n  request:\n"), "- protocol: 5", "protocol"),
        (
            edited("- request:\n", "- protocol: bogus\n  request:\n"),
            "- protocol: bogus",
            "protocol",
        ),
    ],
    ids=[
        "turns-5",
        "mocks-list",
        "version-true",
        "version-float",
        "flow-list",
        "request-list",
        "status-text",
        "status-bool",
        "protocol-int",
        "protocol-unknown",
    ],
)
def test_hand_edited_wrong_types_are_refused_at_their_line(
    text: str, fragment: str, words: str
) -> None:
    message = refused(text)
    assert message.startswith(f"x.trace.yaml:{line_of(text, fragment)}: "), message
    assert words in message


_BODY = "      choices:\n      - finish_reason: tool_calls\n        index: 0\n"


@pytest.mark.parametrize(
    ("old", "new"),
    [
        (
            "        message:\n          annotations: []",
            "        message: 5\n        xmessage:\n          annotations: []",
        ),
        (
            "          tool_calls:\n          - function:",
            "          tool_calls: 5\n          xtool_calls:\n          - function:",
        ),
        ("- request:\n    messages:\n", "- request:\n    messages: 5\n    xmessages:\n"),
        (
            '          - function:\n              arguments: \'{"city"',
            '          - function: x\n            xfunction:\n              arguments: \'{"city"',
        ),
    ],
    ids=["message-5", "tool-calls-5", "messages-5", "function-text"],
)
def test_an_edited_body_its_dialect_cannot_read_is_refused_at_its_turn(old: str, new: str) -> None:
    text = edited(old, new)
    message = refused(text)
    assert message.startswith(f"x.trace.yaml:{line_of(text, '- request:')}: turn 1"), message
    assert "openai-chat" in message


def test_a_tool_call_id_that_is_not_text_is_refused_at_its_turn() -> None:
    text = edited("            id: call_", "            id: [1]\n            xid: call_")
    message = refused(text)
    assert message.startswith(f"x.trace.yaml:{line_of(text, '- request:')}: turn 1"), message
    assert "is [1], not text" in message


def test_a_tool_result_id_that_is_not_text_still_shows() -> None:
    """Found by the mutation property: `flowproof show` keyed a dict by the edited id."""
    anthropic = (REPO / "specs" / "anthropic.trace.yaml").read_text(encoding="utf-8")
    text = edited("tool_use_id: toolu_", "tool_use_id: [1]\n        x: toolu_", anthropic)
    lines = timeline(loads(text), "a.trace.yaml")
    assert any(line.strip().startswith("tool result: ") for line in lines)
    gemini = (REPO / "specs" / "gemini.trace.yaml").read_text(encoding="utf-8")
    text = edited("name: get_time\n          response:", "name: [1]\n          response:", gemini)
    lines = timeline(loads(text), "g.trace.yaml")
    assert any(line.strip().startswith("tool result: ") for line in lines)


@pytest.mark.parametrize(
    ("text", "key"),
    [
        (edited("flowproof_trace: 2", "flowproof_trace: 2\nflow: dup"), "flow"),
        (edited("    model: gpt-4o-mini", "    model: gpt-4o-mini\n    model: gpt-4o"), "model"),
        (BASE + BASE[_HEAD_END:], "turns"),
        (edited("flowproof_trace: 2", "flowproof_trace: 2\nmocks: {}"), "mocks"),
    ],
    ids=["top-level", "inside-a-turn", "turns-twice", "head-key-twice"],
)
def test_a_key_written_twice_is_refused(text: str, key: str) -> None:
    message = refused(text)
    assert f"the key `{key}` is written twice" in message


@pytest.mark.parametrize("cut", [0.3, 0.5, 0.77, 0.99])
def test_a_trace_cut_mid_line_is_refused_as_truncated(tmp_path: Path, cut: float) -> None:
    text = BASE[: int(len(BASE) * cut)]
    text = text if not text.endswith("\n") else text[:-1]
    path = tmp_path / "cut.trace.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(TraceError) as info:
        load(path)
    message = str(info.value)
    assert message.startswith(f"{path}:{text.count(chr(10)) + 1}: ")
    assert "truncated" in message and "Fix:" in message


def test_a_trace_cut_at_a_turn_boundary_without_its_response_is_refused() -> None:
    """Version 2 says it was cut short (its end line is gone); version 1, which has no end
    line, names the turn that lost its response."""
    text = BASE[: BASE.index("  response:")]
    assert "was cut short" in refused(text)
    message = refused(text.replace("flowproof_trace: 2", "flowproof_trace: 1"))
    assert "turn 1" in message and "`response`" in message


@pytest.mark.parametrize(
    ("section", "words"),
    [
        ("mcp:\n  s: {calls: 5}\n", "`calls`"),
        ("mcp:\n  s: {calls: [], server: 5}\n", "`server`"),
        ("mcp:\n  s: {calls: [x]}\n", "call 1"),
        ("mcp:\n  s: {calls: [{params: {}}]}\n", "call 1"),
        ("mcp:\n  s: {calls: [{method: 5}]}\n", "call 1"),
    ],
    ids=["calls-5", "server-5", "call-text", "call-no-method", "method-5"],
)
def test_a_broken_mcp_lane_is_refused_at_its_server(section: str, words: str) -> None:
    text = BASE + section
    message = refused(text)
    assert message.startswith(f"x.trace.yaml:{line_of(text, '  s: ')}: "), message
    assert "MCP lane 's'" in message and words in message


def test_an_alias_bomb_in_a_trace_is_refused_without_expanding_it() -> None:
    text = edited("mocks:\n", "mocks:\n" + hostile.alias_bomb(12, "  "))
    assert "alias bomb" in refused(text)
    turn = edited(
        "    model: gpt-4o-mini\n", "    model: gpt-4o-mini\n" + hostile.alias_bomb(12, "    ")
    )
    assert "alias bomb" in refused(turn)


def test_nesting_beyond_the_limit_is_refused_at_its_line() -> None:
    deep = "[" * 900 + "]" * 900
    for text in (
        edited("mocks:\n", f"nested: {deep}\nmocks:\n"),
        edited("    model: gpt", f"    deep: {deep}\n    model: gpt"),
    ):
        message = refused(text)
        assert f"deeper than {MAX_TRACE_DEPTH} levels" in message
        assert message.startswith(f"x.trace.yaml:{line_of(text, deep)}: "), message


@pytest.mark.parametrize("character", ["\x00", "\x1b", "\x7f"])
def test_a_control_character_is_refused_at_its_line_after_non_ascii_text(character: str) -> None:
    text = edited("    model: gpt-4o-mini", f"    model: gpt-4o-mini-{character}")
    text = text.replace("Kyoto right now", "Kyōto — ünïcödé right now")
    message = refused(text)
    assert message.startswith(f"x.trace.yaml:{line_of(text, character)}: the character U+00"), (
        message
    )


@pytest.mark.parametrize(
    ("value", "words"),
    [
        ("!!int x", "cannot be read as `!!int`"),
        ("!!python/object/apply:os.system [true]", "is not allowed"),
    ],
)
def test_tags_are_refused_at_their_line(value: str, words: str) -> None:
    text = edited("    model: gpt-4o-mini", f"    model: {value}")
    message = refused(text)
    assert message.startswith(f"x.trace.yaml:{line_of(text, value)}: "), message
    assert words in message


def test_a_trace_that_is_not_utf8_is_refused_at_its_line(tmp_path: Path) -> None:
    path = tmp_path / "latin.trace.yaml"
    path.write_bytes(BASE.replace("Kyoto right now", "Ky\xf6to right now").encode("latin-1"))
    with pytest.raises(TraceError) as info:
        load(path)
    message = str(info.value)
    line = line_of(BASE, "Kyoto right now")
    assert message.startswith(f"{path}:{line}: not UTF-8 text: byte 0xf6"), message
    assert "Fix:" in message


def test_a_huge_trace_is_refused_before_it_is_read(tmp_path: Path) -> None:
    path = tmp_path / "huge.trace.yaml"
    with path.open("wb") as stream:  # sparse: nothing is written but the size
        stream.truncate(MAX_TRACE_BYTES + 1)
    with pytest.raises(TraceError) as info:
        load(path)
    assert f"the limit is {MAX_TRACE_BYTES >> 20} MiB" in str(info.value)
    assert "Fix:" in str(info.value)


def test_a_fifo_trace_is_refused_without_waiting_for_a_writer(tmp_path: Path) -> None:
    error = hostile.load_a_fifo(load, tmp_path / "pipe.trace.yaml", "a FIFO trace")
    assert isinstance(error, TraceError)
    assert "not a regular file" in str(error)


def test_every_committed_trace_still_loads() -> None:
    for path in TRACE_FILES:
        usable(load(path), str(path))


def test_a_trace_of_another_flow_is_named_when_the_replay_fails() -> None:
    trace = loads(BASE)
    assert other_flow_note(trace, trace.flow, "t.trace.yaml") is None
    note = other_flow_note(trace, "Another flow", "t.trace.yaml")
    assert note == (
        f"t.trace.yaml was recorded for the flow `{trace.flow}`, not `Another flow`: is it the "
        "trace of another flow? Fix: replay this flow's own trace, or re-record it; if you "
        "only renamed the flow, set `flow: Another flow` in the trace"
    )


# --- properties ------------------------------------------------------------------------

_TEXTS = [path.read_text(encoding="utf-8") for path in TRACE_FILES]
_TRACE_KEYS = [
    *("turns", "request", "response", "status", "body", "protocol", "mocks", "calls"),
    *("server", "method", "params", "result", "error", "choices", "message", "content"),
    *("tool_calls", "function", "messages", "after"),
]
_DOCUMENTS = [yaml.safe_load(text) for text in _TEXTS]
_TRACE_LEAVES = ["openai-chat", "anthropic", "gemini", "tools/call", "200", "", "-"]
_TREES = hostile.yaml_trees(_TRACE_LEAVES, _TRACE_KEYS, text=20, width=4, key_text=6, leaves=20)


_SNIPPETS = st.sampled_from(
    [*hostile.YAML_SNIPPETS, "!!binary ", "turns:\n", "flowproof_trace: 2\n"]
)


@st.composite
def mutated_texts(draw: st.DrawFn) -> str:
    """A committed trace's text with lines dropped, repeated or swapped, characters or
    snippets inserted, or the end cut off."""
    lines = draw(st.sampled_from(_TEXTS)).splitlines(keepends=True)
    for _ in range(draw(st.integers(1, 3))):
        at = draw(st.integers(0, len(lines) - 1))
        action = draw(st.sampled_from(["drop", "repeat", "swap", "insert", "cut"]))
        if action == "drop":
            del lines[at]
        elif action == "repeat":
            lines.insert(at, lines[at])
        elif action == "swap":
            other = draw(st.integers(0, len(lines) - 1))
            lines[at], lines[other] = lines[other], lines[at]
        elif action == "insert":
            column = draw(st.integers(0, len(lines[at])))
            snippet = draw(st.one_of(_SNIPPETS, st.text(max_size=5)))
            lines[at] = lines[at][:column] + snippet + lines[at][column:]
        else:
            lines = lines[:at]
        if not lines:
            break
    return "".join(lines)


#: A committed trace with one or two values replaced by random YAML, in the layout the writer
#: uses (so the turn-by-turn reader, not only the whole parse, meets it).
_MUTATED_DOCUMENTS = hostile.mutated_documents(_DOCUMENTS, _TREES, edits=2, width=1 << 30)


test_mutated_traces_load_usably_or_are_refused = hostile.loads_or_refuses_test(
    _MUTATED_DOCUMENTS, loads_or_refuses
)


test_mutated_trace_texts_load_usably_or_are_refused = hostile.loads_or_refuses_test(
    mutated_texts(), loads_or_refuses
)


test_random_text_and_trees_load_usably_or_are_refused = hostile.loads_or_refuses_test(
    st.one_of(st.text(max_size=200), _TREES.map(lambda tree: yaml.safe_dump(tree))),
    loads_or_refuses,
)


# --- through the real CLI: refusals, and `run` never rewrites a trace -------------------


def _chat_flow(folder: Path, prompt: str = "in Kyoto right now") -> Path:
    """specs/chat.flow.yaml and its trace in `folder`, its agent run by this Python."""
    agent = REPO / "examples" / "agent-demo" / "weather_agent.py"
    text = (REPO / "specs" / "chat.flow.yaml").read_text(encoding="utf-8")
    text = text.replace(
        "python ../examples/agent-demo/weather_agent.py", f"{sys.executable} {agent}"
    )
    spec = folder / "chat.flow.yaml"
    spec.write_text(text.replace("in Kyoto right now", prompt), encoding="utf-8")
    shutil.copy(CHAT, folder / "chat.trace.yaml")
    return spec


_CLI_TRACES = {
    "turns-5": BASE[:_HEAD_END] + "turns: 5\n",
    "mocks-list": edited("mocks:\n  get_time:", "mocks: [1]\nxmocks:\n  get_time:"),
    "message-5": edited(
        "        message:\n          annotations: []",
        "        message: 5\n        xmessage:\n          annotations: []",
    ),
    "duplicate": edited("flowproof_trace: 2", "flowproof_trace: 2\nflow: dup"),
    "truncated": BASE[: len(BASE) // 2].rstrip("\n"),
}


@pytest.mark.slow
@pytest.mark.parametrize("case", list(_CLI_TRACES))
def test_run_show_and_diff_refuse_a_broken_trace_with_exit_2(tmp_path: Path, case: str) -> None:
    spec = _chat_flow(tmp_path)
    trace = tmp_path / "chat.trace.yaml"
    trace.write_text(_CLI_TRACES[case], encoding="utf-8")
    before = trace.stat().st_mtime_ns
    for args in (("run", spec), ("show", trace), ("diff", CHAT, trace)):
        result = run_cli(*args)
        hostile.refused_by_the_cli(result, f"error: {trace}", note=args)
        assert "Fix:" in result.stderr
    assert trace.read_text(encoding="utf-8") == _CLI_TRACES[case]
    assert trace.stat().st_mtime_ns == before


@pytest.mark.slow
def test_run_never_rewrites_the_trace_it_replays(tmp_path: Path) -> None:
    """A passing replay, a failing one (an edited prompt diverges) and a directory run: the
    trace keeps its bytes and its mtime."""
    spec = _chat_flow(tmp_path)
    trace = tmp_path / "chat.trace.yaml"
    original, mtime = trace.read_bytes(), trace.stat().st_mtime_ns
    passing = run_cli("run", spec)
    assert passing.code == 0, passing.output
    spec.write_text(spec.read_text().replace("in Kyoto right now", "in Quito now"))
    failing = run_cli("run", spec)
    assert failing.code == 1 and "divergence at turn 1" in failing.stdout, failing.output
    directory = run_cli("run", tmp_path)
    assert directory.code == 1, directory.output
    assert trace.read_bytes() == original
    assert trace.stat().st_mtime_ns == mtime
    assert sorted(p.name for p in tmp_path.iterdir() if "trace" in p.name) == ["chat.trace.yaml"]


@pytest.mark.slow
def test_a_failing_replay_names_a_trace_of_another_flow(tmp_path: Path) -> None:
    spec = _chat_flow(tmp_path, prompt="in Quito now")
    trace = tmp_path / "chat.trace.yaml"
    trace.write_text(BASE.replace("flow: Chat Completions", "flow: Someone else's", 1))
    result = run_cli("run", spec)
    assert result.code == 1, result.output
    assert "was recorded for the flow `Someone else's agent (openai SDK)" in result.stdout
    assert "is it the trace of another flow?" in result.stdout


# --- whole lines cut off the end, and interim statuses ---------------------------------------

#: The traces of the repository as this flowproof writes them now (version 2).
REWRITTEN = {str(path.relative_to(REPO)): dumps(load(path)) for path in TRACE_FILES}


#: Every cut in a trace up to this many lines; in a longer one (Claude Code's, 1,234 lines,
#: each cut a whole load), the first and last of them and as many spread between.
EVERY_CUT_UP_TO = 300


def _cuts(count: int) -> list[int]:
    """How many lines to keep, from 1 to all but the last."""
    if count <= EVERY_CUT_UP_TO:
        return list(range(1, count))
    edge = EVERY_CUT_UP_TO // 3
    spread = range(edge, count - edge, -(-(count - 2 * edge) // edge))  # at most `edge` of them
    return sorted({*range(1, edge), *spread, *range(count - edge, count)})


def test_a_long_trace_is_cut_at_both_ends_and_across() -> None:
    assert _cuts(5) == [1, 2, 3, 4]
    cuts = _cuts(1234)
    assert cuts[:3] == [1, 2, 3] and cuts[-3:] == [1231, 1232, 1233]
    assert len(cuts) <= EVERY_CUT_UP_TO and max(b - a for a, b in itertools.pairwise(cuts)) <= 12


@pytest.mark.parametrize("name", sorted(REWRITTEN))
def test_every_cut_at_a_line_end_is_refused_as_cut_short(name: str) -> None:
    """Whole lines cut off the end (a partial copy, a merge): from one line to all but the
    last, every cut is refused at the line it ends on (spread over a long trace: `_cuts`).
    Before the end line, up to 21 lines with `usage` fields could go and the trace still
    replayed green."""
    lines = REWRITTEN[name].splitlines(keepends=True)
    for kept in _cuts(len(lines)):
        text = "".join(lines[:kept])
        if "flowproof_trace" not in text:  # only the header comment is left
            with pytest.raises(TraceError, match="not a flowproof trace"):
                loads(text, name)
            continue
        message = refused(text, name)
        assert message.startswith(f"{name}:{kept}: the trace does not end with "), message
        assert "`end_of_trace: true`, so it was cut short" in message


def test_a_version_1_trace_without_an_end_line_still_loads() -> None:
    """Written before version 2 (the committed traces were, until rewritten)."""
    version_1 = edited("flowproof_trace: 2", "flowproof_trace: 1").replace(
        "end_of_trace: true\n", ""
    )
    assert "end_of_trace" not in version_1 and loads(version_1).turns


def test_an_end_line_that_is_not_true_is_refused() -> None:
    text = REWRITTEN["specs/chat.trace.yaml"].replace("end_of_trace: true", "end_of_trace: maybe")
    assert "`end_of_trace` is 'maybe'; flowproof writes `end_of_trace: true`" in refused(text)


@pytest.mark.parametrize("status", [100, 101, 103, 199])
def test_an_interim_status_is_refused_at_its_turn(status: int) -> None:
    text = edited("    status: 200", f"    status: {status}", REWRITTEN["specs/chat.trace.yaml"])
    message = refused(text)
    assert message.startswith(f"x.trace.yaml:{line_of(text, '- request:')}: turn 1 is malformed")
    assert f"its `response.status` is {status}, an interim (1xx) status, not an answer" in message


def _recorded(folder: Path) -> tuple[Path, Path]:
    """A flow recorded through the CLI against the fake model (its answers carry `usage`)."""
    spec = write_flow(folder, timeout=30)  # a bound on a regression; the refusal is at load
    with FakeUpstream() as fake:
        result = run_cli("record", spec, env={"FLOWPROOF_AGENT_UPSTREAM": f"{fake.base_url}/v1"})
    assert result.code == 0, result.output
    return spec, spec.with_name("weather.trace.yaml")


@pytest.mark.slow
@pytest.mark.parametrize("lines", [1, 8, 21])
def test_run_refuses_a_recorded_trace_with_lines_cut_off_its_end(
    tmp_path: Path, lines: int
) -> None:
    spec, trace = _recorded(tmp_path)
    kept = trace.read_text(encoding="utf-8").splitlines(keepends=True)[:-lines]
    trace.write_text("".join(kept), encoding="utf-8")
    result = run_cli("run", spec)
    hostile.refused_by_the_cli(result, f"error: {trace}:{len(kept)}: the trace does not end with ")
    assert "so it was cut short" in result.stderr


@pytest.mark.slow
def test_run_refuses_a_recorded_interim_status_instead_of_waiting(tmp_path: Path) -> None:
    """A recorded `status: 100` made the agent wait for the answer after it, until the
    flow's timeout."""
    spec, trace = _recorded(tmp_path)
    text = trace.read_text(encoding="utf-8")
    trace.write_text(text.replace("    status: 200\n", "    status: 100\n", 1), encoding="utf-8")
    result = run_cli("run", spec)
    first = text.splitlines().index("- request:") + 1
    hostile.refused_by_the_cli(result, f"error: {trace}:{first}: turn 1 is malformed: ")
    assert "`response.status` is 100, an interim (1xx) status" in result.stderr
