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

import dataclasses
import io
import os
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from flowproof_cli.errors import TraceError
from flowproof_cli.process import discard_staged, stage, write_atomic
from flowproof_cli.spec import yaml_limits as limits
from flowproof_cli.trace.envelope import (
    FIX,
    Lines,
    Trace,
    from_document,
    to_document,
    trace_error,
)

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
    document, lines = _read_document(io.StringIO(text), lambda: text, source)
    return from_document(document, source, lines)


def load(path: Path) -> Trace:
    """Read a trace file. Nothing is opened before the file is known to be a regular file
    within the size limit (a FIFO would block the open), and a file that does not end with
    a line break is refused as truncated: every trace the writer writes ends with one."""
    source = str(path)
    try:
        _check_file(path)
        with path.open(encoding="utf-8") as stream:
            document, lines = _read_document(
                stream, lambda: path.read_text(encoding="utf-8"), source
            )
    except FileNotFoundError as exc:
        raise TraceError(f"no trace at {path}") from exc
    except OSError as exc:
        raise TraceError(
            f"cannot read the trace {path}: {exc.strerror}. Fix: check the file's permissions"
        ) from exc
    except UnicodeDecodeError:
        raise _not_utf8(path) from None
    return from_document(document, source, lines)


def _check_file(path: Path) -> None:
    try:
        limits.check_regular(path, limits.MAX_TRACE_BYTES)
    except limits.YamlRefused as exc:
        fix = (
            "Fix: pass the trace file itself"
            if "regular" in exc.message
            else "Fix: record a shorter flow, or split it into several flows"
        )
        raise TraceError(f"{path}: the trace cannot be read: {exc.message}. {fix}") from None
    with path.open("rb") as stream:
        if stream.seek(0, os.SEEK_END) == 0:
            return
        stream.seek(-1, os.SEEK_END)
        if stream.read(1) == b"\n":
            return
        stream.seek(0)
        line = stream.read().count(b"\n") + 1
    raise trace_error(
        f"{path}:{line}",
        "the file ends mid-line, so it looks truncated (every trace ends with a line break)",
    )


def _not_utf8(path: Path) -> TraceError:
    data = path.read_bytes()
    try:
        data.decode("utf-8")
    except UnicodeDecodeError as exc:
        refused = limits.not_utf8(data, exc)
        return TraceError(
            f"{path}:{refused.line}: {refused.message}. Fix: save it as UTF-8, or restore it "
            "from version control"
        )
    return TraceError(f"{path}: not UTF-8 text. Fix: save it as UTF-8")  # changed meanwhile


# -- reading ------------------------------------------------------------------------------

_STR = "tag:yaml.org,2002:str"
_MAP = "tag:yaml.org,2002:map"
_SEQ = "tag:yaml.org,2002:seq"


class _TraceLoader(limits.GuardedConstructor, _Loader):  # type: ignore[misc,valid-type]
    """The safe loader, with unknown tags refused by name, a value its tag cannot read
    refused at its line, and timestamps kept as text (JSON has no dates)."""


limits.guard(_TraceLoader)


class _Unusual(Exception):
    """The text is not laid out as `dumps` writes it: parse it as one document instead."""


def _read_document(lines: Iterable[str], whole: Any, source: str) -> tuple[Any, Lines]:
    """The YAML document and where its parts are, read turn by turn when it has the layout
    `dumps` writes (a top-level `turns:` whose items start with `- ` in column 0); anything
    else, or any item that does not parse alone, is parsed whole by `whole()`'s text, which
    also locates any YAML error. Either way the limits of `yaml_limits` hold (nesting,
    aliases, tags) and a key written twice is refused."""
    try:
        try:
            return _ByTurn().read(lines)
        except _Unusual:
            pass
        text = whole()
        try:
            return _read_whole(text)
        except yaml.reader.ReaderError as exc:
            raise limits.control_character(exc, text, byte_offsets=True) from None
    except limits.YamlRefused as exc:
        raise trace_error(f"{source}:{exc.line}" if exc.line else source, exc.message) from None
    except yaml.YAMLError as exc:
        raise TraceError(f"{source}: not valid YAML: {exc}. {FIX}") from exc


def _read_whole(text: str) -> tuple[Any, Lines]:
    loader = _TraceLoader(text)
    try:
        root = loader.get_single_node()
        limits.check_graph(
            root, max_depth=limits.MAX_TRACE_DEPTH, duplicates=True, aliases="&" in text
        )
        lines = dataclasses.replace(_lines_of(root, _same), last=text.count("\n"))
        return (loader.construct_document(root) if root is not None else None), lines
    finally:
        loader.dispose()


def _same(line: int) -> int:
    return line


def _lines_of(root: Node | None, to_file: Callable[[int], int], turns: Sequence[int] = ()) -> Lines:
    """The lines of the top-level keys, of the turns and of the MCP servers under `root`."""
    keys: dict[str, int] = {}
    servers: dict[str, int] = {}
    found = list(turns)
    for key, value in root.value if isinstance(root, MappingNode) else ():
        if not isinstance(key, ScalarNode):
            continue
        keys.setdefault(str(key.value), to_file(limits.line_of(key)))
        if key.value == "mcp" and isinstance(value, MappingNode):
            servers = {
                str(name.value): to_file(limits.line_of(name))
                for name, _ in value.value
                if isinstance(name, ScalarNode)
            }
        elif key.value == "turns" and isinstance(value, SequenceNode) and not found:
            found = [to_file(limits.line_of(item)) for item in value.value]
    return Lines(keys, found, servers)


class _ByTurn:
    """Reads the layout `dumps` writes one turn at a time: each `- ...` item of the top-level
    `turns:` is parsed alone; every other line (the head) is parsed together at the end.
    Lines of the head after the turns are moved back by the turns' lines in messages."""

    def __init__(self) -> None:
        self.head: list[str] = []
        self.turns: list[Any] | None = None
        self.turn_lines: list[int] = []
        self.item: list[str] = []
        self.item_line = 0
        self.turns_key = 0  # the line of `turns:`
        self.skipped = 0  # the lines of the turns (with `turns:`), when the head goes on after
        self.strings: dict[str, str] = {}  # equal strings across turns share one object

    def read(self, lines: Iterable[str]) -> tuple[Any, Lines]:
        in_turns = False
        number = 0
        for number, line in enumerate(lines, start=1):
            if in_turns:
                if line.startswith("- ") or line.rstrip("\r\n") == "-":
                    self._flush()
                    self.item, self.item_line = [line], number
                    continue
                if not line[:1].strip() or line.startswith("#"):  # indented, blank, a comment
                    if not self.item and line.strip() and not line.lstrip().startswith("#"):
                        raise _Unusual  # an indented sequence
                    self.item.append(line)
                    continue
                self._flush()
                self.item, in_turns, self.skipped = [], False, number - self.turns_key
            if line.rstrip("\r\n") == "turns:":
                if self.turns is not None:
                    raise _Unusual  # a repeated key: the whole parse names it
                self.turns, in_turns, self.turns_key = [], True, number
                continue
            self.head.append(line)
        self._flush()
        document, found = self._document()
        return document, dataclasses.replace(found, last=number)

    def _document(self) -> tuple[Any, Lines]:
        document, root = (
            self._parse("".join(self.head), 1, self._head_line) if self.head else (None, None)
        )
        lines = _lines_of(root, self._head_line, self.turn_lines)
        if self.turns is None:
            return document, lines
        if document is None:
            document = {}
        if not isinstance(document, dict) or "turns" in document:
            raise _Unusual
        document["turns"] = self.turns
        return document, Lines({**lines.keys, "turns": self.turns_key}, lines.turns, lines.servers)

    def _head_line(self, line: int) -> int:
        return line if line < self.turns_key or not self.turns_key else line + self.skipped

    def _flush(self) -> None:
        """Parse one `- ...` item of the turns (a one-element sequence) onto `turns`."""
        if not self.item or self.turns is None:
            return
        first = self.item_line
        value, _ = self._parse("".join(self.item), 2, lambda line: line + first - 1)
        if not isinstance(value, list) or len(value) != 1:
            raise _Unusual
        self.turns.append(value[0])
        self.turn_lines.append(first)

    def _parse(self, text: str, depth: int, to_file: Callable[[int], int]) -> tuple[Any, Any]:
        """A chunk's value and root node; `depth` is its root's level in the document."""
        loader = _TraceLoader(text)
        try:
            node = loader.get_single_node()
            if node is None:
                return None, None
            if "&" in text:  # an anchor: aliases may repeat it, so bound what they add
                limits.check_graph(
                    node, max_depth=limits.MAX_TRACE_DEPTH - depth + 1, duplicates=True
                )
            return _build(node, loader, self.strings, depth), node
        except limits.YamlRefused as exc:
            raise exc.at(exc.line and to_file(exc.line)) from None
        except (yaml.YAMLError, RecursionError):
            raise _Unusual from None  # an alias to another item, a YAML error
        finally:
            loader.dispose()


def _build(node: Node, loader: Any, strings: dict[str, str], depth: int) -> Any:
    """The value of a node: plain strings, lists and string-keyed maps built directly (the
    bulk of a trace, several times faster than the generic constructor), the rest by it.
    `depth` is the node's level, refused beyond the limit; a key written twice is refused."""
    kind = type(node)
    if kind is ScalarNode:
        if node.tag == _STR:
            return strings.setdefault(node.value, node.value)
        return loader.construct_object(node)  # numbers, bools, null, tags
    if depth > limits.MAX_TRACE_DEPTH:
        raise limits.YamlRefused(limits.too_deep(limits.MAX_TRACE_DEPTH), limits.line_of(node))
    if kind is SequenceNode and node.tag == _SEQ:
        return [_build(child, loader, strings, depth + 1) for child in node.value]
    if kind is MappingNode and node.tag == _MAP and all(k.tag == _STR for k, _ in node.value):
        built = {
            strings.setdefault(key.value, key.value): _build(value, loader, strings, depth + 1)
            for key, value in node.value
        }
        if len(built) != len(node.value) and isinstance(node, MappingNode):
            limits.duplicate_key(node)
        return built
    limits.check_graph(node, max_depth=limits.MAX_TRACE_DEPTH - depth + 1, duplicates=True)
    return loader.construct_object(node, deep=True)  # merge keys, other keys, tags


def check_writable(path: Path) -> None:
    """Raise TraceError unless a trace can be written at `path`, found out before anything
    runs: `path` is not a folder, and a file can be created in its folder (or, when that
    folder does not exist yet, in the nearest folder above it that does). The test creates
    a held temporary file there and removes it at once."""
    if path.is_dir():
        raise TraceError(
            f"cannot write the trace {path}: it is a folder. Fix: name a file, e.g. "
            f"`-o {path / 'x.trace.yaml'}`"
        )
    folder = next((above for above in path.parents if above.exists()), Path("/"))
    if not folder.is_dir():
        raise TraceError(
            f"cannot write the trace {path}: {folder} is not a folder. Fix: write the trace "
            "elsewhere with `-o PATH`"
        )
    try:
        discard_staged(stage(folder / path.name, ""))
    except OSError as exc:
        raise TraceError(
            f"cannot write the trace {path}: the folder {folder} is not writable "
            f"({exc.strerror or exc}). Fix: make {folder} writable, or write the trace "
            "elsewhere with `-o PATH`"
        ) from None


def save(path: Path, trace: Trace) -> None:
    write_atomic(path, dumps(trace))
