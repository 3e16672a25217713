"""Matcher addons: ordinary mitmproxy addon scripts whose addon objects define

    def flowproof_normalize(self, request: dict, protocol: str) -> dict

Scripts load through mitmproxy's own script loader, so the file that works under
`mitmdump -s addons/model.py -s strip_session.py` works under `flowproof run` unchanged. Any
object in the module's `addons = [...]` list (the mitmproxy convention) with that method is
a rule named after its class; the other objects still join the proxy as plain addons.
"""

from __future__ import annotations

import logging
import traceback
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from flowproof_cli.errors import ConfigError
from flowproof_cli.match.rules import AddonRule

HOOK = "flowproof_normalize"


@dataclass(frozen=True)
class LoadedScript:
    path: Path
    addons: list[Any]  # every addon object of the script, for the proxy
    rules: list[AddonRule]  # the ones defining flowproof_normalize


class _Captured(logging.Handler):
    """mitmproxy's loader logs a failing script instead of raising: keep that record."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


def _line_in(path: Path, exc: BaseException) -> int | None:
    if isinstance(exc, SyntaxError) and exc.lineno is not None:
        return exc.lineno
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if Path(f.filename) == path]
    return frames[-1].lineno if frames else None


def _import_failure(path: Path, origin: str, records: list[logging.LogRecord]) -> ConfigError:
    exc_info = next((record.exc_info for record in records if record.exc_info), None)
    exc = exc_info[1] if exc_info else None
    if exc is None:
        return ConfigError(f"{path}: the matcher addon script ({origin}) could not be loaded")
    line = _line_in(path, exc)
    where = f"{path}:{line}" if line is not None else str(path)
    what = exc.msg if isinstance(exc, SyntaxError) else str(exc)
    return ConfigError(
        f"{where}: the matcher addon script ({origin}) does not import: "
        f"{type(exc).__name__}: {what}. Fix: run `python {path}` to see the problem"
    )


def load_matcher_script(path: Path, origin: str) -> LoadedScript:
    """Import one script; ConfigError (exit 2) naming the file when it is missing, does not
    import, or defines no usable addon."""
    if not path.is_file():
        raise ConfigError(
            f"{path}: the matcher addon script ({origin}) does not exist. Fix: check the path "
            "under `match.addons` (relative to the file that declares it)"
        )
    from mitmproxy.addons import script  # noqa: PLC0415 - only flows with addons pay for it

    captured = _Captured()
    script.logger.addHandler(captured)
    try:
        module = script.load_script(str(path))
    finally:
        script.logger.removeHandler(captured)
    if module is None:
        raise _import_failure(path, origin, captured.records)
    objects = list(getattr(module, "addons", None) or [])
    rules = [
        AddonRule(type(obj).__name__, getattr(obj, HOOK), origin=f"{origin}: {path.name}")
        for obj in objects
        if callable(getattr(obj, HOOK, None))
    ]
    if not rules:
        raise ConfigError(
            f"{path}: no addon in its `addons = [...]` list defines {HOOK}(self, request, "
            "protocol). Fix: add the method to an addon class and list an instance in `addons`"
        )
    return LoadedScript(path, objects, rules)


def rules_from_master_addons(objects: Iterable[Any]) -> list[AddonRule]:
    """Stock mitmdump/mitmweb: every loaded addon object that defines the hook, in order."""
    return [
        AddonRule(type(obj).__name__, getattr(obj, HOOK), origin="mitmproxy -s")
        for obj in objects
        if callable(getattr(obj, HOOK, None)) and not isinstance(obj, type | ModuleType)
    ]
