"""The finance domain's settings: ``source:`` and ``options:`` of a section with ``env: finance``."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

import practicum.domains.annotations as ann
from practicum.domains.finance.questions import KINDS, TIERS, Kind, Tier
from practicum.domains.plugin import Options, SourceOptions


class FinanceSourceOptions(SourceOptions):
    kind: Literal["generated", "tasks", "annotated"] = Field(..., description="generated: statements and questions drawn from the seed; tasks: finance task files (path: a .json, a .jsonl or a folder); annotated: expert-annotated files in the practicum-annotated/1 format (path).")

    @model_validator(mode="after")
    def _path(self) -> FinanceSourceOptions:
        if self.kind == "annotated" and not self.path:
            raise ValueError("annotated sources need 'path'")
        return self


class FinanceOptions(Options):
    """A finance domain section's ``options:`` (docs/finance.md)."""

    source: FinanceSourceOptions = Field(default_factory=lambda: FinanceSourceOptions.model_validate({"kind": "generated"}),
                                         description="Where tasks come from (default: generated).")
    kinds: list[Kind] = Field(list(KINDS), min_length=1, description="Question kinds: margin, ratio, growth, working_capital, tvm, covenant, inconsistency.")
    tiers: list[Tier] = Field(list(TIERS), min_length=1, description="Difficulty tiers: easy, medium, hard.")
    years: int = Field(3, ge=2, le=5, description="Fiscal years in each set of statements.")
    fiscal_years: tuple[int, int] = Field((2019, 2025), description="Range the latest fiscal year is drawn from.")
    scales: list[Literal["thousands", "millions"]] = Field(["thousands", "millions"], min_length=1, description="Units the statements are printed in.")
    format: Literal["text", "markdown"] = Field("text", description="Statements as fixed-width text tables or Markdown tables.")
    statements: Literal["all", "needed"] = Field("all", description="all: the three statements in every prompt; needed: only those the question reads.")
    max_prompt_tokens: int = Field(3000, ge=800, le=200_000, description="Estimated prompt budget (digits count one token each); longer prompts drop unread statements, then draw again.")
    eval_size: int | None = Field(None, ge=0, description="Held-out tasks; default: the section's eval_size if set, else 50.")
    eval_seed: int | None = Field(None, description="Seed of the held-out tasks; default: the section's eval_seed if set, else 4321.")
    judge: ann.JudgeOptions = Field(default_factory=lambda: ann.JudgeOptions.model_validate({}), description="annotated: a model-as-judge for rubric items rules cannot check (off by default).")

    @model_validator(mode="after")
    def _years(self) -> FinanceOptions:
        lo, hi = self.fiscal_years
        if not 1990 <= lo <= hi <= 2100:
            raise ValueError(f"fiscal_years: {self.fiscal_years} is not a range of years (lowest first)")
        return self
