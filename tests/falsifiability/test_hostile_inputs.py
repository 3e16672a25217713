"""Hostile values that reach a command line, an environment, a URL or a file path.

A spec value can be valid YAML and still be something exec, a URL parser or a file read
cannot take: a NUL (written as the escape `"\\0"`), a variable name holding `=`, a mock
mapping with a number for a key, `http://[::1`, a task larger than the kernel passes in one
argument, a FIFO named like a spec. Each is refused with exit 2, naming the file, the line
(or the variable) and the fix, before anything starts; never a traceback, never a silent
skip. Each named case is one a probe found: it was run against the unfixed code first.
"""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from flowproof_cli.errors import SpecError
from flowproof_cli.spec.loader import parse_spec
from flowproof_cli.spec.suite import parse_suite
from tests.conftest import REPO, CliResult, run_cli
from tests.e2e.flows import AGENTS, agent_command
from tests.e2e.sockets_and_pids import free_port
from tests.fakes.fake_upstream import FakeUpstream
from tests.falsifiability.hostile_yaml import refused_by_the_cli

DEMO = REPO / "examples" / "agent-demo"
TRACE = DEMO / "weather.trace.yaml"
PROMPT = "What's the weather in Nairobi right now? Use both tools."


def spec_text(
    *,
    agent: str = "  command: python weather_agent.py\n",
    env: str = "",
    tools: str = "  - name: get_time\n  - name: get_weather\n",
    prompt: str = PROMPT,
    top: str = "",
) -> str:
    """A spec; `env` (YAML flow mapping) is the agent's environment, after `agent`."""
    if env:
        agent += f"  env: {env}\n"
    return (
        f"name: hostile\napp: agent\n{top}agent:\n{agent}tools:\n{tools}"
        f"steps:\n  - prompt: {prompt}\n  - assert_tool_call: get_weather\n"
    )


def line_of(text: str, marker: str) -> int:
    return next(n for n, line in enumerate(text.splitlines(), 1) if marker in line)


def refused(text: str, marker: str, *, parse: object = parse_spec) -> SpecError:
    """The SpecError at the line holding `marker`, with a fix."""
    with pytest.raises(SpecError) as info:
        parse(text, "x.flow.yaml")  # type: ignore[operator]
    error = info.value
    assert error.line == line_of(text, marker), str(error)
    assert "Fix:" in error.detail, str(error)
    return error


# --- values that reach exec: refused at their line when the spec loads -------------------

NUL_CASES = {
    "prompt": (spec_text(prompt='"What\'s the weather\\0 in Nairobi?"'), "- prompt:"),
    "command": (spec_text(agent='  command: "python weather_agent.py\\0"\n'), "command:"),
    "env-value": (spec_text(env='{A: "x\\0y"}'), "env:"),
    "env-name": (spec_text(env='{"A\\0B": x}'), "env:"),
    "mcp-command": (
        spec_text(top='mcp:\n  - name: files\n    command: "npx server\\0"\n'),
        "npx server",
    ),
}


@pytest.mark.parametrize("case", list(NUL_CASES))
def test_a_nul_that_would_reach_exec_is_refused_at_its_line(case: str) -> None:
    text, marker = NUL_CASES[case]
    error = refused(text, marker)
    assert "U+0000 (NUL)" in error.detail


@pytest.mark.parametrize("parse", [parse_spec, parse_suite], ids=["spec", "suite"])
def test_a_lone_surrogate_escape_is_refused_at_its_line(parse: object) -> None:
    """`"\\ud800"` builds half a UTF-16 pair: no argument, variable, body or trace can hold
    it (found beside the NUL: the same traceback at the agent's start)."""
    text = spec_text(prompt='"a\\ud800b"') if parse is parse_spec else 'env:\n  A: "\\udfff"\n'
    error = refused(text, "ud800" if parse is parse_spec else "A:", parse=parse)
    assert "lone surrogate" in error.detail
    assert "\\U0001F600" in error.detail


def test_a_nul_in_the_prompt_of_a_url_agent_loads() -> None:
    """The task of a url agent travels in a JSON body, where a NUL is `\\u0000`."""
    agent = '  url: "http://127.0.0.1:8000/run"\n  proxy_port: 4646\n'
    spec = parse_spec(spec_text(agent=agent, prompt='"a\\0b"'), "x.flow.yaml")
    assert spec.task_prompt == "a\x00b"


@pytest.mark.parametrize(
    ("name", "meant"), [("A=B", "Fix: name the variable `A`"), ("=x", "is empty"), ("", "is empty")]
)
def test_an_env_name_exec_cannot_pass_is_refused(name: str, meant: str) -> None:
    text = spec_text(agent=f"  command: a\n  env:\n    {name!r}: x\n")
    error = refused(text, "x")
    assert meant in error.detail


@pytest.mark.parametrize(
    ("key", "shown"),
    [("1", "1 (a number)"), ("1.5", "1.5 (a number)"), ("true", "true"), ("~", "null")],
)
def test_a_mock_mapping_with_a_key_that_is_not_text_is_refused(key: str, shown: str) -> None:
    text = spec_text(tools=f"  - name: get_time\n    result: {{{key}: a, b: c}}\n")
    error = refused(text, "result:")
    assert f"the key {shown}" in error.detail
    assert "quote it" in error.detail


def test_a_key_that_is_not_text_deep_in_a_result_is_refused_at_its_line() -> None:
    text = spec_text(
        tools="  - name: get_time\n    results:\n      - ok\n      - a:\n          2: b\n"
    )
    error = refused(text, "2: b")
    assert "the key 2 (a number)" in error.detail


def test_a_key_that_is_not_text_in_an_mcp_mock_or_args_is_refused() -> None:
    mcp = "mcp:\n  - name: files\n    url: http://127.0.0.1:9/mcp\n    tools:\n"
    mcp += "      - name: read\n        result: {7: x}\n"
    refused(spec_text(top=mcp), "result:")
    args = spec_text() + "  - assert_tool_call: {name: get_weather, args: {city: {3: x}}}\n"
    refused(args, "args:")


# --- URLs -------------------------------------------------------------------------------

BAD_URLS = {
    "http://[::1": "`]`",
    "http://127.0.0.1:99999/run": "port",
    "http://127.0.0.1:x/run": "port",
    "ftp://127.0.0.1/run": "ftp",
    "http:///run": "no host",
    "http://127.0.0.1/a b": "space",
    "http://127.0.0.1:0/run": "port",
    "http://127.0.0.1:8000/r\u00fcn": "not ASCII",
    "http://" + "a" * 70 + ".example/run": "DNS",
}


@pytest.mark.parametrize("url", list(BAD_URLS))
def test_an_agent_url_that_is_not_a_url_is_refused_at_its_line(url: str) -> None:
    text = spec_text(agent=f"  url: {url!r}\n  proxy_port: 4646\n")
    error = refused(text, "url:")
    assert BAD_URLS[url] in error.detail


@pytest.mark.parametrize("url", list(BAD_URLS))
def test_an_mcp_url_that_is_not_a_url_is_refused_at_its_line(url: str) -> None:
    text = spec_text(top=f"mcp:\n  - name: files\n    url: {url!r}\n")
    error = refused(text, "url:")
    assert BAD_URLS[url] in error.detail


@pytest.mark.parametrize(
    ("header", "shown"),
    [
        ('{X-Token: "a\\nb"}', "line break"),
        ('{X-Token: "\u20ac"}', "Latin-1"),
        ("{A B: x}", "token"),
    ],
)
def test_a_trigger_header_http_cannot_carry_is_refused_at_its_line(header: str, shown: str) -> None:
    text = spec_text(
        agent=f"  url: http://127.0.0.1:8000/run\n  proxy_port: 4646\n  headers: {header}\n"
    )
    error = refused(text, "headers:")
    assert shown in error.detail


def test_an_mcp_url_from_a_variable_is_checked_when_resolved() -> None:
    spec = parse_spec(spec_text(top="mcp:\n  - name: files\n    url: ${FILES_URL}\n"), "x")
    assert spec.mcp[0].url == "${FILES_URL}"


# --- skip_unless_env: variable names only -----------------------------------------------

SKIP_ENTRIES = {
    '"${STAGING_URL}"': "Fix: write `STAGING_URL`",
    '"$STAGING_URL"': "Fix: write `STAGING_URL`",
    "''": "is empty",
    '"A B"': "one entry per variable: `A`, `B`",
    '"1ABC"': "starts with a digit",
    '"X="': "Fix: write `X`",
}


@pytest.mark.parametrize("entry", list(SKIP_ENTRIES))
def test_a_skip_unless_env_entry_that_is_not_a_name_is_refused(entry: str) -> None:
    text = spec_text(top=f"skip_unless_env:\n  - OTHER\n  - {entry}\n")
    error = refused(text, entry)
    assert "not a variable name" in error.detail
    assert SKIP_ENTRIES[entry] in error.detail


def test_skip_unless_env_names_still_load() -> None:
    spec = parse_spec(spec_text(top="skip_unless_env: [STAGING_URL, _x1]\n"), "x.flow.yaml")
    assert spec.skip_unless_env == ["STAGING_URL", "_x1"]


# --- the task as one argument, timeouts -------------------------------------------------

ARG_LIMIT = 128 * 1024


def test_a_task_too_long_for_one_argument_is_refused_at_the_command() -> None:
    text = spec_text(
        agent="  command: python agent.py ${flowproof.prompt}\n", prompt="x" * (ARG_LIMIT + 1)
    )
    error = refused(text, "command:")
    assert "131,072 bytes (MAX_ARG_STRLEN, 128 KiB)" in error.detail
    assert "FLOWPROOF_PROMPT_FILE" in error.detail


def test_a_task_too_long_for_an_env_value_is_refused_at_the_variable() -> None:
    text = spec_text(
        agent="  command: python agent.py\n  env:\n    TASK: ${flowproof.prompt}\n",
        prompt="x" * ARG_LIMIT,
    )
    error = refused(text, "TASK:")
    assert "MAX_ARG_STRLEN" in error.detail


def test_an_env_value_too_long_for_exec_is_refused_at_its_line() -> None:
    text = spec_text(agent=f"  command: a\n  env:\n    DATA: {'x' * ARG_LIMIT}\n")
    error = refused(text, "DATA:")
    assert "`agent.env.DATA` is 131,078 bytes" in error.detail and "MAX_ARG_STRLEN" in error.detail


@pytest.mark.parametrize("value", [".inf", "-.inf", ".nan", "1e400", "0", "-1"])
def test_a_spec_timeout_that_is_not_a_finite_positive_number_is_refused(value: str) -> None:
    text = spec_text(top=f"timeout: {value}\n")
    error = refused(text, "timeout:")
    assert "a finite number of seconds > 0" in error.detail


# --- suites -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "marker"),
    [
        ('env:\n  A: "x\\0y"\n', "A:"),
        ('before_each: "echo\\0"\n', "before_each"),
        ('after_each: "echo\\0"\n', "after_each"),
        ('env_from: "echo\\0"\n', "env_from"),
    ],
)
def test_a_nul_in_a_suite_value_is_refused_at_its_line(text: str, marker: str) -> None:
    error = refused(text, marker, parse=parse_suite)
    assert "U+0000 (NUL)" in error.detail


# --- through the real CLI: run and record ---------------------------------------------------

CLI_CASES = {
    # the first values that reach exec (NUL_CASES), now through the CLI
    **{f"nul-{name}": NUL_CASES[name] for name in ("prompt", "command", "env-value")},
    "env-name-equals": (spec_text(env='{"A=B": x}'), "env:"),
    "result-int-key": (
        spec_text(tools="  - name: get_time\n    result: {1: a, b: c}\n  - name: get_weather\n"),
        "result:",
    ),
    "url-ipv6": (spec_text(agent="  url: http://[::1\n  proxy_port: PORT\n"), "url:"),
    "skip-braces": (spec_text(top='skip_unless_env: ["${STAGING_URL}"]\n'), "skip_unless_env"),
    "surrogate-prompt": (spec_text(prompt='"a\\ud800b"'), "- prompt:"),
}


@pytest.fixture(scope="module")
def upstream() -> Iterator[FakeUpstream]:
    with FakeUpstream() as fake:
        yield fake


def cli(command: str, spec: Path, upstream: FakeUpstream, *extra: str) -> CliResult:
    env = {"STAGING_URL": "https://staging.example", "PATH": _path_with_python()}
    if command == "record":
        env["FLOWPROOF_AGENT_UPSTREAM"] = f"{upstream.base_url}/v1"
    return run_cli(command, *extra, spec, env=env)


#: `refuse(spec, start, note, *extra)`: the spec refused by the fixture's command; its stderr.
Refuse = Callable[..., str]


@pytest.fixture
def refuse(command: str, upstream: FakeUpstream) -> Refuse:
    """The test's `command` (parametrized) on a hostile spec: refused with exit 2, stderr
    starting `start`, and a fix; `note` names the case in a failure."""

    def refused(spec: Path, start: str, note: str, *extra: str) -> str:
        result = cli(command, spec, upstream, *extra)
        refused_by_the_cli(result, start, note=note)
        assert "Fix:" in result.stderr
        return result.stderr

    return refused


def _path_with_python() -> str:
    return os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])


def demo_folder(folder: Path, name: str, text: str) -> Path:
    """The demo agent beside a spec of `text` and a copy of the demo's trace."""
    shutil.copy(DEMO / "weather_agent.py", folder)
    spec = folder / f"{name}.flow.yaml"
    spec.write_text(text, encoding="utf-8")
    shutil.copy(TRACE, folder / f"{name}.trace.yaml")
    return spec


@pytest.mark.slow
@pytest.mark.parametrize("command", ["run", "record"])
@pytest.mark.parametrize("case", list(CLI_CASES))
def test_the_cli_refuses_hostile_values_with_file_line_and_fix(
    tmp_path: Path, upstream: FakeUpstream, refuse: Refuse, case: str
) -> None:
    text, marker = CLI_CASES[case]
    text = text.replace("PORT", str(free_port()))
    spec = demo_folder(tmp_path, "hostile", text)
    refuse(spec, f"error: {spec}:{line_of(text, marker)}: ", case)
    assert not upstream.model_requests()


@pytest.mark.slow
def test_a_suite_env_from_printing_a_nul_names_the_variable(
    tmp_path: Path, upstream: FakeUpstream
) -> None:
    (tmp_path / "suite.yaml").write_text("env_from: printf 'GOOD=1\\nBAD=a\\000b\\n'\n")
    spec = demo_folder(tmp_path, "suite", spec_text())
    result = cli("run", spec, upstream)
    refused_by_the_cli(result)
    assert "BAD" in result.stderr and "U+0000 (NUL)" in result.stderr
    assert "env_from" in result.stderr


@pytest.mark.slow
def test_an_mcp_url_variable_that_is_not_a_url_names_the_variable(
    tmp_path: Path, upstream: FakeUpstream
) -> None:
    text = spec_text(top="mcp:\n  - name: files\n    url: ${FILES_URL}\n")
    spec = demo_folder(tmp_path, "mcp", text)
    env = {"FILES_URL": "http://[::1", "FLOWPROOF_AGENT_UPSTREAM": f"{upstream.base_url}/v1"}
    result = run_cli("record", spec, env=env)
    refused_by_the_cli(result)
    assert "mcp.files.url" in result.stderr and "FILES_URL" in result.stderr
    assert "Fix:" in result.stderr


@pytest.mark.slow
def test_a_trigger_header_from_a_variable_names_the_variable_not_the_value(
    tmp_path: Path,
) -> None:
    agent = f"  url: http://127.0.0.1:8000/run\n  proxy_port: {free_port()}\n"
    spec = demo_folder(tmp_path, "hdr", spec_text(agent=agent + '  headers: {X-Token: "${TOK}"}\n'))
    result = run_cli("run", spec, env={"TOK": "secret-value\n"})
    refused_by_the_cli(result, f"error: {spec}: agent.headers.X-Token ")
    assert "TOK" in result.stderr and "secret-value" not in result.output


@pytest.mark.slow
def test_an_upstream_that_is_not_a_url_is_refused_naming_the_variable(tmp_path: Path) -> None:
    spec = demo_folder(tmp_path, "up", spec_text())
    result = run_cli("record", spec, env={"FLOWPROOF_AGENT_UPSTREAM": "http://[::1"})
    refused_by_the_cli(result, "error: FLOWPROOF_AGENT_UPSTREAM is not an http(s) URL")


# --- the task larger than one argument: the file is the way ---------------------------------

BIG_TASK = "Summarise this text - " + "lorem ipsum " * 17_000  # about 200 KB


@pytest.mark.slow
def test_a_200_kb_task_as_an_argument_names_the_limit_and_the_file(tmp_path: Path) -> None:
    command = f"{agent_command(AGENTS / 'py_prompt_argv.py')} ${{flowproof.prompt}}"
    text = spec_text(agent=f"  command: {command}\n", prompt=BIG_TASK)
    spec = demo_folder(tmp_path, "big", text)
    result = run_cli("run", spec)
    refused_by_the_cli(result, f"error: {spec}:{line_of(text, 'command:')}: ")
    assert "MAX_ARG_STRLEN, 128 KiB" in result.stderr
    assert "FLOWPROOF_PROMPT_FILE" in result.stderr


@pytest.mark.slow
def test_a_200_kb_task_reaches_the_agent_through_its_file(tmp_path: Path) -> None:
    """FLOWPROOF_PROMPT cannot hold it (one environment string is limited like one
    argument): the agent reads FLOWPROOF_PROMPT_FILE, records, and replays green."""
    command = agent_command(AGENTS / "py_prompt_argv.py")
    agent = f"  command: {command}\n  env: {{TASK_FILE_VARIABLE: FLOWPROOF_PROMPT_FILE}}\n"
    text = (
        f"name: big task\napp: agent\nagent:\n{agent}steps:\n  - prompt: {BIG_TASK}\n"
        "  - assert: reply contains Hello\n"
    )
    spec = tmp_path / "big.flow.yaml"
    spec.write_text(text, encoding="utf-8")
    with FakeUpstream() as fake:
        recorded = run_cli("record", spec, env={"FLOWPROOF_AGENT_UPSTREAM": f"{fake.base_url}/v1"})
        assert recorded.code == 0, recorded.output
        (request,) = fake.model_requests()
        assert request.body["messages"][0]["content"] == BIG_TASK.strip()
    assert "FLOWPROOF_PROMPT is not set" in recorded.stdout
    replayed = run_cli("run", spec)
    assert replayed.code == 0, replayed.output


# --- command-line timeouts ----------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "1e400", "0", "-1"])
@pytest.mark.parametrize("command", ["run", "record", "doctor", "init"])
def test_a_timeout_that_is_not_a_finite_positive_number_is_refused(
    tmp_path: Path, command: str, value: str
) -> None:
    spec = demo_folder(tmp_path, "t", spec_text())
    target = ["--agent", "python weather_agent.py"] if command in ("doctor", "init") else [spec]
    result = run_cli(command, f"--timeout={value}", *target, cwd=tmp_path)
    refused_by_the_cli(result, note=(command, value))
    assert "Invalid value for '--timeout'" in result.stderr
    assert "is not a number of seconds > 0 (finite, e.g. 300)" in result.stderr


# --- files that are not regular files -----------------------------------------------------


def _fifo(path: Path) -> Path:
    os.mkfifo(path)
    return path


def _zero(path: Path) -> Path:
    path.symlink_to("/dev/zero")
    return path


NOT_FILES = {
    "fifo": (_fifo, "a FIFO (named pipe), not a regular file"),
    "dev-zero": (_zero, "a symbolic link to /dev/zero, a character device, not a regular file"),
}


@pytest.mark.slow
@pytest.mark.parametrize("command", ["run", "record"])
@pytest.mark.parametrize("kind", list(NOT_FILES))
def test_a_spec_that_is_not_a_regular_file_says_what_it_is(
    tmp_path: Path, refuse: Refuse, kind: str
) -> None:
    make, what = NOT_FILES[kind]
    spec = make(tmp_path / "x.flow.yaml")
    assert what in refuse(spec, f"error: {spec}: ", kind, "--timeout=60")


@pytest.mark.slow
@pytest.mark.parametrize("kind", list(NOT_FILES))
def test_a_spec_below_a_folder_that_is_not_a_regular_file_is_that_flow_s_error(
    tmp_path: Path, kind: str
) -> None:
    make, what = NOT_FILES[kind]
    make(tmp_path / "x.flow.yaml")
    result = run_cli("run", tmp_path, "--timeout=60")
    refused_by_the_cli(result, note=kind)
    assert "ERROR: x.flow.yaml" in result.stdout and what in result.stdout
    assert "no *.flow.yaml below" not in result.output


TRACE_KINDS = {
    **NOT_FILES,
    "loop": (lambda path: path.symlink_to(path.name) or path, "a symbolic link loop"),
}


@pytest.mark.slow
@pytest.mark.parametrize("kind", list(TRACE_KINDS))
def test_a_trace_that_is_not_a_regular_file_says_what_it_is(tmp_path: Path, kind: str) -> None:
    make, what = TRACE_KINDS[kind]
    spec = demo_folder(tmp_path, "weather", spec_text())
    (tmp_path / "weather.trace.yaml").unlink()
    make(tmp_path / "weather.trace.yaml")
    result = run_cli("run", spec, "--timeout=60")
    refused_by_the_cli(result, note=kind)
    assert what in result.stderr
    assert "Fix:" in result.stderr
    in_a_folder = run_cli("run", tmp_path, "--timeout=60")  # that flow's error, not a skip
    refused_by_the_cli(in_a_folder, note=kind)
    assert in_a_folder.stdout.startswith("ERROR: ") and what in in_a_folder.stdout
