"""`${VAR}` resolution: only the `${NAME}` form, handles apart from the environment."""

from __future__ import annotations

import pytest

from flowproof_cli.errors import ConfigError
from flowproof_cli.spec import find_variables, resolve_variables
from flowproof_cli.spec.variables import (
    closest_handle,
    find_handles,
    hold_handles,
    release_handles,
    resolve_handles,
)


def test_substitutes_environment_variables() -> None:
    env = {"CITY": "Nairobi", "HOME": "/home/u"}
    assert resolve_variables("--city ${CITY} ${HOME}/x", env) == "--city Nairobi /home/u/x"


def test_empty_value_is_set() -> None:
    assert resolve_variables("a${EMPTY}b", {"EMPTY": ""}) == "ab"


def test_unset_variable_names_it_and_where() -> None:
    with pytest.raises(ConfigError) as info:
        resolve_variables("python agent.py ${CITY}", {}, where="agent.command")
    message = str(info.value)
    assert "CITY" in message
    assert "agent.command" in message
    assert "export CITY" in message


@pytest.mark.parametrize("text", ["$CITY", "$$", "$${", "${}", "${1X}", "${A-B}", "$ {A}"])
def test_other_syntax_passes_through(text: str) -> None:
    assert resolve_variables(text, {}) == text


def test_handles_are_not_environment_variables() -> None:
    env = {"flowproof.proxy_url": "from-env"}
    handles = {"proxy_url": "http://127.0.0.1:8080"}
    text = "--proxy ${flowproof.proxy_url}"
    assert resolve_variables(text, env, handles) == "--proxy http://127.0.0.1:8080"
    # No handles given: the handle stays for a later stage, and never comes from environ.
    assert resolve_variables(text, env) == text


def test_unknown_handle_passes_through() -> None:
    text = "${flowproof.nope} ${A}"
    assert resolve_variables(text, {"A": "a"}, {"proxy_url": "x"}) == "${flowproof.nope} a"


def test_find_variables_skips_handles() -> None:
    assert find_variables("${A} ${flowproof.proxy_url} ${B} ${A} $C") == ["A", "B"]


# --- the prompt handle, FLOWPROOF_PROMPT, misspelt handles ---------------------------------


@pytest.mark.parametrize("environ", [{}, {"FLOWPROOF_PROMPT": "an outer value"}])
def test_flowproof_prompt_variable_points_at_the_handle(environ: dict[str, str]) -> None:
    # flowproof sets FLOWPROOF_PROMPT for the agent; a spec that reads it wants the handle,
    # even when an outer environment happens to define it.
    with pytest.raises(ConfigError) as info:
        resolve_variables('claude -p "${FLOWPROOF_PROMPT}"', environ, where="agent.command")
    message = str(info.value)
    assert message == (
        "${FLOWPROOF_PROMPT} (used in agent.command) is the variable flowproof sets for the "
        "agent, not one a spec can read. Fix: write ${flowproof.prompt} instead: the task, "
        "as one argument in agent.command or as a value in agent.env"
    )
    assert "export" not in message
    assert info.value.exit_code == 2


def test_prompt_handle_is_substituted_like_any_handle() -> None:
    handles = {"prompt": "Say 'hi' twice", "proxy_url": "http://127.0.0.1:1/v1"}
    assert resolve_variables("${flowproof.prompt}", {}, handles) == "Say 'hi' twice"


def test_find_handles() -> None:
    text = "${flowproof.prompt} ${A} ${flowproof.mcp_url.files-v2} ${flowproof.prompt} $B"
    assert find_handles(text) == ["prompt", "mcp_url.files-v2"]
    assert find_handles("${A} $flowproof.prompt") == []


@pytest.mark.parametrize(
    ("written", "meant"),
    [
        ("promt", "prompt"),
        ("proxy_ur", "proxy_url"),
        ("proxy_url_nov1", "proxy_url_no_v1"),
        ("mcp_url.note", "mcp_url.notes"),
    ],
)
def test_closest_handle_names_the_handle_meant(written: str, meant: str) -> None:
    known = ["prompt", "proxy_url", "proxy_url_no_v1", "mcp_url.notes"]
    assert closest_handle(written, known) == meant


def test_closest_handle_is_none_for_something_else() -> None:
    assert closest_handle("no_such_handle", ["prompt", "proxy_url", "proxy_url_no_v1"]) is None


def test_resolve_handles_leaves_variables_and_unknown_handles() -> None:
    text = "${flowproof.prompt} ${HOME} ${flowproof.nope}"
    assert resolve_handles(text, {"prompt": "p"}) == "p ${HOME} ${flowproof.nope}"


def test_held_handles_survive_variable_substitution_and_come_back() -> None:
    template, held = hold_handles("--task=${flowproof.prompt} ${CITY} ${flowproof.nope}")
    assert "${flowproof" not in template
    resolved = resolve_variables(template, {"CITY": "${flowproof.prompt}"})
    # A variable's value is never taken for a handle; only the written references are filled.
    assert release_handles(resolved, held, {"prompt": "a b"}) == (
        "--task=a b ${flowproof.prompt} ${flowproof.nope}"
    )
