"""Reading and writing traces: deterministic YAML, written atomically.

Deterministic: the same trace gives the same bytes (sorted body keys, no timestamps, no
line folding). Reviewable: multi-line strings are literal blocks, so a one-word edit is a
one-line diff. Atomic: a temp file in the same folder is renamed over the target only once
it is complete, so a failed or interrupted record never leaves a partial or broken trace.

Reading streams the file one turn at a time (see `_read_document`): a whole-document parse of
a big trace holds the text, the node graph and the objects at once, several times the size
of the turns themselves.
"""

from __future__ import annotations

import contextlib
import io
import os
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

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
    return from_document(_read_document(io.StringIO(text), lambda: text, source), source)


def load(path: Path) -> Trace:
    try:
        with path.open(encoding="utf-8") as stream:
            document = _read_document(stream, lambda: path.read_text(encoding="utf-8"), str(path))
    except FileNotFoundError as exc:
        raise TraceError(f"no trace at {path}") from exc
    except OSError as exc:
        raise TraceError(f"cannot read the trace {path}: {exc.strerror}") from exc
    except UnicodeDecodeError as exc:
        raise TraceError(f"{path}: not UTF-8 text ({exc.reason}); save it as UTF-8") from None
    return from_document(document, str(path))


# -- reading ------------------------------------------------------------------------------

_STR = "tag:yaml.org,2002:str"
_MAP = "tag:yaml.org,2002:map"
_SEQ = "tag:yaml.org,2002:seq"


class _Unusual(Exception):
    """The text is not laid out as `dumps` writes it: parse it as one document instead."""


def _read_document(lines: Iterable[str], whole: Any, source: str) -> Any:
    """The YAML document, read turn by turn when it has the layout `dumps` writes (a top-level
    `turns:` whose items start with `- ` in column 0); anything else, or any item that does
    not parse alone, is parsed whole by `whole()`'s text, which also locates any YAML error."""
    try:
        return _read_by_turn(lines)
    except _Unusual:
        pass
    try:
        return yaml.load(whole(), Loader=_Loader)  # noqa: S506 - a safe loader
    except yaml.YAMLError as exc:
        raise TraceError(f"{source}: not valid YAML: {exc}") from exc


def _read_by_turn(lines: Iterable[str]) -> Any:
    head: list[str] = []  # every line outside the turns, parsed together at the end
    turns: list[Any] | None = None
    item: list[str] = []
    strings: dict[str, str] = {}  # equal strings across turns share one object
    in_turns = False
    for line in lines:
        if in_turns:
            if line.startswith("- ") or line.rstrip("\r\n") == "-":
                _flush(item, turns, strings)
                item = [line]
                continue
            if not line[:1].strip() or line.startswith("#"):  # indented, blank, a comment
                if not item and line.strip() and not line.lstrip().startswith("#"):
                    raise _Unusual  # an indented sequence
                item.append(line)
                continue
            _flush(item, turns, strings)
            item, in_turns = [], False
        if line.rstrip("\r\n") == "turns:":
            if turns is not None:
                raise _Unusual  # a repeated key: the whole parse says what wins
            turns, in_turns = [], True
            continue
        head.append(line)
    _flush(item, turns, strings)
    document = _parse(_Loader("".join(head)), strings) if head else None
    if turns is None:
        return document
    if document is None:
        document = {}
    if not isinstance(document, dict) or "turns" in document:
        raise _Unusual
    document["turns"] = turns
    return document


def _flush(item: list[str], turns: list[Any] | None, strings: dict[str, str]) -> None:
    """Parse one `- ...` item of the turns (a one-element sequence) onto `turns`."""
    if not item or turns is None:
        return
    value = _parse(_Loader("".join(item)), strings)
    if not isinstance(value, list) or len(value) != 1:
        raise _Unusual
    turns.append(value[0])


def _parse(loader: Any, strings: dict[str, str]) -> Any:
    try:
        node = loader.get_single_node()
        return None if node is None else _build(node, loader, strings)
    except (yaml.YAMLError, RecursionError):
        raise _Unusual from None  # an alias to another item, a cycle, a YAML error
    finally:
        loader.dispose()


def _build(node: Node, loader: Any, strings: dict[str, str]) -> Any:
    """The value of a node: plain strings, lists and string-keyed maps built directly (the
    bulk of a trace, several times faster than the generic constructor), the rest by it."""
    kind = type(node)
    if kind is ScalarNode and node.tag == _STR:
        return strings.setdefault(node.value, node.value)
    if kind is SequenceNode and node.tag == _SEQ:
        return [_build(child, loader, strings) for child in node.value]
    if kind is MappingNode and node.tag == _MAP and all(k.tag == _STR for k, _ in node.value):
        return {
            strings.setdefault(key.value, key.value): _build(value, loader, strings)
            for key, value in node.value
        }
    return loader.construct_object(node, deep=True)  # numbers, bools, null, merge keys, tags


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
