"""Hostile input to the spec loader, the prose grammar and the suite loader.

The property: whatever the bytes, loading a `*.flow.yaml` or a `suite.yaml` gives a model or
a SpecError that names the file, the line and a fix; never another exception. The named
cases are the ones a probe found (each failed before its fix); the hypothesis properties
feed random text, random YAML trees and mutations of the committed specs through the loader
in-process, and a handful of files go through the real CLI to prove exit 2 and no traceback.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from flowproof_cli.errors import SpecError
from flowproof_cli.process import exec_problem
from flowproof_cli.spec.fields import VARIABLE_NAME
from flowproof_cli.spec.grammar import compile_regex, parse_reply_assertion, parse_tool_assertion
from flowproof_cli.spec.loader import load_spec, parse_spec
from flowproof_cli.spec.models import FlowSpec
from flowproof_cli.spec.suite import SuiteSpec, load_suite, parse_suite
from flowproof_cli.spec.yaml_limits import (
    MAX_ALIAS_EXPANSION,
    MAX_SPEC_BYTES,
    MAX_SPEC_DEPTH,
)
from tests.conftest import REPO, run_cli
from tests.falsifiability.hostile_yaml import (
    PROPERTY,
    YAML_SNIPPETS,
    alias_bomb,
    load_a_fifo,
    loads_or_refuses_test,
    mutated_documents,
    refused_by_the_cli,
    yaml_trees,
)

SPEC_FILES = sorted([*REPO.glob("examples/*/*.flow.yaml"), *REPO.glob("specs/*.flow.yaml")])
VALID = SPEC_FILES[0].read_text(encoding="utf-8")
HEAD = "name: x\napp: agent\nagent: {command: a}\n"


def refused(text: str, parse: Any = parse_spec, path: str = "x.flow.yaml") -> SpecError:
    """The SpecError `parse` raises on `text`: with the file, a line, and a fix."""
    with pytest.raises(SpecError) as info:
        parse(text, path)
    error = info.value
    assert error.path == path
    assert error.line is not None and error.line >= 1, str(error)
    assert "Fix:" in error.detail, str(error)
    return error


def loads_or_refuses(text: str, parse: Any = parse_spec) -> None:
    """The hostile-input property itself: a model, or a SpecError with file, line and fix."""
    try:
        result = parse(text, "h.flow.yaml")
    except SpecError as error:
        assert error.path == "h.flow.yaml"
        assert error.line is not None and error.line >= 1, str(error)
        assert "Fix:" in error.detail, str(error)
    else:
        assert isinstance(result, FlowSpec | SuiteSpec)


def in_a_mock(data_lines: str) -> str:
    body = "".join(f"      {line}\n" for line in data_lines.splitlines())
    return f"{HEAD}tools:\n  - name: t\n    result:\n{body}steps: [{{prompt: hi}}]\n"


# --- the cases the probe found ---------------------------------------------------------


@pytest.mark.parametrize("parse", [parse_spec, parse_suite], ids=["spec", "suite"])
@pytest.mark.parametrize(
    "text",
    [
        "a: " + "[" * 5000 + "]" * 5000 + "\n",
        "a: " + "{b: " * 3000 + "1" + "}" * 3000 + "\n",
        "".join("  " * n + f"k{n}:\n" for n in range(300)) + "  " * 300 + "v\n",
        "- " * 2000 + "x\n",
    ],
    ids=["flow-lists", "flow-maps", "block-maps", "block-lists"],
)
def test_deep_nesting_is_refused_at_its_line(text: str, parse: Any) -> None:
    error = refused(text, parse)
    assert f"deeper than {MAX_SPEC_DEPTH} levels" in error.detail
    assert error.line == (MAX_SPEC_DEPTH + 1 if "k0:" in text else 1)


def test_nesting_up_to_the_limit_loads() -> None:
    depth = MAX_SPEC_DEPTH - 3  # the top level, `tools` and the tool hold the result
    spec = parse_spec(in_a_mock("[" * depth + "]" * depth), "ok.flow.yaml")
    assert spec.tools[0].result is not None


@pytest.mark.parametrize("parse", [parse_spec, parse_suite], ids=["spec", "suite"])
@pytest.mark.parametrize(
    ("character", "name"),
    [("\x00", "U+0000 (NUL)"), ("\x1b", "U+001B (ESC)"), ("\x7f", "U+007F (DEL)")],
)
def test_control_characters_are_refused_at_their_line(
    parse: Any, character: str, name: str
) -> None:
    text = f"# a comment\nenv:\n  A: x{character}y\n"
    error = refused(text, parse)
    assert error.line == 3
    assert name in error.detail


@pytest.mark.parametrize(
    ("value", "tag"),
    [("!!int x", "!!int"), ("!!float x", "!!float"), ("!!bool x", "!!bool"), ("1" * 5000, "!!int")],
)
def test_a_value_its_tag_cannot_read_is_refused_at_its_line(value: str, tag: str) -> None:
    error = refused(f"name: ok\napp: agent\nagent:\n  command: {value}\n")
    assert error.line == 4
    assert f"as `{tag}`" in error.detail


@pytest.mark.parametrize(
    "tag", ["!!python/object/apply:os.system ['true']", "!!python/name:os.system", "!custom x"]
)
def test_python_and_unknown_tags_are_refused_by_name(tag: str) -> None:
    error = refused(f"name: ok\napp: agent\nagent:\n  command: {tag}\n")
    assert error.line == 4
    assert "is not allowed: only plain data is read" in error.detail


@pytest.mark.parametrize("levels", [7, 12])
def test_an_alias_bomb_is_refused_without_expanding_it(levels: int) -> None:
    """12 levels would be 9**12 (282 billion) strings: refused from the node graph alone."""
    error = refused(in_a_mock(alias_bomb(levels)))
    assert "alias bomb" in error.detail
    assert f"{MAX_ALIAS_EXPANSION:,}" in error.detail


def test_an_alias_bomb_in_a_suite_is_refused() -> None:
    error = refused("env:\n" + alias_bomb(12, "  "), parse_suite)
    assert "alias bomb" in error.detail


def test_a_few_aliases_still_load() -> None:
    text = in_a_mock("a: &a {city: Quito, days: [1, 2, 3]}\nb: *a\nc: *a")
    assert parse_spec(text, "ok.flow.yaml").tools[0].result["c"] == {
        "city": "Quito",
        "days": [1, 2, 3],
    }


def test_an_alias_inside_its_own_anchor_is_refused() -> None:
    error = refused(in_a_mock("a: &a [1, *a]"))
    assert "never ends" in error.detail


def test_an_alias_that_nests_too_deep_is_refused() -> None:
    deep = "[" * 60 + "]" * 60
    error = refused(in_a_mock(f"a: &a {deep}\nb: " + "[" * 50 + "*a" + "]" * 50))
    assert f"deeper than {MAX_SPEC_DEPTH} levels" in error.detail


@pytest.mark.parametrize("load", [load_spec, load_suite], ids=["spec", "suite"])
def test_a_file_that_is_not_utf8_is_refused_at_its_line(tmp_path: Path, load: Any) -> None:
    path = tmp_path / "latin.flow.yaml"
    path.write_bytes(b"env:\n  CITY: caf\xe9\n")
    with pytest.raises(SpecError) as info:
        load(path)
    assert info.value.line == 2
    assert "byte 0xe9 at column 12" in str(info.value)
    assert "Fix: save the file as UTF-8" in str(info.value)


@pytest.mark.parametrize("load", [load_spec, load_suite], ids=["spec", "suite"])
def test_a_huge_file_is_refused_before_it_is_read(tmp_path: Path, load: Any) -> None:
    path = tmp_path / "huge.flow.yaml"
    path.write_text(VALID + "#" * MAX_SPEC_BYTES + "\n", encoding="utf-8")
    with pytest.raises(SpecError) as info:
        load(path)
    assert f"the limit is {MAX_SPEC_BYTES >> 20} MiB" in str(info.value)
    assert "Fix:" in str(info.value)


def test_huge_text_is_refused_in_process() -> None:
    error = refused(VALID + "#" * MAX_SPEC_BYTES + "\n")
    assert "MiB" in error.detail


@pytest.mark.parametrize("load", [load_spec, load_suite], ids=["spec", "suite"])
def test_a_fifo_is_refused_without_waiting_for_a_writer(tmp_path: Path, load: Any) -> None:
    error = load_a_fifo(load, tmp_path / "pipe.flow.yaml", "a FIFO")
    assert isinstance(error, SpecError)
    assert "not a regular file" in str(error)


def test_a_path_segment_of_non_ascii_digits_is_a_key() -> None:
    assertion = parse_tool_assertion("t where a.² equals 1")
    assert assertion.clauses[0].path == ("a", "²")


@pytest.mark.parametrize(
    ("pattern", "problem"),
    [("(" * 1200 + ")" * 1200, "nested too deeply"), ("a{99999999999}", "too large")],
)
def test_a_regex_python_cannot_compile_is_a_spec_error(pattern: str, problem: str) -> None:
    with pytest.raises(SpecError) as info:
        compile_regex(pattern)
    assert problem in str(info.value)
    assert "Fix:" in str(info.value)


# --- properties ------------------------------------------------------------------------

_SPEC_KEYS = [
    "name",
    "app",
    "agent",
    "command",
    "url",
    "env",
    "tools",
    "result",
    "results",
    "mcp",
    "steps",
    "prompt",
    "assert_tool_call",
    "assert_no_tool_call",
    "assert",
    "assert_no_egress",
    "match",
    "timeout",
    "strict",
    "control",
    "id",
    "proxy_port",
    "headers",
    "allow_egress",
    "skip_unless_env",
    "args",
    "times",
    "ignore",
    "normalize",
    "env_from",
    "before_each",
]
_SPEC_LEAVES = ["agent", "reply contains x", "t where a equals 1", "${X}", "~", "-", ""]
_TREES = yaml_trees(_SPEC_LEAVES, _SPEC_KEYS, text=30, width=5, key_text=8, leaves=30)
_SNIPPETS = st.sampled_from(
    [*YAML_SNIPPETS, "\x7f", "*b ", "!x ", ">", "%YAML 1.1\n", "0x", "\ud800"]
)


_TEXTS = [path.read_text(encoding="utf-8") for path in SPEC_FILES]
_DOCUMENTS = [yaml.safe_load(text) for text in _TEXTS]
#: A committed spec with one to three values replaced by random YAML (or dropped).
_MUTATED_DOCUMENTS = mutated_documents(_DOCUMENTS, _TREES, edits=3)


@st.composite
def mutated_texts(draw: st.DrawFn) -> str:
    """A committed spec's text with a few characters or snippets inserted, dropped or swapped."""
    text = draw(st.sampled_from(_TEXTS))
    for _ in range(draw(st.integers(1, 4))):
        at = draw(st.integers(0, len(text)))
        cut = draw(st.integers(0, 6))
        insert = draw(st.one_of(_SNIPPETS, st.text(max_size=6)))
        text = text[:at] + insert + text[at + cut :]
    return text


_TAGS = st.sampled_from(
    [
        "!!int",
        "!!float",
        "!!bool",
        "!!null",
        "!!str",
        "!!binary",
        "!!timestamp",
        "!!set",
        "!!omap",
        "!!python/object:os.system",
        "!!python/name:os.system",
        "!local",
        "!<x>",
    ]
)


@st.composite
def tagged_texts(draw: st.DrawFn) -> str:
    """A committed spec with an explicit tag put before one of its values."""
    text = draw(st.sampled_from(_TEXTS))
    lines = text.splitlines(keepends=True)
    candidates = [
        n for n, line in enumerate(lines) if ": " in line and not line.lstrip().startswith("#")
    ]
    number = draw(st.sampled_from(candidates))
    key, value = lines[number].split(": ", 1)
    lines[number] = f"{key}: {draw(_TAGS)} {value}"
    return "".join(lines)


@st.composite
def deep_texts(draw: st.DrawFn) -> str:
    """A spec whose mock result nests 1 to 3,000 levels, in flow or block style."""
    depth = draw(st.integers(1, 3000))
    opener, closer = draw(st.sampled_from([("[", "]"), ("{a: ", "}"), ("[{b: ", "}]")]))
    if draw(st.booleans()) and depth < 300:
        block = "".join("  " * n + "- k:\n" for n in range(depth))
        return in_a_mock("x:\n" + "".join("  " + line + "\n" for line in block.splitlines()))
    return in_a_mock("x: " + opener * depth + "1" * (opener == "{a: ") + closer * depth)


@st.composite
def aliased_texts(draw: st.DrawFn) -> str:
    """A spec whose mock result repeats an anchor through levels of aliases."""
    levels, fan = draw(st.integers(1, 14)), draw(st.integers(1, 9))
    leaf = draw(st.sampled_from(["lol", "'" + "x" * 200 + "'", "{a: 1}", "[]"]))
    lines = [f"l0: &l0 [{', '.join([leaf] * fan)}]"]
    for level in range(1, levels):
        lines.append(f"l{level}: &l{level} [{', '.join([f'*l{level - 1}'] * fan)}]")
    return in_a_mock("\n".join(lines))


test_tags_nesting_and_aliases_load_or_are_refused_with_a_line = loads_or_refuses_test(
    st.one_of(tagged_texts(), deep_texts(), aliased_texts()), loads_or_refuses
)


test_mutated_specs_load_or_are_refused_with_a_line = loads_or_refuses_test(
    _MUTATED_DOCUMENTS, loads_or_refuses
)


test_mutated_spec_texts_load_or_are_refused_with_a_line = loads_or_refuses_test(
    mutated_texts(), loads_or_refuses
)


@PROPERTY
@given(_TREES)
def test_random_yaml_trees_load_or_are_refused_with_a_line(tree: Any) -> None:
    loads_or_refuses(yaml.safe_dump(tree, allow_unicode=True))
    loads_or_refuses(yaml.safe_dump(tree, allow_unicode=True), parse_suite)


@PROPERTY
@given(st.text(max_size=300))
def test_random_text_loads_or_is_refused_with_a_line(text: str) -> None:
    loads_or_refuses(text)
    loads_or_refuses(text, parse_suite)


_EXEC_TEXT = st.text(alphabet=st.sampled_from("aZ_1=\x00 $"), max_size=6)


@PROPERTY
@given(
    st.dictionaries(st.one_of(_EXEC_TEXT, st.text(max_size=4)), _EXEC_TEXT, max_size=3),
    _EXEC_TEXT,
    _EXEC_TEXT,
)
def test_a_spec_that_loads_gives_exec_only_what_it_can_pass(
    env: dict[str, str], command: str, prompt: str
) -> None:
    """NUL and `=` in `agent.env` names and values, `agent.command` and the prompt: a spec
    either loads with values exec accepts, or is refused at a line."""
    document = {
        "name": "n",
        "app": "agent",
        "agent": {"command": f"a{command}", "env": env},
        "steps": [{"prompt": f"p{prompt}"}],
    }
    try:
        spec = parse_spec(yaml.safe_dump(document, allow_unicode=True), "h.flow.yaml")
    except SpecError as error:
        assert error.line is not None and "Fix:" in error.detail, str(error)
        return
    env_as_given = {**spec.agent.env, "FLOWPROOF_PROMPT": spec.task_prompt}
    assert exec_problem([str(spec.agent.command)], env_as_given) is None


@PROPERTY
@given(st.lists(st.one_of(_EXEC_TEXT, st.text(max_size=8)), min_size=1, max_size=3))
def test_skip_unless_env_loads_only_variable_names(entries: list[str]) -> None:
    text = yaml.safe_dump({"skip_unless_env": entries}, allow_unicode=True) + HEAD
    try:
        spec = parse_spec(text + "steps: [{prompt: hi}]\n", "h.flow.yaml")
    except SpecError as error:
        assert error.line is not None and "Fix:" in error.detail, str(error)
        return
    assert all(VARIABLE_NAME.fullmatch(name) for name in spec.skip_unless_env)


_URL_PARTS = st.sampled_from(
    [
        "http://",
        "https://",
        "ftp://",
        "[",
        "]",
        "::1",
        "127.0.0.1",
        ":",
        "99999",
        "0",
        "/",
        "ü",
        " ",
        "\n",
        "?q=",
        "#",
        "@",
        "a" * 70,
        ".",
        "x",
    ]
)


@PROPERTY
@given(st.lists(st.one_of(_URL_PARTS, st.text(max_size=3)), max_size=8).map("".join))
def test_an_agent_url_that_loads_can_be_dialled(url: str) -> None:
    """Whatever the text, `agent.url` loads only as a URL the trigger can send a request to
    (parsed, port read, request line ASCII, host encodable), or is refused at its line."""
    document = {
        "name": "n",
        "app": "agent",
        "agent": {"url": url, "proxy_port": 4646},
        "steps": [{"prompt": "p"}],
    }
    try:
        spec = parse_spec(yaml.safe_dump(document, allow_unicode=True), "h.flow.yaml")
    except SpecError as error:
        assert error.line is not None and "Fix:" in error.detail, str(error)
        return
    parts = urlsplit(str(spec.agent.url))
    assert parts.scheme in ("http", "https") and parts.hostname and parts.port != 0
    (parts.path + parts.query).encode("ascii")
    parts.hostname.encode("idna")


_WORDS = st.sampled_from(
    [
        "where",
        "and",
        "equals",
        "is",
        "contains",
        "matches",
        "exists",
        "absent",
        "missing",
        "is absent",
        "is missing",
        "reply",
        "a.b",
        "a..b",
        ".",
        "0",
        "²",
        "city",
        "(",
        "[",
        "*",
        "${X}",
        "\\",
        "a{99999999999}",
        "(?P<x>",
        "x" * 40,
    ]
)
_SEGMENTS = st.one_of(st.text(max_size=4), st.sampled_from(["0", "12", "²", "٣", "⑦", ""]))
_PATH = st.lists(_SEGMENTS, min_size=1, max_size=3).map(".".join)
_MATCHER = st.sampled_from(["equals", "is", "contains", "matches", "exists", "is absent", "near"])
_VALUE = st.one_of(
    st.text(max_size=12),
    st.sampled_from(["(" * 1200, "a{99999999999}", "[[a]]", "(?P<x>", "\\", "${X}", "x and y"]),
)
_CLAUSE = st.tuples(_PATH, _MATCHER, _VALUE).map(" ".join)
_STRUCTURED = st.tuples(
    st.text(min_size=1, max_size=8), st.lists(_CLAUSE, min_size=1, max_size=3)
).map(lambda parts: f"{parts[0]} where {' and '.join(parts[1])}")
_PROSE = st.one_of(
    st.text(max_size=80),
    st.lists(st.one_of(_WORDS, st.text(max_size=6)), max_size=10).map(" ".join),
    _STRUCTURED,
    _VALUE.map(lambda value: f"reply contains {value}"),
)


@PROPERTY
@given(_PROSE)
def test_prose_assertions_parse_or_say_what_to_fix(text: str) -> None:
    for parse in (parse_tool_assertion, parse_reply_assertion):
        try:
            parse(text)
        except SpecError as error:
            assert "Fix:" in str(error), str(error)


@PROPERTY
@given(_PROSE, st.sampled_from(["assert_tool_call", "assert_no_tool_call", "assert"]))
def test_prose_in_a_spec_loads_or_is_refused_at_the_step_line(text: str, kind: str) -> None:
    spec = yaml.safe_dump(
        {
            "name": "n",
            "app": "agent",
            "agent": {"command": "a"},
            "steps": [{"prompt": "hi"}, {kind: text}],
        },
        allow_unicode=True,
    )
    loads_or_refuses(spec)


# --- through the real CLI --------------------------------------------------------------

_CLI_CASES = {
    "deep": HEAD + "steps: " + "[" * 5000 + "]" * 5000 + "\n",
    "nul": HEAD + "steps: [{prompt: a\x00b}]\n",
    "int-tag": "name: !!int x\napp: agent\nagent: {command: a}\nsteps: [{prompt: hi}]\n",
    "python-tag": HEAD + "steps: [{prompt: !!python/object/apply:os.system [true]}]\n",
    "bomb": in_a_mock(alias_bomb(12)),
    "grammar": HEAD + "steps: [{prompt: hi}, {assert_tool_call: 't where a.² matches ((((('}]\n",
}


@pytest.mark.slow
@pytest.mark.parametrize("case", list(_CLI_CASES))
def test_the_cli_refuses_hostile_specs_with_exit_2(tmp_path: Path, case: str) -> None:
    spec = tmp_path / "hostile.flow.yaml"
    spec.write_text(_CLI_CASES[case], encoding="utf-8")
    result = run_cli("run", spec)
    refused_by_the_cli(result, f"error: {spec}:")
    assert "Fix:" in result.stderr


@pytest.mark.slow
def test_the_cli_refuses_a_non_utf8_and_a_huge_spec(tmp_path: Path) -> None:
    latin = tmp_path / "latin.flow.yaml"
    latin.write_bytes(VALID.replace("name: ", "name: caf\xe9 ", 1).encode("latin-1"))
    huge = tmp_path / "huge.flow.yaml"
    huge.write_text(VALID + "#" * MAX_SPEC_BYTES, encoding="utf-8")
    for spec in (latin, huge):
        refused_by_the_cli(run_cli("run", spec), f"error: {spec}:")


@pytest.mark.slow
def test_the_cli_refuses_a_hostile_suite_in_a_directory_run(tmp_path: Path) -> None:
    (tmp_path / "ok.flow.yaml").write_text(VALID, encoding="utf-8")
    suite = tmp_path / "suite.yaml"
    suite.write_text("env:\n" + alias_bomb(12, "  "), encoding="utf-8")
    result = run_cli("run", tmp_path)
    refused_by_the_cli(result)
    assert f"{suite}:" in result.stderr and "alias bomb" in result.stderr
