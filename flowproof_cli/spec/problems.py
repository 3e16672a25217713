"""The one custom validation error of the spec models: a message plus the `loc` of the node
it is about, which the loader turns into `FILE:LINE: message`."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from pydantic_core import PydanticCustomError

from flowproof_cli.quoting import closest_name, odd_note, skeleton, unmasked

SPEC_ERROR_TYPE = "flowproof_spec"


def spec_problem(detail: str, at: tuple[str | int, ...] = ()) -> PydanticCustomError:
    """A validation error the loader turns into a SpecError at the line of `at`."""
    return PydanticCustomError(SPEC_ERROR_TYPE, "{detail}", {"detail": detail, "at": at})


def check_keys(keys: Iterable[object], known: Sequence[str], where: str, fix: str) -> None:
    """Raise the spec problem of the first key not in `known`: named as written (odd
    characters shown), the known key it most likely means, and `fix` (`use one of ...`)."""
    for key in keys:
        if key in known:
            continue
        close = closest_name(str(key), known)
        hint = f" Did you mean `{close}`?" if close else ""
        odd = odd_note(str(key), close or skeleton(str(key)))
        raise spec_problem(
            f"unknown key `{unmasked(str(key))}`{odd} in {where}.{hint} Fix: {fix}: "
            f"{', '.join(known)}",
            (str(key),),
        )
