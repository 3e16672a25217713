"""Loading `*.flow.yaml`: the model it builds, and a SpecError with file, line and fix."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
import yaml

from flowproof_cli.errors import SpecError
from flowproof_cli.spec import (
    STEP_KINDS,
    FlowSpec,
    NoToolCallStep,
    PromptStep,
    ReplyStep,
    ToolCallStep,
    load_spec,
    parse_spec,
    spec_json_schema,
)

EXAMPLE = """\
name: Weather agent reports Nairobi
app: agent
agent:
  command: "python agent.py --city ${CITY}"
  env: { MY_VAR: "${HOME}/x" }
timeout: 300
strict: false
tools:
  - name: get_time
    result: { now: "2026-01-01T00:00:00Z" }
  - name: get_weather
steps:
  - prompt: What's the weather in Nairobi?
  - assert_tool_call: get_weather where city equals Nairobi and units is metric
  - assert_no_tool_call: get_time where tz is absent
  - assert: reply contains sunny
  - assert_no_egress
  - assert_no_secret_leak: ${STRIPE_KEY}
"""

HEAD = """\
name: n
app: agent
agent:
  command: run
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "case.flow.yaml"
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def spec_error(tmp_path: Path, text: str) -> SpecError:
    path = write(tmp_path, text)
    with pytest.raises(SpecError) as info:
        load_spec(path)
    error = info.value
    assert error.path == str(path)
    assert str(error).startswith(f"{path}:")
    assert "Fix:" in str(error)
    return error


def refused_at(tmp_path: Path, text: str, line: int, *said: str) -> None:
    """`text` is refused at `line`, the message saying each of `said`."""
    error = spec_error(tmp_path, text)
    assert error.line == line, str(error)
    for fragment in said:
        assert fragment in str(error)


# --- the model ------------------------------------------------------------------------------


def test_example_loads(tmp_path: Path) -> None:
    path = write(tmp_path, EXAMPLE)
    spec = load_spec(path)
    assert spec.name == "Weather agent reports Nairobi"
    assert spec.app == "agent"
    assert spec.agent.command == "python agent.py --city ${CITY}"  # kept unresolved
    assert spec.agent.env == {"MY_VAR": "${HOME}/x"}
    assert spec.timeout == 300
    assert spec.strict is False
    assert spec.source_path == path
    # every kind but `user`, which cannot share a flow with `prompt` (test_conversation_spec)
    assert [step.kind for step in spec.steps] == [k for k in STEP_KINDS if k != "user"]
    assert isinstance(spec.steps[0], PromptStep)
    assert isinstance(spec.steps[2], NoToolCallStep)
    assert [step.line for step in spec.steps] == [13, 14, 15, 16, 17, 18]
    assert spec.task_prompt == "What's the weather in Nairobi?"
    call = spec.steps[1]
    assert isinstance(call, ToolCallStep)
    assert call.assertion.tool == "get_weather"
    assert len(call.assertion.clauses) == 2
    reply = spec.steps[3]
    assert isinstance(reply, ReplyStep)
    assert reply.assertion.text == "sunny"


def test_source_path_and_lines_stay_out_of_serialization(tmp_path: Path) -> None:
    spec = load_spec(write(tmp_path, EXAMPLE))
    dumped = spec.model_dump(by_alias=True)
    assert "source_path" not in dumped
    assert dumped["steps"][0] == {"prompt": "What's the weather in Nairobi?"}
    assert dumped["steps"][3] == {"assert": "reply contains sunny"}
    assert dumped["tools"][1] == {"name": "get_weather"}  # declared only: no `result`
    again = FlowSpec.model_validate(dumped)
    assert again.mocks == spec.mocks
    assert again.model_dump(by_alias=True) == dumped


def test_defaults() -> None:
    spec = parse_spec(HEAD + "steps:\n  - prompt: hi\n", "x.flow.yaml")
    assert spec.timeout == 300
    assert spec.strict is False
    assert spec.tools == []
    assert spec.agent.env == {}
    assert spec.mocks == {}
    assert spec.source_path == Path("x.flow.yaml")


def test_prompts_join_into_one_task_wherever_they_are() -> None:
    text = HEAD + textwrap.dedent(
        """\
        steps:
          - prompt: first
          - assert: reply contains x
          - prompt: |
              second
              third
        """
    )
    spec = parse_spec(text, "x")
    assert spec.task_prompt == "first\nsecond\nthird\n"


def test_mocks_distinguish_declared_from_null_result() -> None:
    text = HEAD + textwrap.dedent(
        """\
        tools:
          - name: declared
          - name: returns_null
            result: null
          - name: returns_list
            result: [1, "two", {three: 3}]
          - name: when
            result: 2026-01-01T00:00:00Z
        steps:
          - prompt: hi
        """
    )
    spec = parse_spec(text, "x")
    assert [tool.is_mocked for tool in spec.tools] == [False, True, True, True]
    assert spec.mocks == {
        "returns_null": None,
        "returns_list": [1, "two", {"three": 3}],
        "when": "2026-01-01T00:00:00Z",  # a YAML timestamp stays JSON text
    }
    assert spec.declared_tools == ["declared", "returns_null", "returns_list", "when"]


def test_undeclared_target_allowed_without_tools() -> None:
    spec = parse_spec(HEAD + "steps:\n  - prompt: hi\n  - assert_tool_call: anything\n", "x")
    assert isinstance(spec.steps[1], ToolCallStep)


def test_resolved_agent() -> None:
    spec = parse_spec(EXAMPLE, "x")
    environ = {"CITY": "Nairobi", "HOME": "/h"}
    assert spec.agent.resolved_command(environ) == "python agent.py --city Nairobi"
    assert spec.agent.resolved_env(environ) == {"MY_VAR": "/h/x"}


# --- errors: file, line, fix ------------------------------------------------------------------


def test_unknown_top_level_key(tmp_path: Path) -> None:
    keys = "name, app, agent, tools, mcp, strict, match, timeout, skip_unless_env, control, faults"
    said = ("unknown key `stpes`", "Did you mean `steps`?", f"{keys}, steps")
    refused_at(tmp_path, HEAD + "stpes:\n  - prompt: hi\n", 5, *said)


def test_unknown_nested_key(tmp_path: Path) -> None:
    text = """\
        name: n
        app: agent
        agent:
          command: run
          enviroment: {A: b}
        steps:
          - prompt: hi
        """
    refused_at(tmp_path, text, 5, "unknown key `enviroment` in `agent`", "command, env")


#: A spec the loader refuses: its text, the line it is refused at, what the message says.
REFUSED: dict[str, tuple[str, int, tuple[str, ...]]] = {
    "unknown-key-in-a-tool": (
        HEAD + "tools:\n  - name: t\n    returns: 1\nsteps:\n  - prompt: hi\n",
        7,
        ("in `tools.0`", "name, result"),
    ),
    "unknown-step-kind": (
        HEAD + "steps:\n  - prompt: hi\n  - assert_tool_cal: t\n",
        7,
        ("unknown step `assert_tool_cal`", "Did you mean `assert_tool_call`?"),
    ),
    "step-with-two-keys": (
        HEAD + "steps:\n  - prompt: hi\n    assert: reply contains x\n",
        6,
        ("2 keys",),
    ),
    "step-that-is-not-a-mapping": (
        HEAD + "steps:\n  - prompt: hi\n  - just text\n",
        7,
        ("one-key mapping",),
    ),
    "duplicate-key": (
        HEAD + "name: again\nsteps:\n  - prompt: hi\n",
        5,
        ("duplicate key `name`",),
    ),
    "bad-regex": (
        HEAD + "steps:\n  - prompt: hi\n  - assert_tool_call: t where city matches (Nai\n",
        7,
        ("not a valid regular expression", "missing )"),
    ),
    "bad-matcher": (
        HEAD + "steps:\n  - prompt: hi\n  - assert_no_tool_call: t where city near x\n",
        7,
        ("unknown matcher `near`", "is absent"),
    ),
    "bad-reply-assertion": (
        HEAD + "steps:\n  - prompt: hi\n  - assert: answer is x\n",
        7,
        ("expected `reply contains TEXT`",),
    ),
    "no-prompt": (HEAD + "steps:\n  - assert: reply contains x\n", 5, ("no `prompt` step",)),
    "empty-steps": (HEAD + "steps: []\n", 5, ("`steps` is empty",)),
    "missing-steps": (HEAD, 1, ("missing required key `steps`",)),
    "missing-nested-key": (
        "name: n\napp: agent\nagent:\n  env: {}\nsteps:\n  - prompt: x\n",
        3,
        ("`agent` needs `command` (a process flowproof starts) or `url`",),
    ),
}


@pytest.mark.parametrize("case", list(REFUSED))
def test_a_broken_spec_is_refused_at_its_line(tmp_path: Path, case: str) -> None:
    text, line, said = REFUSED[case]
    refused_at(tmp_path, text, line, *said)


@pytest.mark.parametrize(
    ("agent", "line", "expected"),
    [
        (
            "  command: a\n  url: http://127.0.0.1:1/task\n  proxy_port: 4646\n",
            5,
            "`agent` has both `command` and `url`",
        ),
        ("  command: a\n  headers: {X: y}\n", 5, "`agent.headers` only applies to a `url` agent"),
        (
            "  command: a\n  proxy_port: 4646\n",
            5,
            "`agent.proxy_port` only applies to a `url` agent",
        ),
        (
            "  url: http://127.0.0.1:1/task\n  proxy_port: 4646\n  env: {A: b}\n",
            6,
            "`agent.env` only applies to a `command` agent",
        ),
        ("  url: http://127.0.0.1:1/task\n", 4, "a `url` agent needs `proxy_port`"),
    ],
)
def test_driver_choice_errors(tmp_path: Path, agent: str, line: int, expected: str) -> None:
    error = spec_error(tmp_path, f"name: n\napp: agent\nagent:\n{agent}steps:\n  - prompt: x\n")
    assert expected in str(error)
    assert "Fix:" in str(error)
    assert error.line is not None and 3 <= error.line <= line


def test_tool_mocked_twice(tmp_path: Path) -> None:
    text = HEAD + textwrap.dedent(
        """\
        tools:
          - name: get_time
            result: 1
          - name: other
          - name: get_time
            result: 2
        steps:
          - prompt: hi
        """
    )
    error = spec_error(tmp_path, text)
    assert error.line == 9
    assert "`get_time` is mocked twice" in str(error)


def test_tool_listed_twice(tmp_path: Path) -> None:
    text = HEAD + "tools:\n  - name: a\n  - name: a\nsteps:\n  - prompt: hi\n"
    refused_at(tmp_path, text, 7, "listed twice")


def test_undeclared_assert_target(tmp_path: Path) -> None:
    text = HEAD + textwrap.dedent(
        """\
        tools:
          - name: get_time
          - name: get_weather
        steps:
          - prompt: hi
          - assert_tool_call: get_weather
          - assert_no_tool_call: delete_everything
        """
    )
    error = spec_error(tmp_path, text)
    assert error.line == 11
    assert "`delete_everything`" in str(error)
    assert "declared: get_time, get_weather" in str(error)


def test_yaml_syntax_error(tmp_path: Path) -> None:
    text = HEAD + "steps:\n  - prompt: hi\n  - assert: [unclosed\n"
    error = spec_error(tmp_path, text)
    assert "invalid YAML" in str(error)
    assert error.line is not None
    assert error.line >= 7


def test_yaml_syntax_error_bad_indentation(tmp_path: Path) -> None:
    refused_at(tmp_path, "name: n\n  app: agent\n", 2, "invalid YAML")


def test_top_level_not_a_mapping(tmp_path: Path) -> None:
    refused_at(tmp_path, "- prompt: hi\n", 1, "not a mapping")


def test_empty_file(tmp_path: Path) -> None:
    error = spec_error(tmp_path, "# nothing\n")
    assert "empty" in str(error)


@pytest.mark.parametrize(
    ("replace", "line", "expected"),
    [
        (("app: agent", "app: web"), 2, "must be 'agent'"),
        (("command: run", "command: 42"), 4, "`agent.command` must be non-empty text"),
        (("name: n", "name: yes"), 1, "quote"),
        (("name: n", "name: n\ntimeout: 0"), 2, "`timeout` must be a finite number of seconds > 0"),
        (("name: n", "name: n\nstrict: maybe"), 2, "`strict` must be true or false"),
        (("name: n", "name: n\ntools: {a: 1}"), 2, "`tools` must be a list"),
    ],
)
def test_type_errors(tmp_path: Path, replace: tuple[str, str], line: int, expected: str) -> None:
    text = (HEAD + "steps:\n  - prompt: hi\n").replace(*replace)
    error = spec_error(tmp_path, text)
    assert error.line == line
    assert expected in str(error)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(SpecError, match="not found"):
        load_spec(tmp_path / "nope.flow.yaml")


# --- JSON Schema ------------------------------------------------------------------------------


def _example_data() -> Any:
    return yaml.safe_load(EXAMPLE)


def test_schema_contains_every_step_kind() -> None:
    schema = spec_json_schema()
    json.dumps(schema, sort_keys=True)  # serializable as the CLI prints it
    step_keys = set()
    for definition in schema["$defs"].values():
        if definition["title"].endswith("Step"):
            step_keys.update(definition["properties"])
    for option in schema["properties"]["steps"]["items"]["oneOf"]:
        step_keys.update([option["const"]] if "const" in option else [])  # bare steps
    assert step_keys == set(STEP_KINDS)
    assert set(schema["properties"]) == {
        "name",
        "app",
        "agent",
        "tools",
        "mcp",
        "strict",
        "match",
        "timeout",
        "skip_unless_env",
        "control",
        "faults",
        "steps",
    }
    control = schema["$defs"]["ControlSpec"]
    assert set(control["properties"]) == {"id", "title", "description"}
    assert control["required"] == ["id"]
    assert control["properties"]["id"]["pattern"] == "^[a-z0-9._-]+$"
    assert schema["additionalProperties"] is False
    prose, structured = schema["$defs"]["ToolCallStep"]["properties"]["assert_tool_call"]["anyOf"]
    assert "pattern" in prose
    assert structured == {"$ref": "#/$defs/ToolCallMatch"}
    assert "default" not in schema["$defs"]["ToolSpec"]["properties"]["result"]


def test_schema_validates_the_example() -> None:
    jsonschema = pytest.importorskip("jsonschema")
    schema = spec_json_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    assert list(validator.iter_errors(_example_data())) == []
    bad = _example_data()
    bad["steps"].append({"asert": "reply contains x"})
    bad["agent"]["uri"] = "http://x"
    assert len(list(validator.iter_errors(bad))) == 2
    bad_reply = _example_data()
    bad_reply["steps"][3] = {"assert": "answer has x"}
    assert list(validator.iter_errors(bad_reply))


def test_schema_validates_the_reference_example_verbatim() -> None:
    jsonschema = pytest.importorskip("jsonschema")
    reference = EXAMPLE.replace(
        "assert_no_tool_call: get_time where tz is absent", "assert_no_tool_call: delete_everything"
    )
    jsonschema.validate(yaml.safe_load(reference), spec_json_schema())
    # The loader is stricter: with `tools` declared, assertion targets must be declared too.
    with pytest.raises(SpecError, match="delete_everything"):
        parse_spec(reference, "x")


def test_model_accepts_what_the_schema_describes() -> None:
    spec = FlowSpec.model_validate(_example_data())
    assert spec.source_path is None
    assert spec.steps[0].line is None


def test_light_commands_do_not_load_the_proxy_engine_or_the_egress_package() -> None:
    """`flowproof schema`, `mcp-stdio` and the parent of `-j N` need neither mitmproxy nor
    the egress package; importing them at start-up is paid by every run of these paths."""
    probe = (
        "import sys\n"
        "from flowproof_cli.cli.main import exit_code\n"
        "import flowproof_cli.runner.parallel\n"
        "sys.argv = ['flowproof', 'schema']\n"
        "exit_code()\n"
        "loaded = [m for m in ('mitmproxy', 'flowproof_cli.egress') if m in sys.modules]\n"
        "print('LOADED', loaded, file=sys.stderr)\n"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert "LOADED []" in done.stderr
