"""Reading and writing traces: deterministic YAML, written atomically.

Deterministic: the same trace gives the same bytes (sorted body keys, no timestamps, no
line folding). Reviewable: multi-line strings are literal blocks, so a one-word edit is a
one-line diff. Atomic: a temp file in the same folder is renamed over the target only once
it is complete, so a failed or interrupted record never leaves a partial or broken trace.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path
from typing import Any

import yaml

from flowproof_cli.errors import TraceError
from flowproof_cli.trace.envelope import Trace, from_document, to_document

TRACE_SUFFIX = ".trace.yaml"
SPEC_SUFFIX = ".flow.yaml"
HEADER = (
    "# flowproof trace: the recorded model traffic of one flow. Commit it and review it\n"
    "# like code; re-create it with `flowproof record <spec>`.\n"
)

_Dumper: type[yaml.SafeDumper] = getattr(yaml, "CSafeDumper", yaml.SafeDumper)
_Loader: type[yaml.SafeLoader] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _TraceDumper(_Dumper):  # type: ignore[misc,valid-type]
    """Literal blocks for multi-line text; everything else as PyYAML's safe default."""


def _represent_str(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    if "\n" in value:
        return dumper.represent_scalar("tag:yaml.org,2002:str", value, style="|")
    return dumper.represent_scalar("tag:yaml.org,2002:str", value)


_TraceDumper.add_representer(str, _represent_str)


def trace_path_for(spec_path: Path) -> Path:
    """`x.flow.yaml` -> `x.trace.yaml` beside it."""
    name = spec_path.name
    stem = name[: -len(SPEC_SUFFIX)] if name.endswith(SPEC_SUFFIX) else spec_path.stem
    return spec_path.with_name(stem + TRACE_SUFFIX)


def dumps(trace: Trace) -> str:
    body = yaml.dump(
        to_document(trace),
        Dumper=_TraceDumper,
        sort_keys=False,
        allow_unicode=True,
        width=1 << 30,
        default_flow_style=False,
    )
    return HEADER + body


def loads(text: str, source: str = "<trace>") -> Trace:
    try:
        document: Any = yaml.load(text, Loader=_Loader)  # noqa: S506 - a safe loader
    except yaml.YAMLError as exc:
        raise TraceError(f"{source}: not valid YAML: {exc}") from exc
    return from_document(document, source)


def load(path: Path) -> Trace:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        raise TraceError(f"no trace at {path}") from exc
    except OSError as exc:
        raise TraceError(f"cannot read the trace {path}: {exc.strerror}") from exc
    return loads(text, str(path))


def write_atomic(path: Path, text: str) -> None:
    """Write a complete file or nothing: temp file, fsync, rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            stream.write(text)
            stream.flush()
            os.fsync(stream.fileno())
        os.replace(temp_name, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp_name)
        raise


def save(path: Path, trace: Trace) -> None:
    write_atomic(path, dumps(trace))
