"""What every curriculum config shares: unknown fields are errors, assignments are validated.

Kept here rather than imported from :mod:`practicum.config` so that the curriculum package
does not reach into that module's private base; the behaviour is the same (``extra="forbid"``:
a typo in a ``curriculum:`` section is an error naming the field, never a silent default).
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)
