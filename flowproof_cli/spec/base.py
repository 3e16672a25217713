"""The base of every `*.flow.yaml` model: strict, and unknown keys forbidden everywhere."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, populate_by_name=True)
