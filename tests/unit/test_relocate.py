"""Relocation of HOME written relative to the working directory: `{cwd-to-home}`.

Qwen Code names a file under HOME by its path from the checkout (`--- Context from:
../home-ann/.qwen/output-language.md ---`). Relocation stores that as `{cwd-to-home}`, so
the recorded and the replayed request are equal wherever either ran, and leaves every other
`../` path as written. The property tests relocate the same text written on two machines
(two checkouts, two HOMEs) and compare.
"""

from __future__ import annotations

import json
import posixpath
import string

from hypothesis import assume, given
from hypothesis import strategies as st

from flowproof_cli.cassette import CassetteSession, Mode, Turn
from flowproof_cli.match.relocate import CWD_TO_HOME, Relocation
from flowproof_cli.match.rules import MatchRules

QWEN_LINE = "--- Context from: {rel}/.qwen/output-language.md ---"


def placeholders(cwd: str, home: str, text: str) -> str:
    moved, _ = Relocation(cwd, home).to_placeholders({"t": text})
    return str(moved["t"])


# -- HOME beside or away from the checkout: the relative path names HOME's folder ----------------


def test_home_beside_the_checkout_becomes_the_placeholder() -> None:
    text = QWEN_LINE.format(rel="../home-ann")
    relocated = placeholders("/work/laptop/app", "/work/laptop/home-ann", text)
    assert relocated == "--- Context from: {cwd-to-home}/.qwen/output-language.md ---"


def test_the_same_line_from_two_machines_is_equal_once_relocated() -> None:
    laptop = placeholders("/tmp/a/proj", "/tmp/h", QWEN_LINE.format(rel="../../h"))
    ci = placeholders("/ci/checkout", "/ci/home-ci", QWEN_LINE.format(rel="../home-ci"))
    assert laptop == ci


def test_only_a_whole_relative_path_at_a_path_start_is_taken() -> None:
    cwd, home = "/tmp/a/proj", "/tmp/h"
    for text in (
        "../../hx/.qwen/x",  # another folder whose name starts like HOME's
        "../../h.old/x",  # HOME's name with a suffix
        "src/../../h/x",  # inside a longer path
        "a../../h/x",
        "../other/x",  # a sibling of the checkout
        "../h/x",  # the wrong depth: not HOME from here
    ):
        assert placeholders(cwd, home, text) == text, text
    assert placeholders(cwd, home, "(../../h)") == "({cwd-to-home})"
    assert placeholders(cwd, home, "in ../../h.") == "in {cwd-to-home}."


def test_absolute_and_relative_forms_are_relocated_together() -> None:
    text = "cwd /tmp/a/proj, home /tmp/h/.qwen/memories, relative ../../h/.qwen/x"
    relocated = placeholders("/tmp/a/proj", "/tmp/h", text)
    assert relocated == "cwd {cwd}, home {home}/.qwen/memories, relative {cwd-to-home}/.qwen/x"


# -- HOME above the checkout: only hidden entries right under HOME -------------------------------


def test_home_above_the_checkout_takes_only_its_hidden_entries() -> None:
    cwd, home = "/home/ann/app", "/home/ann"
    assert placeholders(cwd, home, "from ../.qwen/x") == "from {cwd-to-home}/.qwen/x"
    for sibling in ("import '../lib/x'", "../app2/README.md", "../../.qwen/x", "../.", "..."):
        assert placeholders(cwd, home, sibling) == sibling, sibling


def test_home_two_levels_above_takes_both_dots() -> None:
    relocated = placeholders("/home/ann/src/app", "/home/ann", "../../.config/x and ../.config/y")
    assert relocated == "{cwd-to-home}/.config/x and ../.config/y"


def test_laptop_under_home_and_ci_under_home_match() -> None:
    laptop = placeholders("/home/ann/app", "/home/ann", QWEN_LINE.format(rel=".."))
    ci = placeholders("/home/runner/work/app/app", "/home/runner", QWEN_LINE.format(rel="../../.."))
    elsewhere = placeholders("/ci/checkout", "/root", QWEN_LINE.format(rel="../../root"))
    assert laptop == ci == elsewhere


# -- nothing relative to find -------------------------------------------------------------------


def test_home_inside_the_checkout_or_equal_to_it_has_no_relative_form() -> None:
    for cwd, home, text in (
        ("/home/ann", "/home/ann/app", "app/.qwen/x ../.qwen/x"),
        ("/home/ann", "/home/ann", "../.qwen/x ./.qwen/x"),
    ):
        relocation = Relocation(cwd, home)
        moved, _ = relocation.to_placeholders({"t": text})
        assert CWD_TO_HOME not in str(moved), (cwd, home)


def test_root_like_paths_get_no_relative_form() -> None:
    for cwd, home, text in (
        ("/tmp", "/home/ann", "../home/ann/.x"),
        ("/home/ann/app", "/", "../../../.x"),
    ):
        assert CWD_TO_HOME not in placeholders(cwd, home, text), (cwd, home)


def test_the_report_names_the_absolute_paths_only() -> None:
    assert (
        Relocation("/ci/checkout", "/ci/home").describe() == "{cwd}=/ci/checkout, {home}=/ci/home"
    )


def test_a_recorded_response_gets_the_live_relative_path() -> None:
    recorded = {"text": "Read {cwd-to-home}/.qwen/settings.json"}
    assert Relocation("/ci/copy", "/ci/home").to_live(recorded) == {
        "text": "Read ../home/.qwen/settings.json"
    }
    # HOME inside the checkout: still HOME from here, in whatever form.
    assert Relocation("/ci/copy", "/ci/copy/home").to_live(recorded) == {
        "text": "Read home/.qwen/settings.json"
    }


# -- properties: two machines, one text ---------------------------------------------------------

#: Folder names long enough that every path is one relocation takes (`/tmp`-like roots are not).
_SEGMENT = st.text(string.ascii_lowercase + string.digits + "-_", min_size=2, max_size=6)
_PATH = st.lists(_SEGMENT, min_size=2, max_size=4).map(lambda parts: "/" + "/".join(parts))
_HIDDEN = st.sampled_from([".qwen", ".config", ".gemini", ".claude"])


@st.composite
def machine(draw: st.DrawFn) -> tuple[str, str]:
    """A checkout and a HOME that is not inside it (so HOME is reached with `..`)."""
    cwd, home = draw(_PATH), draw(_PATH)
    relative = posixpath.relpath(home, cwd)
    assume(relative.split("/")[0] == "..")
    return cwd, home


def _written_on(cwd: str, home: str, hidden: str) -> str:
    """What an agent writes on that machine: the checkout, HOME, and HOME from the checkout."""
    relative = posixpath.relpath(home, cwd)
    return (
        f"I'm working in {cwd}. Memory at {home}/{hidden}/memories.\n"
        f"--- Context from: {relative}/{hidden}/output-language.md ---\n"
        f"Read {cwd}/notes.txt"
    )


@given(machine(), machine(), _HIDDEN)
def test_relocated_text_from_two_machines_is_equal(
    a: tuple[str, str], b: tuple[str, str], hidden: str
) -> None:
    assert placeholders(*a, _written_on(*a, hidden)) == placeholders(*b, _written_on(*b, hidden))


@given(machine(), _HIDDEN)
def test_relocation_then_live_paths_is_the_text_again(a: tuple[str, str], hidden: str) -> None:
    text = _written_on(*a, hidden)
    relocation = Relocation(*a)
    moved, _ = relocation.to_placeholders({"t": text})
    assert CWD_TO_HOME in moved["t"]
    assert relocation.to_live(moved) == {"t": text}


@given(machine(), st.integers(1, 4), st.lists(_SEGMENT, min_size=1, max_size=2))
def test_a_relative_path_that_does_not_lead_to_home_is_left_alone(
    a: tuple[str, str], ups: int, names: list[str]
) -> None:
    """`../lib/x` and every other relative path that is neither HOME nor a hidden entry
    right under it stays as written."""
    cwd, home = a
    other = "/".join([".."] * ups + names)
    target = posixpath.normpath(posixpath.join(cwd, other))
    assume(target != home and not target.startswith(home + "/"))
    text = f"import '{other}/x.py' and see {other}."
    assume(home not in text and cwd not in text)  # (the absolute paths are relocated anywhere)
    assert placeholders(cwd, home, text) == text


@given(st.lists(_SEGMENT, min_size=2, max_size=3), st.lists(_SEGMENT, min_size=1, max_size=3))
def test_under_home_a_sibling_of_the_checkout_is_left_alone(
    home_parts: list[str], below: list[str]
) -> None:
    """HOME above the checkout: `../<name>` leads into HOME too, but only hidden entries
    (where agents keep their state) are taken, never the checkout's siblings."""
    home = "/" + "/".join(home_parts)
    cwd = home + "/" + "/".join(below)
    up = "/".join([".."] * len(below))
    text = f"import '{up}/lib/x' from {up}/README.md"
    assert placeholders(cwd, home, text) == text
    assert placeholders(cwd, home, f"{up}/.qwen/x") == "{cwd-to-home}/.qwen/x"


# -- a relocation added after recording -----------------------------------------------------


def _replayed_from(cwd: str, home: str) -> int:
    """A trace recorded WITHOUT relocation on the laptop (/laptop/app, HOME /laptop/ann),
    replayed with relocation on from `cwd` and `home`: the answer's status."""
    recorded_request = {"model": "m", "messages": [{"role": "user", "content": "in /laptop/app"}]}
    answer = {
        "id": "c",
        "object": "chat.completion",
        "created": 1,
        "model": "m",
        "choices": [
            {"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "ok"}}
        ],
    }
    turn = Turn("openai-chat", recorded_request, 200, answer)
    rules = MatchRules(relocation=Relocation(cwd, home))
    session = CassetteSession(Mode.REPLAY, recorded=[turn], rules=rules)
    live = {"model": "m", "messages": [{"role": "user", "content": f"in {cwd}"}]}
    rendered = session.on_request("/v1/chat/completions", json.dumps(live).encode())
    return int(getattr(rendered, "status", 0))


def test_a_relocation_added_after_recording_needs_a_re_record() -> None:
    """The stored requests hold the recording's own paths: today's relocation rewrites them
    only where the replay runs in the same checkout and HOME (docs/matching.md)."""
    assert _replayed_from("/laptop/app", "/laptop/ann") == 200
    assert _replayed_from("/ci/checkout", "/ci/home") == 409
