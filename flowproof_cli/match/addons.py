"""Matcher addons: ordinary mitmproxy addon scripts whose addon objects define

    def flowproof_normalize(self, request: dict, protocol: str) -> dict

Scripts load through mitmproxy's own script loader, so the file that works under
`mitmdump -s addons/model.py -s strip_session.py` works under `flowproof run` unchanged. Any
object in the module's `addons = [...]` list (the mitmproxy convention) with that method is
a rule named after its class; the objects with other mitmproxy hooks still join the proxy as
plain addons.

Everything that runs the script's code (its import, reading its objects' attributes, every
hook) runs in the script's own thread within the budget (match/user_code.py), so a script
that exits, sleeps or loops fails its flow and never stops the run.
"""

from __future__ import annotations

import logging
import threading
import traceback
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from flowproof_cli.errors import ConfigError
from flowproof_cli.match.rules import AddonRule
from flowproof_cli.match.user_code import (
    HOOK,
    Budget,
    Overran,
    Raised,
    ScriptCalls,
    UserCodeFailure,
)


@dataclass(frozen=True)
class ScriptAddon:
    """One object of a matcher script's `addons` list as the proxy calls it: its class name
    and the mitmproxy hooks it defines (read once, in the script's thread: reading an
    attribute may run its code), and its script's calls."""

    name: str
    hooks: dict[str, Callable[..., Any]]  # hook name (`request`, `load`, ...) -> its method
    calls: ScriptCalls


@dataclass(frozen=True)
class LoadedScript:
    path: Path
    addons: list[ScriptAddon]  # the objects with mitmproxy hooks, for the proxy
    rules: list[AddonRule]  # the ones defining flowproof_normalize
    calls: ScriptCalls  # the script's thread: closed when its flow ends

    def close(self) -> None:
        self.calls.close()


@dataclass(frozen=True)
class _Object:
    """An addon object as read in the script's thread."""

    name: str  # its class name
    normalize: Callable[..., Any] | None
    hooks: dict[str, Callable[..., Any]]


class _Captured(logging.Handler):
    """mitmproxy's loader logs a failing script instead of raising: keep that record, of
    this thread's import only (the flows of a run load their scripts at the same time)."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.thread = threading.get_ident()
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.thread == self.thread:
            self.records.append(record)


class _NotLoaded(Exception):
    """mitmproxy's loader returned no module and logged no exception."""


def _line_in(path: Path, exc: BaseException) -> int | None:
    if isinstance(exc, SyntaxError) and exc.lineno is not None:
        return exc.lineno
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if Path(f.filename) == path]
    return frames[-1].lineno if frames else None


def _import_failure(path: Path, origin: str, failure: Raised) -> ConfigError:
    """What the import raised, at the script's line: an exception of any kind, `SystemExit`
    and `KeyboardInterrupt` included."""
    exc = failure.original
    if isinstance(exc, _NotLoaded):
        return ConfigError(f"{path}: the matcher addon script ({origin}) could not be loaded")
    line = _line_in(path, exc)
    where = f"{path}:{line}" if line is not None else str(path)
    what = f"{type(exc).__name__}: {exc.msg}" if isinstance(exc, SyntaxError) else failure.text
    fix = (
        f"run `python {path}` to see the problem"
        if isinstance(exc, Exception)
        else "a matcher script must not exit or interrupt the process: remove what raises it"
    )
    return ConfigError(
        f"{where}: the matcher addon script ({origin}) does not import: {what}. Fix: {fix}"
    )


def _not_imported(path: Path, origin: str, failure: UserCodeFailure, budget: Budget) -> ConfigError:
    if isinstance(failure, Raised):
        return _import_failure(path, origin, failure)
    assert isinstance(failure, Overran)  # a script's first call: no earlier one holds it
    innermost_first = traceback.walk_stack(failure.frame) if failure.frame else iter(())
    line = next((n for frame, n in innermost_first if frame.f_code.co_filename == str(path)), None)
    where = f"{path}:{line}" if line is not None else str(path)
    return ConfigError(
        f"{where}: the matcher addon script ({origin}) did not import within its budget of "
        f"{failure.budget_s:g} s. Fix: make its import return sooner, or {budget.more}"
    )


def _hooks_of(obj: Any) -> dict[str, Callable[..., Any]]:
    """The mitmproxy hooks an addon object defines, found as mitmproxy finds them."""
    from mitmproxy import hooks  # noqa: PLC0415 - loaded before the import (`_loader`)

    found = {}
    for name in hooks.all_hooks:
        method = getattr(obj, name, None)
        if callable(method) and not isinstance(method, ModuleType):
            found[name] = method
    return found


def _read(obj: Any) -> _Object:
    normalize = getattr(obj, HOOK, None)
    return _Object(type(obj).__name__, normalize if callable(normalize) else None, _hooks_of(obj))


def _loader() -> ModuleType:
    """mitmproxy's script loader (and its hook list), imported before a script's import
    starts: flowproof's own import time is no part of the script's budget."""
    from mitmproxy import hooks  # noqa: F401, PLC0415 - only flows with addons pay for it
    from mitmproxy.addons import script  # noqa: PLC0415

    return script


def _opened(path: Path) -> list[_Object]:
    """In the script's thread: import it with mitmproxy's loader, then read its addon
    objects. A failed import raises what the loader logged, at the script's line."""
    script = _loader()
    captured = _Captured()
    script.logger.addHandler(captured)
    try:
        module = script.load_script(str(path))
    finally:
        script.logger.removeHandler(captured)
    if module is None:
        exc_info = next((record.exc_info for record in captured.records if record.exc_info), None)
        raise exc_info[1] if exc_info and exc_info[1] else _NotLoaded()
    return [_read(obj) for obj in list(getattr(module, "addons", None) or [])]


def load_matcher_script(path: Path, origin: str, budget: Budget | None = None) -> LoadedScript:
    """Import one script in a thread of its own, within the budget; ConfigError (exit 2)
    naming the file when it is missing, does not import (whatever it raised), takes longer
    than the budget, or defines no usable addon."""
    if not path.is_file():
        raise ConfigError(
            f"{path}: the matcher addon script ({origin}) does not exist. Fix: check the path "
            "under `match.addons` (relative to the file that declares it)"
        )
    _loader()
    calls = ScriptCalls(path, budget)
    try:
        objects: list[_Object] = calls.thread.call("import", _opened, path)
    except UserCodeFailure as failure:
        calls.close()
        raise _not_imported(path, origin, failure, calls.budget) from None
    rules = [
        AddonRule(obj.name, obj.normalize, origin=f"{origin}: {path.name}", calls=calls)
        for obj in objects
        if obj.normalize is not None
    ]
    if not rules:
        calls.close()
        raise ConfigError(
            f"{path}: no addon in its `addons = [...]` list defines {HOOK}(self, request, "
            "protocol). Fix: add the method to an addon class and list an instance in `addons`"
        )
    addons = [ScriptAddon(obj.name, obj.hooks, calls) for obj in objects if obj.hooks]
    return LoadedScript(path, addons, rules, calls)


def _source_of(method: Any) -> Path | None:
    """The file a method was defined in (where a failure's line is looked for)."""
    code = getattr(getattr(method, "__func__", method), "__code__", None)
    return Path(code.co_filename) if code is not None else None


def rules_from_master_addons(
    objects: Iterable[Any], budget: Budget | None = None
) -> list[AddonRule]:
    """Stock mitmdump/mitmweb: every loaded addon object that defines the hook, in order,
    each called in a thread of its own within the budget, as under `flowproof run`."""
    rules = []
    for obj in objects:
        normalize = getattr(obj, HOOK, None)
        if callable(normalize) and not isinstance(obj, type | ModuleType):
            calls = ScriptCalls(_source_of(normalize), budget)
            rules.append(AddonRule(type(obj).__name__, normalize, "mitmproxy -s", calls))
    return rules
