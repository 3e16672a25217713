"""Text from outside flowproof (a request path, an upstream's body, a server's line, an
exception) as an error message quotes it: control characters escaped, so no terminal escape
reaches the screen a verdict is printed on, and clipped, so one huge body cannot flood it.

At the bottom of the import graph: the addons, the model and MCP sessions and the stdio
stand-in all word their refusals with it.
"""

from __future__ import annotations

_DETAIL_LIMIT = 200


def printable(text: str) -> str:
    """`text` with every character that is not printable escaped (`\\x1b`, `\\n`)."""
    if text.isprintable():  # the usual case, on every request path: no per-character walk
        return text
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def quoted(raw: bytes | str, limit: int, *, encoding: str = "utf-8") -> str:
    """At most `limit` characters of `raw`, escaped, with `...` when there was more. Bytes are
    decoded with `encoding`, undecodable ones replaced."""
    text = raw if isinstance(raw, str) else raw.decode(encoding, "replace")
    return printable(text[:limit]) + ("..." if len(text) > limit else "")


def failure(exc: BaseException) -> str:
    """An exception as a message quotes it: its type and text, on one line, escaped, clipped."""
    text = " ".join(str(exc).split()) or "no detail"
    return f"{type(exc).__name__}: {quoted(text, _DETAIL_LIMIT)}"


def could_not_handle(path: str, exc: BaseException) -> str:
    """What the agent and the verdict are told when handling a request to `path` raised."""
    return (
        f"could not handle the request to {printable(path)} ({failure(exc)}); it was refused, "
        "not forwarded"
    )
