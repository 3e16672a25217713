"""AWS event-stream frames (`application/vnd.amazon.eventstream`), written and read.

Bedrock's streaming calls (ConverseStream, InvokeModelWithResponseStream) answer with
binary frames, not SSE. Each frame is::

    total length (u32) | headers length (u32) | CRC32 of those 8 bytes (u32)
    headers: name length (u8) | name | type (u8) | value ...   (type 7: u16 length | UTF-8)
    payload
    CRC32 of everything before it (u32)

all big-endian. A client (botocore, the AWS SDK for JavaScript) checks both CRCs and drops
the connection on a mismatch, so a synthesized stream must carry them exactly. Only the
string header type is written: it is the only one Bedrock's event headers use. Stdlib only.
"""

from __future__ import annotations

import functools
import json
import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from flowproof_cli.canonical import compact_json

CONTENT_TYPE = "application/vnd.amazon.eventstream"
_PRELUDE = struct.Struct(">II")
_U32 = struct.Struct(">I")
_STRING = 7
#: Header value types and their fixed sizes (0 and 1 are true/false without a value).
_FIXED = {0: 0, 1: 0, 2: 1, 3: 2, 4: 4, 5: 8, 8: 8, 9: 16}


class FrameError(ValueError):
    """Bytes that are not a well-formed event-stream frame (a short read, a CRC mismatch)."""


@dataclass(frozen=True)
class Frame:
    """One decoded frame: its headers (string values; others as their raw bytes) and
    payload."""

    headers: dict[str, Any]
    payload: bytes

    @property
    def event_type(self) -> str | None:
        value = self.headers.get(":event-type")
        return value if isinstance(value, str) else None

    def json(self) -> Any:
        return json.loads(self.payload) if self.payload else None


def _header(name: str, value: str) -> bytes:
    key, data = name.encode(), value.encode()
    return bytes([len(key)]) + key + bytes([_STRING]) + struct.pack(">H", len(data)) + data


def frame(headers: dict[str, str], payload: bytes) -> bytes:
    """One frame with string headers, in the order given."""
    return _framed(b"".join(_header(name, value) for name, value in headers.items()), payload)


def _framed(head: bytes, payload: bytes) -> bytes:
    prelude = _PRELUDE.pack(16 + len(head) + len(payload), len(head))
    message = b"".join((prelude, _U32.pack(zlib.crc32(prelude)), head, payload))
    return message + _U32.pack(zlib.crc32(message))


@functools.lru_cache(maxsize=64)
def _event_head(event_type: str) -> bytes:
    """The headers of an event frame (a stream has a handful of event types: built once)."""
    return b"".join(
        (
            _header(":event-type", event_type),
            _header(":content-type", "application/json"),
            _header(":message-type", "event"),
        )
    )


def event(event_type: str, payload: Any) -> bytes:
    """An event frame as Bedrock sends one: `:event-type`, JSON content, message type
    `event`."""
    return _framed(_event_head(event_type), compact_json(payload).encode())


def exception(exception_type: str, message: str) -> bytes:
    """An exception frame (a stream that fails after it started)."""
    headers = {
        ":exception-type": exception_type,
        ":content-type": "application/json",
        ":message-type": "exception",
    }
    return frame(headers, compact_json({"message": message}).encode())


def _headers(data: bytes) -> dict[str, Any]:
    headers: dict[str, Any] = {}
    at = 0
    while at < len(data):
        size = data[at]
        name = data[at + 1 : at + 1 + size].decode()
        at += 1 + size
        kind = data[at]
        at += 1
        if kind in _FIXED:
            headers[name] = data[at : at + _FIXED[kind]]
            at += _FIXED[kind]
            continue
        (length,) = struct.unpack_from(">H", data, at)
        value = data[at + 2 : at + 2 + length]
        headers[name] = value.decode() if kind == _STRING else value
        at += 2 + length
    return headers


def frames(data: bytes) -> Iterator[Frame]:
    """The frames of a whole stream, in order; FrameError at the first bad one."""
    at = 0
    while at < len(data):
        if len(data) - at < 16:
            raise FrameError(f"{len(data) - at} trailing byte(s) are not a frame")
        total, head_size = _PRELUDE.unpack_from(data, at)
        (prelude_crc,) = _U32.unpack_from(data, at + 8)
        if zlib.crc32(data[at : at + 8]) != prelude_crc:
            raise FrameError(f"the frame at byte {at} has a bad prelude CRC")
        if total < 16 + head_size or at + total > len(data):
            raise FrameError(f"the frame at byte {at} claims {total} bytes")
        (message_crc,) = _U32.unpack_from(data, at + total - 4)
        if zlib.crc32(data[at : at + total - 4]) != message_crc:
            raise FrameError(f"the frame at byte {at} has a bad message CRC")
        try:
            headers = _headers(data[at + 12 : at + 12 + head_size])
        except (IndexError, struct.error, UnicodeDecodeError) as exc:
            raise FrameError(f"the frame at byte {at} has unreadable headers ({exc})") from None
        yield Frame(headers, data[at + 12 + head_size : at + total - 4])
        at += total


def looks_like_frames(data: bytes) -> bool:
    """Whether a body starts with a frame whose prelude CRC holds (cheap, no full decode)."""
    if len(data) < 16:
        return False
    return zlib.crc32(data[:8]) == _U32.unpack_from(data, 8)[0]
