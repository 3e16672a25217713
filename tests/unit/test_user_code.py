"""match/user_code.py: user code runs in a thread of its own, one call at a time, each within
its budget, and whatever it does comes back as a value or an ordinary exception.

Budgets here are short (a fraction of a second) and every wait has a generous bound; no test
asserts how long something took.
"""

from __future__ import annotations

import asyncio
import threading
import time
from pathlib import Path

import pytest

from flowproof_cli.errors import ConfigError
from flowproof_cli.match.addons import load_matcher_script
from flowproof_cli.match.user_code import (
    BUDGET_VARIABLE,
    DEFAULT_BUDGET_S,
    Budget,
    MatcherAddonError,
    Overran,
    Raised,
    ScriptCalls,
    SerialThread,
    Stuck,
    addon_budget,
)

SHORT = 0.3  # a budget the sleeping calls below go past


def _sleep_forever() -> None:
    time.sleep(600)


def _spin() -> None:
    while True:
        pass


def test_calls_run_in_order_in_one_thread_not_the_callers() -> None:
    thread = SerialThread("t", budget_s=None)
    seen: list[tuple[int, int]] = []

    def note(number: int) -> int:
        seen.append((number, threading.get_ident()))
        return number * 2

    assert [thread.call("n", note, n) for n in range(3)] == [0, 2, 4]
    assert [number for number, _ in seen] == [0, 1, 2]
    assert len({ident for _, ident in seen}) == 1
    assert seen[0][1] != threading.get_ident()
    thread.close()


@pytest.mark.parametrize(
    "raised",
    [SystemExit(0), SystemExit(3), KeyboardInterrupt(), GeneratorExit(), ValueError("boom")],
    ids=repr,
)
def test_whatever_a_call_raises_comes_back_as_raised(raised: BaseException) -> None:
    """SystemExit and KeyboardInterrupt included: the caller gets an ordinary exception
    carrying them, never them (a real Ctrl-C only ever reaches the main thread)."""

    def fails() -> None:
        raise raised

    thread = SerialThread("t")
    with pytest.raises(Raised) as caught:
        thread.call("fails", fails)
    assert caught.value.original is raised
    assert thread.call("again", lambda: "fine") == "fine"  # the thread goes on
    thread.close()


def test_a_call_past_its_budget_overruns_and_later_ones_are_stuck() -> None:
    thread = SerialThread("t", budget_s=SHORT)
    with pytest.raises(Overran) as overran:
        thread.call("Sleepy.flowproof_normalize", _sleep_forever)
    assert overran.value.budget_s == SHORT
    assert overran.value.frame is not None  # where it was: for the message's line
    with pytest.raises(Stuck) as stuck:
        thread.call("Sleepy.request", lambda: None)
    assert stuck.value.holder == "Sleepy.flowproof_normalize"


def test_the_budget_counts_from_a_calls_start_not_from_its_queueing() -> None:
    """A call queued behind a slow one that stays within budget gets its whole budget."""
    thread = SerialThread("t", budget_s=1.0)
    results: list[object] = []
    started = threading.Event()

    def slow() -> str:
        started.set()
        time.sleep(0.6)
        return "slow"

    def also_slow() -> str:
        time.sleep(0.6)
        return "also slow"

    first = threading.Thread(target=lambda: results.append(thread.call("a", slow)))
    first.start()
    assert started.wait(30)
    results.append(thread.call("b", also_slow))  # queued ~0.6 s, then runs ~0.6 s
    first.join(30)
    assert sorted(map(str, results)) == ["also slow", "slow"]
    thread.close()


@pytest.mark.parametrize("stuck", [_sleep_forever, _spin], ids=["sleeps", "spins"])
def test_the_event_loop_goes_on_while_a_call_is_stuck(stuck: object) -> None:
    """`run` awaits from the loop: other tasks keep running, and the overrun comes back."""
    thread = SerialThread("t", budget_s=SHORT)
    ticks: list[int] = []

    async def ticking() -> None:
        while True:
            ticks.append(1)
            await asyncio.sleep(0.01)

    async def scenario() -> BaseException:
        ticker = asyncio.create_task(ticking())
        try:
            await thread.run("stuck", stuck)
        except Overran as exc:
            return exc
        finally:
            ticker.cancel()
        raise AssertionError("the stuck call returned")

    assert isinstance(asyncio.run(asyncio.wait_for(scenario(), 60)), Overran)
    assert len(ticks) > 1


def test_a_cancelled_wait_leaves_the_call_running_and_the_thread_usable() -> None:
    thread = SerialThread("t", budget_s=None)
    done = threading.Event()

    def slow() -> str:
        time.sleep(0.2)
        done.set()
        return "done"

    async def scenario() -> str:
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(thread.run("slow", slow), 0.01)
        return str(await thread.run("next", lambda: "next"))

    assert asyncio.run(scenario()) == "next"
    assert done.is_set()  # the first call ran to its end before the next one
    thread.close()


def test_closing_ends_the_thread_and_a_later_call_starts_another() -> None:
    thread = SerialThread("t", budget_s=None)
    first = thread.call("who", threading.current_thread)
    thread.close()
    first.join(30)
    assert not first.is_alive()
    second = thread.call("who", threading.current_thread)
    assert second is not first and second.daemon
    thread.close()


# -- the words of a matcher addon's failure ----------------------------------------------------


def test_script_calls_name_the_addon_the_hook_and_the_scripts_line(tmp_path: Path) -> None:
    script = tmp_path / "exits.py"
    script.write_text("import sys\n\n\ndef hook(request, protocol):\n    sys.exit(0)\n")
    namespace: dict[str, object] = {}
    exec(compile(script.read_text(), str(script), "exec"), namespace)
    calls = ScriptCalls(script)
    with pytest.raises(MatcherAddonError) as caught:
        calls.call("Exits", "flowproof_normalize", namespace["hook"], {}, "openai-chat")
    assert str(caught.value) == (
        "the matcher addon Exits raised SystemExit: 0 in flowproof_normalize (exits.py:5)"
    )


def test_an_exception_whose_str_fails_is_named_by_its_type() -> None:
    class Odd(Exception):
        def __str__(self) -> str:
            raise SystemExit(1)

    def raises() -> None:
        raise Odd

    with pytest.raises(MatcherAddonError, match=r"^the matcher addon A raised Odd in request$"):
        ScriptCalls(None).call("A", "request", raises)


def test_an_overrun_names_the_budget_the_line_and_how_to_give_more(tmp_path: Path) -> None:
    script = tmp_path / "sleepy.py"
    script.write_text("import time\n\n\ndef hook():\n    time.sleep(600)\n")
    namespace: dict[str, object] = {}
    exec(compile(script.read_text(), str(script), "exec"), namespace)
    calls = ScriptCalls(script, Budget(SHORT))
    with pytest.raises(MatcherAddonError) as overran:
        calls.call("Sleepy", "flowproof_normalize", namespace["hook"])
    assert str(overran.value) == (
        f"the matcher addon Sleepy did not return from flowproof_normalize within its budget "
        f"of {SHORT:g} s (still at sleepy.py:5). Fix: make flowproof_normalize return sooner, "
        f"or set {BUDGET_VARIABLE} to the seconds it needs"
    )
    with pytest.raises(MatcherAddonError) as held:
        calls.call("Other", "request", lambda: None)
    assert str(held.value) == (
        "the matcher addon Other could not run request: its script is still in "
        f"Sleepy.flowproof_normalize, past its budget of {SHORT:g} s"
    )


# -- the budget ----------------------------------------------------------------------------------


def test_the_budget_defaults_and_is_settable() -> None:
    assert addon_budget({}) == Budget(DEFAULT_BUDGET_S)
    assert addon_budget({BUDGET_VARIABLE: " "}).seconds == DEFAULT_BUDGET_S
    assert addon_budget({BUDGET_VARIABLE: "12.5"}).seconds == 12.5


def test_the_flows_timeout_caps_the_budget_and_says_so() -> None:
    capped = addon_budget({BUDGET_VARIABLE: "600"}, timeout_s=8)
    assert capped.seconds == 8
    assert capped.more == "give the flow a longer timeout (`timeout:` or `--timeout`)"
    assert addon_budget({}, timeout_s=90) == Budget(DEFAULT_BUDGET_S)


@pytest.mark.parametrize("value", ["abc", "0", "-1", "nan", "inf", "5s"])
def test_a_bad_budget_is_an_error_naming_the_variable(value: str) -> None:
    with pytest.raises(ConfigError) as caught:
        addon_budget({BUDGET_VARIABLE: value})
    assert str(caught.value) == (
        f"{BUDGET_VARIABLE} is {value!r}: set it to the seconds each call into a matcher addon "
        "may take (a number > 0, e.g. 10), or unset it for the default 5"
    )


# -- importing a script ------------------------------------------------------------------------


def test_a_script_that_sleeps_at_import_is_an_error_naming_its_line(tmp_path: Path) -> None:
    script = tmp_path / "slow.py"
    script.write_text("import time\ntime.sleep(600)\n")
    with pytest.raises(ConfigError) as caught:
        load_matcher_script(script, "spec", Budget(SHORT))
    assert str(caught.value) == (
        f"{script}:2: the matcher addon script (spec) did not import within its budget of "
        f"{SHORT:g} s. Fix: make its import return sooner, or set {BUDGET_VARIABLE} to the "
        "seconds it needs"
    )


def test_scripts_failing_at_once_in_two_threads_each_get_their_own_error(tmp_path: Path) -> None:
    """mitmproxy's loader logs a failed import; each load keeps only its own thread's."""
    errors: dict[str, str] = {}

    def load(name: str) -> None:
        script = tmp_path / f"{name}.py"
        script.write_text(f"import time\ntime.sleep(0.2)\nraise RuntimeError({name!r})\n")
        try:
            load_matcher_script(script, "spec")
        except ConfigError as exc:
            errors[name] = str(exc)

    workers = [threading.Thread(target=load, args=(name,)) for name in ("one", "two")]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(60)
    assert errors["one"].endswith(
        "does not import: RuntimeError: one. Fix: run `python "
        f"{tmp_path / 'one.py'}` to see the problem"
    )
    assert "RuntimeError: two." in errors["two"]


def test_os_exit_in_user_code_raises_but_a_fork_of_its_thread_exits() -> None:
    """`os._exit` is refused in the thread running user code (`ProcessEnd`), and only
    there: a process forked from that thread, and every other thread, keep the real call."""
    import os

    from flowproof_cli.match.user_code import ProcessEnd

    thread = SerialThread("fork probe")

    def exits() -> None:
        os._exit(0)

    def forks() -> int:
        pid = os.fork()
        if pid == 0:
            os._exit(7)  # the child's own exit: real
        return os.waitpid(pid, 0)[1]

    try:
        with pytest.raises(Raised) as caught:
            thread.call("exits", exits)
        assert isinstance(caught.value.original, ProcessEnd)
        assert os.waitstatus_to_exitcode(thread.call("forks", forks)) == 7
    finally:
        thread.close()
