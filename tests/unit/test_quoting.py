"""quoting.py: outside text as a message quotes it, escaped and clipped."""

from __future__ import annotations

from flowproof_cli.quoting import could_not_handle, failure, printable, quoted


def test_control_characters_are_escaped_so_no_terminal_escape_reaches_the_screen() -> None:
    assert printable("ok\x1b[2Jdone\n\t") == "ok\\x1b[2Jdone\\n\\t"
    assert printable("café, 東京") == "café, 東京"  # printable text is left alone


def test_quoted_clips_and_says_so() -> None:
    assert quoted("abcdef", 4) == "abcd..."
    assert quoted("abcd", 4) == "abcd"
    assert quoted(b"\xff\x1b", 10) == "\ufffd\\x1b"  # undecodable bytes replaced
    assert quoted(b"\xff", 10, encoding="latin-1") == "\xff"


def test_a_failure_is_one_line_with_its_type() -> None:
    exc = ValueError("first line\n  second\x1b line " + "x" * 300)
    text = failure(exc)
    assert text.startswith("ValueError: first line second\\x1b line ")
    assert text.endswith("...") and "\n" not in text
    assert failure(KeyError()) == "KeyError: no detail"


def test_could_not_handle_names_the_path_and_says_it_was_not_forwarded() -> None:
    message = could_not_handle("/v1/chat\x1b", RecursionError("too deep"))
    assert message == (
        "could not handle the request to /v1/chat\\x1b (RecursionError: too deep); it was "
        "refused, not forwarded"
    )
