"""The one custom validation error of the spec models: a message plus the `loc` of the node
it is about, which the loader turns into `FILE:LINE: message`."""

from __future__ import annotations

from pydantic_core import PydanticCustomError

SPEC_ERROR_TYPE = "flowproof_spec"


def spec_problem(detail: str, at: tuple[str | int, ...] = ()) -> PydanticCustomError:
    """A validation error the loader turns into a SpecError at the line of `at`."""
    return PydanticCustomError(SPEC_ERROR_TYPE, "{detail}", {"detail": detail, "at": at})
