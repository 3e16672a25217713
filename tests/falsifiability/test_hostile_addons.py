"""Property-based probes of matcher addons: whatever a script raises, at import, in
`flowproof_normalize` or in a mitmproxy hook of one of its objects (`SystemExit` with any
code, a `KeyboardInterrupt` or `CancelledError` of its own, `GeneratorExit`, any exception,
with any text), flowproof gets an ordinary failure naming the addon, the hook and what was
raised, and nothing reaches the caller: not the session's, not the proxy's event loop.

In-process and fast; the same through the real CLI is tests/e2e/test_hostile_addons.py.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from flowproof_cli.cassette import CassetteSession
from flowproof_cli.dialects import Rendered
from flowproof_cli.errors import ConfigError
from flowproof_cli.match.addons import ScriptAddon, load_matcher_script
from flowproof_cli.match.rules import AddonRule, MatchRules
from flowproof_cli.match.user_code import ScriptCalls, exception_text
from flowproof_cli.mode import Mode
from flowproof_cli.runner.port_scoped import PortScoped

REQUEST = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
PATH = "/v1/chat/completions"


class OwnBaseException(BaseException):
    """A script's own BaseException: no handler of Exception catches it."""


class LoudStr(Exception):
    """An exception whose text cannot be had: its `__str__` exits."""

    def __str__(self) -> str:
        raise SystemExit(9)


TEXT = st.text(max_size=30)

#: Everything a user's code can raise at flowproof.
RAISED = st.one_of(
    st.builds(SystemExit, st.one_of(st.none(), st.integers(-3, 300), TEXT)),
    st.builds(KeyboardInterrupt, TEXT),
    st.builds(GeneratorExit),
    st.builds(asyncio.CancelledError),
    st.builds(StopIteration, TEXT),
    st.builds(RecursionError, TEXT),
    st.builds(MemoryError),
    st.builds(ValueError, TEXT),
    st.builds(KeyError, TEXT),
    st.builds(OSError, st.integers(0, 200), TEXT),
    st.builds(OwnBaseException, TEXT),
    st.builds(LoudStr),
)

PROPERTY = settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


def _raising(raised: BaseException) -> Any:
    def hook(*_: Any) -> Any:
        raise raised

    return hook


def _session(raised: BaseException) -> CassetteSession:
    rules = MatchRules([AddonRule("Hostile", _raising(raised))])
    return CassetteSession(Mode.RECORD, rules=rules)


def _named(message: str, raised: BaseException, hook: str) -> None:
    assert message.startswith("flowproof: the matcher addon Hostile raised "), message
    assert f" raised {exception_text(raised)} in {hook}" in message, message
    assert "\n" not in message and "\x1b" not in message


@PROPERTY
@given(raised=RAISED)
def test_whatever_flowproof_normalize_raises_is_a_500_naming_it(raised: BaseException) -> None:
    """On any thread (`on_request`) and from the event loop (`off_loop.on_request`)."""
    body = json.dumps(REQUEST).encode()
    session = _session(raised)
    answered = session.on_request(PATH, body)
    assert isinstance(answered, Rendered) and answered.status == 500
    assert json.loads(answered.body)["error"]["type"] == "flowproof_matcher_error"
    (message,) = session.errors
    _named(message, raised, "flowproof_normalize")

    session = _session(raised)
    assert session.off_loop is not None
    off = session.off_loop

    async def off_loop() -> Rendered | Any:
        answer = await off.on_request(PATH, body)
        await off.settled()
        return answer

    answered = asyncio.run(off_loop())
    session.close()
    assert isinstance(answered, Rendered) and answered.status == 500
    (message,) = session.errors
    _named(message, raised, "flowproof_normalize")


@PROPERTY
@given(raised=RAISED, hook=st.sampled_from(["request", "response", "client_connected"]))
def test_whatever_a_plain_hook_raises_fails_the_flow_and_the_proxy_goes_on(
    raised: BaseException, hook: str
) -> None:
    failures: list[str] = []
    addon = ScriptAddon("Hostile", {hook: _raising(raised)}, ScriptCalls(None))
    scoped = PortScoped(addon, {1}, "hostile@1", failures.append)

    class Flow:  # what mitmproxy hands a hook: its port is read, nothing else
        class client_conn:  # the attribute mitmproxy reads
            sockname = ("127.0.0.1", 1)

    async def as_mitmproxy_calls_it() -> Any:
        return await getattr(scoped, hook)(Flow())

    assert asyncio.run(as_mitmproxy_calls_it()) is False  # returned, as if the hook had
    (message,) = failures
    _named(f"flowproof: {message}", raised, hook)


#: What a statement at a script's top level raises, and how the error names it.
IMPORT_RAISES = {
    "import sys; sys.exit(0)": "SystemExit: 0",
    "import sys; sys.exit(3)": "SystemExit: 3",
    "import sys; sys.exit('bye')": "SystemExit: bye",
    "import sys; sys.exit()": "SystemExit",
    "raise KeyboardInterrupt": "KeyboardInterrupt",
    "raise GeneratorExit": "GeneratorExit",
    "import asyncio; raise asyncio.CancelledError": "CancelledError",
    "class Own(BaseException): pass\nraise Own('x')": "Own: x",
    "raise RuntimeError('needs config')": "RuntimeError: needs config",
}


@pytest.mark.parametrize("statement", list(IMPORT_RAISES))
def test_whatever_a_script_raises_at_import_is_an_error_at_its_line(
    tmp_path: Path, statement: str
) -> None:
    script = tmp_path / "hostile.py"
    script.write_text(f"import json\n{statement}\n")
    with pytest.raises(ConfigError) as caught:
        load_matcher_script(script, "spec")
    line = 2 + statement.count("\n")
    assert str(caught.value).startswith(
        f"{script}:{line}: the matcher addon script (spec) does not import: "
        f"{IMPORT_RAISES[statement]}. Fix: "
    ), str(caught.value)
