"""`${VAR}` resolution: only the `${NAME}` form, handles apart from the environment."""

from __future__ import annotations

import pytest

from flowproof_cli.errors import ConfigError
from flowproof_cli.spec import find_variables, resolve_variables


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
