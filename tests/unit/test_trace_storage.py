"""Trace files: deterministic, reviewable YAML, versioned, written atomically."""

from __future__ import annotations

import difflib
import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from flowproof_cli.cassette import Turn
from flowproof_cli.errors import TraceError
from flowproof_cli.process import commit_staged, discard_staged, stage, write_atomic
from flowproof_cli.trace import FORMAT_VERSION, Trace, load, loads, save, trace_path_for
from flowproof_cli.trace.envelope import from_document
from flowproof_cli.trace.storage import HEADER, check_writable, dumps

SYSTEM_PROMPT = (
    "You are a careful weather assistant.\n"
    "Always call get_weather before answering.\n"
    "Answer in one short sentence.\n"
    "Never invent a temperature.\n"
    "Say which city you looked up."
)


def make_trace(system_prompt: str = SYSTEM_PROMPT, *, protocol: str = "openai-chat") -> Trace:
    request = {
        "model": "gpt-4o-mini",
        "temperature": 0,
        "messages": [
            {"role": "system", "content": system_prompt},
            {"role": "user", "content": "Weather in Nairobi?"},
        ],
    }
    response = {
        "id": "chatcmpl-1",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "Sunny, 24°C in Nairobi."},
                "finish_reason": "stop",
            }
        ],
        "usage": {"total_tokens": 10},
    }
    return Trace(
        flow="weather",
        turns=[Turn(protocol, request, 200, response), Turn(protocol, request, 500, "oops")],
        mocks={"get_weather": {"temp": 24, "sky": "sunny"}},
    )


def reversed_keys(value: Any) -> Any:
    """The same JSON with every dict's keys inserted in reverse order."""
    if isinstance(value, dict):
        return {key: reversed_keys(value[key]) for key in reversed(list(value))}
    if isinstance(value, list):
        return [reversed_keys(item) for item in value]
    return value


def test_round_trip() -> None:
    trace = make_trace()
    text = dumps(trace)
    assert loads(text) == trace
    assert dumps(loads(text)) == text


@pytest.mark.parametrize(
    "text",
    [
        "a\n\nb",
        "trailing newline\n",
        "two trailing\n\n",
        " leading space\nx",
        "trailing space \ny",
        "\ttab\nx",
        "crlf\r\nline",
        "x: y\n- z\n# not a comment",
        "\n",
        "unicode é ✓\nline",
    ],
)
def test_round_trip_of_awkward_strings(text: str) -> None:
    trace = make_trace(text)
    assert loads(dumps(trace)) == trace


def test_dumps_is_deterministic_and_ignores_insertion_order() -> None:
    trace = make_trace()
    shuffled = Trace(
        flow=trace.flow,
        turns=[
            Turn(t.protocol, reversed_keys(t.request), t.status, reversed_keys(t.response))
            for t in trace.turns
        ],
        mocks=reversed_keys(trace.mocks),
    )
    assert list(shuffled.turns[0].request) == ["messages", "temperature", "model"]
    assert dumps(trace) == dumps(make_trace())
    assert dumps(shuffled) == dumps(trace)


def test_dump_layout() -> None:
    text = dumps(make_trace())
    assert text.startswith(HEADER)
    body = text[len(HEADER) :]
    assert body.startswith(f"flowproof_trace: {FORMAT_VERSION}\nflow: weather\nmocks:\n")
    assert body.endswith("\nend_of_trace: true\n")  # last: a cut anywhere takes it
    assert "  get_weather:\n    sky: sunny\n    temp: 24\n" in body
    assert "Sunny, 24°C in Nairobi." in body  # unicode kept readable


def test_multi_line_strings_are_literal_blocks() -> None:
    text = dumps(make_trace())
    assert "content: |-\n" in text
    assert "    - content: |-\n        You are a careful weather assistant.\n" in text
    assert "        Never invent a temperature.\n" in text


def test_one_word_prompt_edit_is_a_one_line_diff() -> None:
    before = dumps(make_trace()).splitlines()
    edited = SYSTEM_PROMPT.replace("short sentence", "brief sentence")
    after = dumps(make_trace(edited)).splitlines()
    assert len(before) == len(after)
    removed = [line for line in difflib.ndiff(before, after) if line.startswith("- ")]
    added = [line for line in difflib.ndiff(before, after) if line.startswith("+ ")]
    # The prompt is stored once per turn (two turns here): one changed line each.
    assert len(removed) == 2
    assert len(added) == 2
    assert set(removed) == {"-         Answer in one short sentence."}
    assert set(added) == {"+         Answer in one brief sentence."}


def test_one_word_edit_with_a_single_turn_changes_exactly_one_line() -> None:
    def one_turn(prompt: str) -> list[str]:
        trace = make_trace(prompt)
        trace.turns = trace.turns[:1]
        return dumps(trace).splitlines()

    before = one_turn(SYSTEM_PROMPT)
    after = one_turn(SYSTEM_PROMPT.replace("careful", "cautious"))
    changes = [
        line
        for line in difflib.unified_diff(before, after, lineterm="", n=0)
        if line.startswith(("-", "+")) and not line.startswith(("---", "+++"))
    ]
    assert changes == [
        "-        You are a careful weather assistant.",
        "+        You are a cautious weather assistant.",
    ]


def test_protocol_key_omitted_for_openai_chat_and_kept_for_others() -> None:
    text = dumps(make_trace())
    assert "protocol:" not in text
    other = dumps(make_trace(protocol="anthropic"))
    assert other.count("- protocol: anthropic\n") == 2
    assert loads(other).turns[0].protocol == "anthropic"
    assert loads(text).turns[0].protocol == "openai-chat"


def _refusal(text: str, name: str) -> str:
    """The message `loads` refuses `text` with, read as `name`."""
    with pytest.raises(TraceError) as info:
        loads(text, name)
    return str(info.value)


def test_unknown_version_is_refused_with_a_re_record_hint() -> None:
    text = dumps(make_trace()).replace(
        f"flowproof_trace: {FORMAT_VERSION}\n", "flowproof_trace: 7\n"
    )
    assert _refusal(text, "x.trace.yaml") == (
        "x.trace.yaml: trace format version 7 is not supported by this flowproof "
        "(it reads versions 1 and 2). Fix: re-record it with `flowproof record <spec>`, "
        "or read it with the flowproof that wrote it"
    )


def test_a_version_1_document_is_read_without_an_end_line_and_written_as_version_2() -> None:
    text = dumps(make_trace())
    old = text.replace(f"flowproof_trace: {FORMAT_VERSION}\n", "flowproof_trace: 1\n")
    old = old.replace("end_of_trace: true\n", "")
    trace = loads(old, "old.trace.yaml")
    assert trace.version == 1 and trace.turns == make_trace().turns
    assert dumps(trace) == text


@pytest.mark.parametrize("text", ["just a string\n", "- a\n- list\n", "flow: x\nturns: []\n", ""])
def test_not_a_trace(text: str) -> None:
    assert _refusal(text, "y.trace.yaml") == (
        "y.trace.yaml: not a flowproof trace (no 'flowproof_trace' version key)"
    )


def test_invalid_yaml() -> None:
    assert _refusal("flowproof_trace: [1\n", "z.trace.yaml").startswith(
        "z.trace.yaml: not valid YAML: "
    )


def test_malformed_turn_names_its_number() -> None:
    text = "flowproof_trace: 1\nflow: f\nturns:\n  - request: {}\n    response: {status: 200}\n"
    assert _refusal(text, "m.trace.yaml") == (
        "m.trace.yaml:4: turn 1 is malformed: its `response` has no `body`. Fix: undo the edit "
        "(restore the file from version control), or re-record the flow with "
        "`flowproof record <spec>`"
    )


def test_load_missing_file(tmp_path: Path) -> None:
    with pytest.raises(TraceError) as info:
        load(tmp_path / "nope.trace.yaml")
    assert str(info.value) == f"no trace at {tmp_path / 'nope.trace.yaml'}"


def test_save_and_load(tmp_path: Path) -> None:
    path = tmp_path / "deep" / "dir" / "w.trace.yaml"
    save(path, make_trace())
    assert load(path) == make_trace()
    assert path.read_text(encoding="utf-8") == dumps(make_trace())
    assert os.listdir(path.parent) == ["w.trace.yaml"]


def test_write_atomic_leaves_no_temp_file(tmp_path: Path) -> None:
    path = tmp_path / "t.trace.yaml"
    write_atomic(path, "first\n")
    write_atomic(path, "second\n")
    assert path.read_text(encoding="utf-8") == "second\n"
    assert os.listdir(tmp_path) == ["t.trace.yaml"]


def _failing_keeps_the_previous_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, call: str, error: BaseException
) -> None:
    """`os.<call>` raising `error` mid-write: the error reaches the caller, the previous file
    is whole and no temporary file is left."""
    path = tmp_path / "t.trace.yaml"
    path.write_text("previous\n", encoding="utf-8")

    def broken(*args: Any) -> None:
        raise error

    monkeypatch.setattr(os, call, broken)
    with pytest.raises(type(error)) as raised:
        write_atomic(path, "new content\n")
    assert raised.value is error
    assert path.read_text(encoding="utf-8") == "previous\n"
    assert os.listdir(tmp_path) == ["t.trace.yaml"]


def test_write_atomic_failed_rename_keeps_the_previous_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    no_space = OSError(28, "No space left on device")
    _failing_keeps_the_previous_file(tmp_path, monkeypatch, "replace", no_space)


def test_write_atomic_failed_write_keeps_the_previous_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    io_error = OSError(5, "Input/output error")
    _failing_keeps_the_previous_file(tmp_path, monkeypatch, "fsync", io_error)


def test_write_atomic_interrupted_keeps_the_previous_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    _failing_keeps_the_previous_file(tmp_path, monkeypatch, "replace", KeyboardInterrupt())


def test_a_staged_file_replaces_the_trace_only_when_committed(tmp_path: Path) -> None:
    path = tmp_path / "t.trace.yaml"
    path.write_text("previous\n", encoding="utf-8")
    staged = stage(path, "new\n")
    assert staged.parent == tmp_path and staged.name.endswith(".tmp")
    assert path.read_text(encoding="utf-8") == "previous\n"
    commit_staged(staged, path)
    assert path.read_text(encoding="utf-8") == "new\n"
    assert os.listdir(tmp_path) == ["t.trace.yaml"]
    discard_staged(stage(path, "never\n"))
    assert path.read_text(encoding="utf-8") == "new\n"
    assert os.listdir(tmp_path) == ["t.trace.yaml"]


def test_a_writable_place_passes_the_check_and_is_left_as_it_was(tmp_path: Path) -> None:
    check_writable(tmp_path / "t.trace.yaml")
    check_writable(tmp_path / "not" / "yet" / "t.trace.yaml")  # made when it is written
    assert os.listdir(tmp_path) == []


def test_a_folder_or_a_file_in_the_way_is_refused(tmp_path: Path) -> None:
    with pytest.raises(TraceError, match=f"cannot write the trace {tmp_path}: it is a folder"):
        check_writable(tmp_path)
    blocker = tmp_path / "blocker"
    blocker.write_text("", encoding="utf-8")
    with pytest.raises(TraceError, match=f"{blocker} is not a folder. Fix: write the trace"):
        check_writable(blocker / "t.trace.yaml")


def test_a_folder_that_refuses_a_new_file_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What a read-only folder does (the real one: test_core_record_replay.py, unprivileged)."""

    def refused(name: str, flags: int, mode: int = 0o777) -> int:
        raise PermissionError(13, "Permission denied", name)

    monkeypatch.setattr(os, "open", refused)
    with pytest.raises(TraceError) as error:
        check_writable(tmp_path / "sub" / "t.trace.yaml")
    assert str(error.value) == (
        f"cannot write the trace {tmp_path / 'sub' / 't.trace.yaml'}: the folder {tmp_path} "
        f"is not writable (Permission denied). Fix: make {tmp_path} writable, or write the "
        "trace elsewhere with `-o PATH`"
    )


@pytest.mark.parametrize(
    ("spec", "trace"),
    [
        ("a/x.flow.yaml", "a/x.trace.yaml"),
        ("x.flow.yaml", "x.trace.yaml"),
        ("a/b/my.agent.flow.yaml", "a/b/my.agent.trace.yaml"),
        ("a/x.yaml", "a/x.trace.yaml"),
    ],
)
def test_trace_path_for(spec: str, trace: str) -> None:
    assert trace_path_for(Path(spec)) == Path(trace)


# -- reading turn by turn: the same document as one whole parse, whatever the layout ---------

_WHOLE_PARSE_CASES = {
    "as written": dumps(make_trace()),
    "an indented turns sequence": (
        "flowproof_trace: 1\nflow: f\nturns:\n  - request: {model: m}\n"
        "    response: {status: 200, body: {ok: true}}\n"
    ),
    "flow style": '{"flowproof_trace": 1, "flow": "f", "turns": [{"request": {}, '
    '"response": {"status": 200, "body": "x"}}]}\n',
    "an alias into an earlier turn": (
        "flowproof_trace: 1\nflow: f\nturns:\n- request: &req {model: m}\n"
        "  response: {status: 200, body: a}\n- request: *req\n  response: {status: 200, body: b}\n"
    ),
    "a merge key, non-string keys and tagged values": (
        "flowproof_trace: 1\nflow: f\nturns:\n- request:\n    base: &b {x: 1}\n"
        "    merged: {<<: *b, y: 2}\n    yes: on\n    3: three\n    bin: !!binary aGk=\n"
        "  response: {status: 200, body: null}\n"
    ),
    "comments, blank lines and keys after the turns": (
        "# top\nflowproof_trace: 1\nturns:\n# before the first\n- request: {a: 1}\n\n"
        "  # inside\n  response: {status: 200, body: x}\n-\n  request: {a: 2}\n"
        "  response: {status: 500, body: y}\nflow: late\nmocks: {t: 1}\n"
    ),
    "a quoted string running on in column 0": (
        'flowproof_trace: 1\nflow: f\nturns:\n- request: {text: "one\ntwo"}\n'
        "  response: {status: 200, body: x}\n"
    ),
    "CRLF line ends": dumps(make_trace()).replace("\n", "\r\n"),
    "an empty turns key": "flowproof_trace: 1\nflow: f\nturns:\nmocks: {}\n",
}


@pytest.mark.parametrize("text", list(_WHOLE_PARSE_CASES.values()), ids=list(_WHOLE_PARSE_CASES))
def test_reading_turn_by_turn_gives_the_whole_document(text: str) -> None:
    expected = from_document(yaml.load(text, Loader=yaml.SafeLoader), "t")
    assert loads(text, "t") == expected


def test_a_file_reads_like_its_text(tmp_path: Path) -> None:
    path = tmp_path / "c.trace.yaml"
    text = _WHOLE_PARSE_CASES["comments, blank lines and keys after the turns"]
    path.write_text(text, encoding="utf-8")
    assert load(path) == loads(text)
    assert load(path).flow == "late"


def test_equal_strings_of_different_turns_share_one_object(tmp_path: Path) -> None:
    """A growing conversation repeats every earlier message in each turn: held once."""
    prompt = "a long system prompt " * 20
    turns = [
        Turn("openai-chat", {"messages": [{"role": "system", "content": prompt}], "n": n}, 200, {})
        for n in range(3)
    ]
    path = tmp_path / "s.trace.yaml"
    save(path, Trace(flow="s", turns=turns))
    loaded = load(path).turns
    assert loaded == turns
    first, *rest = (turn.request["messages"][0]["content"] for turn in loaded)
    assert all(other is first for other in rest)


def test_invalid_yaml_inside_a_turn_names_the_line_of_the_file() -> None:
    text = dumps(make_trace()).replace("temperature: 0", "temperature: [0", 1)
    line = text.splitlines().index("    temperature: [0") + 1
    message = _refusal(text, "bad.trace.yaml")
    assert message.startswith("bad.trace.yaml: not valid YAML: ")
    assert f"line {line + 1}" in message or f"line {line}" in message


def test_a_file_that_is_not_utf8_is_named(tmp_path: Path) -> None:
    path = tmp_path / "latin.trace.yaml"
    path.write_bytes(b"flowproof_trace: 1\nflow: caf\xe9\n")
    with pytest.raises(TraceError) as info:
        load(path)
    assert str(info.value) == (
        f"{path}:2: not UTF-8 text: byte 0xe9 at column 10 (invalid continuation byte). "
        "Fix: save it as UTF-8, or restore it from version control"
    )
