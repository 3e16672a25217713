"""What the hostile spec and trace probes share: the hypothesis settings, the load-or-refuse
property test, YAML builders and mutators, the FIFO probe, and the check that the real CLI
refuses input with exit 2."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.conftest import CliResult

#: FLOWPROOF_FUZZ_EXAMPLES=5000 explores further than the default run does.
PROPERTY = settings(
    max_examples=int(os.environ.get("FLOWPROOF_FUZZ_EXAMPLES", "150")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)


def loads_or_refuses_test(
    texts: st.SearchStrategy[str], loads_or_refuses: Callable[[str], None]
) -> Callable[..., None]:
    """A property test (bound to a module name `test_...`): every text `texts` draws passes
    `loads_or_refuses`, the module's check that it loads usably or is refused with a fix.
    Like a parametrized property, each such test shares its example database key."""

    @PROPERTY
    @given(texts)
    def test(text: str) -> None:
        loads_or_refuses(text)

    return test


#: Characters and bits of YAML syntax a mutation inserts into a committed file's text.
YAML_SNIPPETS = [
    "\x00",
    "\x1b",
    "\ufeff",
    "\t",
    "\r",
    "\n",
    ": ",
    "- ",
    "&a ",
    "*a",
    "!!int ",
    "!!python/object:os.system ",
    "<<: ",
    "? ",
    "{",
    "}",
    "[",
    "]",
    '"',
    "'",
    "|",
    "#",
    "---\n",
    "...\n",
    "  ",
    "1e400",
    "\u2028",
]


def yaml_trees(
    words: Sequence[str],
    keys: Sequence[str],
    *,
    text: int,
    width: int,
    key_text: int,
    leaves: int,
) -> st.SearchStrategy[Any]:
    """Random YAML values: scalars (huge integers, every float, text up to `text` long, the
    file's own `words`) nested in lists and mappings up to `width` wide, keyed by the file's
    `keys` or random text up to `key_text` long, at most `leaves` scalars."""
    scalars = st.one_of(
        st.none(),
        st.booleans(),
        st.integers(min_value=-(2**70), max_value=2**70),
        st.floats(allow_nan=True, allow_infinity=True),
        st.text(max_size=text),
        st.sampled_from(list(words)),
    )
    return st.recursive(
        scalars,
        lambda inner: st.one_of(
            st.lists(inner, max_size=width),
            st.dictionaries(
                st.one_of(st.sampled_from(list(keys)), st.text(max_size=key_text)),
                inner,
                max_size=width,
            ),
        ),
        max_leaves=leaves,
    )


def alias_bomb(levels: int, indent: str = "") -> str:
    """Billion laughs: each level is a list of nine aliases of the level below."""
    lines = [f"{indent}l0: &l0 [lol, lol, lol, lol, lol, lol, lol, lol, lol]"]
    for level in range(1, levels):
        below = ", ".join([f"*l{level - 1}"] * 9)
        lines.append(f"{indent}l{level}: &l{level} [{below}]")
    return "\n".join(lines) + "\n"


def paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every key path into a YAML document, the document itself (`()`) first."""
    found = [prefix]
    if isinstance(value, dict):
        for key, child in value.items():
            found += paths(child, (*prefix, key))
    elif isinstance(value, list):
        for index, child in enumerate(value):
            found += paths(child, (*prefix, index))
    return found


def replace(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    """A copy of `value` with what is at `path` replaced by `new` (the input is kept)."""
    if not path:
        return new
    head, *rest = path
    if isinstance(value, dict):
        return {**value, head: replace(value[head], tuple(rest), new)}
    return [replace(item, tuple(rest), new) if i == head else item for i, item in enumerate(value)]


@st.composite
def mutated_documents(
    draw: st.DrawFn,
    documents: Sequence[Any],
    trees: st.SearchStrategy[Any],
    edits: int,
    **dump: Any,
) -> str:
    """One of `documents` with 1 to `edits` values replaced by a random tree, dumped as YAML
    (`dump`: more `yaml.safe_dump` options)."""
    document = draw(st.sampled_from(documents))
    for _ in range(draw(st.integers(1, edits))):
        path = draw(st.sampled_from(paths(document)))
        document = replace(document, path, draw(trees))
    return yaml.safe_dump(document, sort_keys=False, allow_unicode=True, **dump)


def load_a_fifo(load: Callable[[Path], object], fifo: Path, what: str) -> BaseException | None:
    """What `load` raised on a new FIFO nobody writes to (None: it returned). A load that
    blocks in open() waiting for a writer is released, then fails the test naming `what`."""
    os.mkfifo(fifo)
    outcome: list[BaseException | None] = []

    def attempt() -> None:
        try:
            load(fifo)
            outcome.append(None)
        except BaseException as exc:  # handed to the test thread
            outcome.append(exc)

    reader = threading.Thread(target=attempt, daemon=True)
    reader.start()
    reader.join(30)
    if reader.is_alive():  # blocked in open(): release it, then fail
        with open(fifo, "w", encoding="utf-8"):
            pass
        reader.join(5)
        pytest.fail(f"loading {what} blocked waiting for a writer")
    (error,) = outcome
    return error


def refused_by_the_cli(
    result: CliResult, stderr_start: str | None = None, note: object = None
) -> None:
    """The CLI refused its input: exit 2, no traceback, and (given) the start of stderr."""
    assert result.code == 2, result.output if note is None else (note, result.output)
    assert "Traceback" not in result.output
    if stderr_start is not None:
        assert result.stderr.startswith(stderr_start), result.stderr
