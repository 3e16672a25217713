"""The limits every YAML file flowproof reads is held to (specs, suites, traces), and the
checks that enforce them before any cost is paid.

A few bytes of YAML can stand for enormous data: an alias (`*name`) repeats a whole subtree,
so a kilobyte of nested aliases expands to gigabytes ("billion laughs"), and deep nesting
overflows the stack of any recursive code that walks it. Both are refused on the composed
node graph, whose size is linear in the text, so a refusal costs no more than reading the
file. Every refusal is a `YamlRefused` carrying the 1-based line it concerns; the spec and the
trace loaders turn it into their own error with the file name and a fix.
"""

from __future__ import annotations

import errno
import os
import re
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

#: A spec or a suite is written by hand: a megabyte is far beyond any real one.
MAX_SPEC_BYTES = 1 << 20
#: A trace holds recorded traffic; a 2,000-turn trace of 50 KB requests is about 100 MB.
MAX_TRACE_BYTES = 256 << 20
#: Nested lists and mappings, the top level being level 1.
MAX_SPEC_DEPTH = 100
#: A trace wraps recorded bodies in its own few levels (turns, request, ...).
MAX_TRACE_DEPTH = 128
#: What aliases may add, measured like JSON text: a repeated scalar counts its length + 1,
#: a repeated list or mapping everything below it. Without aliases nothing is added.
MAX_ALIAS_EXPANSION = 1_000_000

_SURROGATE = re.compile("[\ud800-\udfff]")
_CONTROL_NAMES = {0x00: "NUL", 0x07: "BEL", 0x08: "BS", 0x0B: "VT", 0x0C: "FF", 0x1B: "ESC"}
_CONTROL_NAMES[0x7F] = "DEL"


class YamlRefused(Exception):
    """The YAML breaks one of the limits above (or cannot be read as its tag says). `fix`
    is worded for a file the user writes (a spec, a suite); a trace has its own."""

    def __init__(self, message: str, line: int | None = None, fix: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.line = line
        self.fix = fix or "Fix: see docs/spec.md#limits"

    def at(self, line: int | None) -> YamlRefused:
        """The same refusal at another line (a chunk's line moved to the file's)."""
        return YamlRefused(self.message, line, self.fix)


_NOT_REGULAR = "Fix: pass the YAML file itself"
TOO_BIG_FIX = "Fix: keep the file small; large mock data belongs in the agent's own fixtures"
_FLATTEN = "Fix: flatten the data (a mock result may also be a JSON string)"


def mb(limit: int) -> str:
    return f"{limit >> 20} MiB"


_KINDS = (
    (stat.S_ISDIR, "a folder"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def what_it_is(path: Path | str, mode: int) -> str:
    """`path` (stat mode `mode`, not a regular file) in words: a FIFO, a device, or a
    symbolic link to one, named by its target."""
    kind = next((name for test, name in _KINDS if test(mode)), "not a file")
    if os.path.islink(path):
        return f"a symbolic link to {os.readlink(path)}, {kind}"
    return kind


def check_regular(path: Path, limit: int) -> None:
    """Refuse, from its stat alone, anything but a regular file of at most `limit` bytes: a
    FIFO or a device would block the open or never end, and an oversized file is refused
    without reading it. A symbolic link loop is said to be one; other OSErrors (missing,
    unreadable) propagate for the caller to word."""
    try:
        info = os.stat(path)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise YamlRefused(
                "it is a symbolic link loop, not a regular file", fix=_NOT_REGULAR
            ) from None
        raise
    if not stat.S_ISREG(info.st_mode):
        raise YamlRefused(
            f"it is {what_it_is(path, info.st_mode)}, not a regular file", fix=_NOT_REGULAR
        )
    if info.st_size > limit:
        raise YamlRefused(
            f"it is {info.st_size:,} bytes; the limit is {mb(limit)}", fix=TOO_BIG_FIX
        )


def read_limited(path: Path, limit: int) -> bytes:
    """The bytes of a regular file of at most `limit` bytes (see `check_regular`)."""
    check_regular(path, limit)
    with open(path, "rb") as stream:
        data = stream.read(limit + 1)
    if len(data) > limit:  # it grew after the stat
        raise YamlRefused(f"it is over {mb(limit)}, the limit", fix=TOO_BIG_FIX)
    return data


def decode_utf8(data: bytes) -> str:
    """The text of UTF-8 bytes; a bad byte is refused at its line and column."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise not_utf8(data, exc) from None


def not_utf8(data: bytes, exc: UnicodeDecodeError) -> YamlRefused:
    line_start = data.rfind(b"\n", 0, exc.start) + 1
    line = data.count(b"\n", 0, exc.start) + 1
    column = len(data[line_start : exc.start].decode("utf-8", "replace")) + 1
    return YamlRefused(
        f"not UTF-8 text: byte 0x{data[exc.start]:02x} at column {column} ({exc.reason})",
        line,
        "Fix: save the file as UTF-8",
    )


def control_character(
    exc: yaml.reader.ReaderError, text: str, *, byte_offsets: bool = False
) -> YamlRefused:
    """A character YAML does not allow (NUL, ESC, DEL, ...), at its line. The C reader
    (`byte_offsets`) counts its position in UTF-8 bytes, the Python one in characters."""
    position = int(exc.position)
    if byte_offsets:
        line = text.encode("utf-8", "surrogatepass").count(b"\n", 0, position) + 1
    else:
        line = text.count("\n", 0, position) + 1
    code = exc.character if isinstance(exc.character, int) else ord(str(exc.character)[:1] or "?")
    name = _CONTROL_NAMES.get(code)
    what = f"U+{code:04X}" + (f" ({name})" if name else "")
    return YamlRefused(
        f"the character {what} is not allowed in YAML text",
        line,
        "Fix: delete it, or write it as an escape inside a double-quoted string (e.g. `\\x1b`)",
    )


def check_surrogates(root: Node | None) -> None:
    """Refuse a lone UTF-16 surrogate (U+D800 to U+DFFF), which only an escape such as
    `"\\ud800"` writes: no UTF-8 text can carry it, so no argument, variable, request body
    or trace could hold the value. Each node is looked at once, aliases or not."""
    seen: set[int] = set()
    stack = [root] if root is not None else []
    while stack:
        node = stack.pop()
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, ScalarNode):
            bad = _SURROGATE.search(str(node.value))
            if bad is not None:
                raise YamlRefused(
                    f"the escape for U+{ord(bad.group()):04X} writes a lone surrogate, half of "
                    "a UTF-16 pair and no character, which no UTF-8 text can carry",
                    line_of(node),
                    "Fix: write the character itself, or its `\\U` escape (e.g. `\\U0001F600`)",
                )
        else:
            stack.extend(_children(node))


# --- the node graph ---------------------------------------------------------------------


def line_of(node: Node) -> int:
    return int(node.start_mark.line) + 1


@dataclass
class _Frame:
    node: Node
    depth: int
    children: Any  # an iterator over the child nodes
    size: int = 1
    height: int = 1


def _children(node: Node) -> list[Node]:
    if isinstance(node, SequenceNode):
        return list(node.value)
    return [part for pair in node.value for part in pair]


def _weight(node: Node) -> int:
    return len(str(node.value)) + 1


def check_graph(
    root: Node | None,
    *,
    max_depth: int,
    max_alias_expansion: int = MAX_ALIAS_EXPANSION,
    duplicates: bool = False,
    aliases: bool = True,
) -> None:
    """Refuse nesting beyond `max_depth`, an alias inside itself, aliases adding more than
    `max_alias_expansion`, and (with `duplicates`) a mapping with a key twice.

    Iterative, and each node is walked once however often aliases repeat it: the cost is
    that of the text, not of what it expands to. `aliases=False` (the text has no `&`, so
    no anchor) skips the bookkeeping of nodes already met."""
    if not isinstance(root, SequenceNode | MappingNode):
        return
    _Walk(max_depth, max_alias_expansion, duplicates, aliases).run(root)


class _Walk:
    def __init__(self, max_depth: int, max_alias_expansion: int, duplicates: bool, aliases: bool):
        self.max_depth = max_depth
        self.budget = max_alias_expansion
        self.duplicates = duplicates
        self.aliases = aliases
        self.done: dict[int, tuple[int, int]] = {}  # id -> (expanded size, height)
        self.open: set[int] = set()
        self.added = 0

    def run(self, root: Node) -> None:
        stack = [self._enter(root, 1)]
        while stack:
            frame = stack[-1]
            child = next(frame.children, None)
            if child is None:
                stack.pop()
                self._leave(frame, stack[-1] if stack else None)
            elif not isinstance(child, SequenceNode | MappingNode):
                frame.size += _weight(child)
                if not self.aliases:
                    continue
                if id(child) in self.done:
                    self._repeat(frame, child, _weight(child), 0)
                else:
                    self.done[id(child)] = (_weight(child), 0)
            elif id(child) in self.open:
                raise YamlRefused(
                    f"the alias of the anchor at line {line_of(child)} is inside that anchor's "
                    "own data, so it never ends",
                    line_of(frame.node),
                    "Fix: point the alias at an anchor outside the data that holds it",
                )
            elif id(child) in self.done:
                size, height = self.done[id(child)]
                self._repeat(frame, child, size, height)
                frame.size += size
                frame.height = max(frame.height, height + 1)
            else:
                stack.append(self._enter(child, frame.depth + 1))

    def _enter(self, node: Node, depth: int) -> _Frame:
        if depth > self.max_depth:
            raise YamlRefused(too_deep(self.max_depth), line_of(node), _FLATTEN)
        if self.duplicates and isinstance(node, MappingNode):
            duplicate_key(node)
        if self.aliases:
            self.open.add(id(node))
        return _Frame(node, depth, iter(_children(node)))

    def _leave(self, frame: _Frame, parent: _Frame | None) -> None:
        if self.aliases:
            self.open.discard(id(frame.node))
            self.done[id(frame.node)] = (frame.size, frame.height)
        if parent is not None:
            parent.size += frame.size
            parent.height = max(parent.height, frame.height + 1)

    def _repeat(self, frame: _Frame, child: Node, size: int, height: int) -> None:
        """`child` is met again: an alias repeats its whole expansion."""
        self.added += size
        if self.added > self.budget:
            raise YamlRefused(
                f"aliases (`*name`) repeat more than {self.budget:,} characters of data "
                f"(the anchor at line {line_of(child)} and others), a YAML alias bomb",
                line_of(frame.node),
                "Fix: write the data out, or repeat less of it through aliases",
            )
        if frame.depth + height > self.max_depth:
            raise YamlRefused(too_deep(self.max_depth), line_of(frame.node), _FLATTEN)


def too_deep(limit: int) -> str:
    return f"lists and mappings nest deeper than {limit} levels here, the limit"


def duplicate_key(node: MappingNode) -> None:
    """Refuse a plain key written twice in one mapping (YAML would keep the last silently)."""
    seen: set[tuple[str, str]] = set()
    for key, _ in node.value:
        if isinstance(key, ScalarNode):
            entry = (key.tag, key.value)
            if entry in seen:
                raise YamlRefused(
                    f"the key `{key.value}` is written twice", line_of(key), "Fix: keep only one"
                )
            seen.add(entry)


# --- composition ---------------------------------------------------------------------------


class NestingLimit:
    """Mix into a pure-Python loader (before it): nesting beyond `max_depth` is refused while
    composing. The composer is recursive (three frames a level), so a deeper document must
    never reach it: it would overflow the stack before any check of the finished graph."""

    max_depth = MAX_SPEC_DEPTH
    _depth = 0

    def compose_node(self, parent: Node | None, index: Any) -> Node:
        self._depth += 1
        try:
            if self._depth > self.max_depth and (
                self.check_event(yaml.SequenceStartEvent)  # type: ignore[attr-defined]
                or self.check_event(yaml.MappingStartEvent)  # type: ignore[attr-defined]
            ):
                mark = self.peek_event().start_mark  # type: ignore[attr-defined]
                raise YamlRefused(too_deep(self.max_depth), mark.line + 1, _FLATTEN)
            return super().compose_node(parent, index)  # type: ignore[misc]
        finally:
            self._depth -= 1


class _SpecComposer(NestingLimit, yaml.SafeLoader):
    """Nodes only: what a reader of a few keys needs, with no data built."""


def compose_spec(path: Path) -> Node | None:
    """The node graph of a spec file, within every limit but the aliases' (no data is built
    from it, so nothing expands); OSError, yaml.YAMLError and YamlRefused propagate."""
    loader = _SpecComposer(decode_utf8(read_limited(path, MAX_SPEC_BYTES)))
    try:
        return loader.get_single_node()
    finally:
        loader.dispose()


# --- construction ---------------------------------------------------------------------------


def refuse_tag(loader: Any, node: Node) -> Any:
    """The constructor of every tag the safe loaders do not know (`!!python/...`, `!x`)."""
    tag = str(node.tag).replace("tag:yaml.org,2002:", "!!")
    raise YamlRefused(
        f"the tag `{tag}` is not allowed: only plain data is read",
        line_of(node),
        "Fix: remove the tag (quote a value that starts with `!`)",
    )


def unreadable(node: Node, exc: Exception) -> YamlRefused:
    """A scalar the safe constructor failed on (`!!int x`, a 5,000-digit number, ...)."""
    tag = str(node.tag).replace("tag:yaml.org,2002:", "!!")
    value = str(node.value)
    shown = value if len(value) <= 40 else value[:37] + "..."
    return YamlRefused(
        f"`{shown}` cannot be read as `{tag}` ({exc})",
        line_of(node),
        "Fix: quote the value to keep it as text, or correct it",
    )


class GuardedConstructor:
    """Mix into a SafeLoader (before it): unknown tags are refused by name, and a value the
    constructor fails on becomes a YamlRefused at its line instead of a bare exception."""

    def construct_object(self, node: Node, deep: bool = False) -> Any:
        try:
            return super().construct_object(node, deep)  # type: ignore[misc]
        except (yaml.YAMLError, YamlRefused):
            raise
        except Exception as exc:  # every constructor failure has one answer
            raise unreadable(node, exc) from None


def _timestamp_as_text(loader: Any, node: Node) -> str:
    return str(node.value)


def guard(loader_class: type[Any]) -> type[Any]:
    """Register the refusal of unknown tags, and timestamps kept as text (JSON has no dates),
    on a loader class that mixes in GuardedConstructor."""
    loader_class.add_constructor(None, refuse_tag)
    loader_class.add_constructor("tag:yaml.org,2002:timestamp", _timestamp_as_text)
    return loader_class
