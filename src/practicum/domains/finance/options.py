"""The finance domain's settings: ``source:`` and ``options:`` of a section with ``env: finance``."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

import practicum.domains.annotations as ann
from practicum.domains.finance.questions import KINDS, TIERS, Kind, Tier
from practicum.domains.plugin import Options, SourceOptions

IXBRL_MIN_TOKENS = 16_000


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
    format: Literal["text", "markdown", "ixbrl"] = Field("text", description="Statements as fixed-width text tables, Markdown tables, or inline XBRL (ixbrl: 10,000-25,000 tokens; raise max_prompt_tokens).")
    statements: Literal["all", "needed"] = Field("all", description="all: the three statements in every prompt; needed: only those the question reads.")
    mode: Literal["single", "multi"] = Field("single", description="single: answer in one reply; multi: run Python with a python tool in a sandbox, then submit (set rollout.max_turns > 1).")
    max_runs: int = Field(6, ge=1, le=50, description="multi: python runs allowed per episode.")
    run_timeout_s: float = Field(5.0, gt=0, le=60, description="multi: wall-clock limit of one python run.")
    output_chars: int = Field(1500, ge=200, le=20_000, description="multi: most characters of one tool result shown back.")
    max_prompt_tokens: int = Field(3000, ge=800, le=200_000, description="Estimated prompt budget (digits count one token each); longer prompts drop unread statements, then draw again.")
    eval_size: int | None = Field(None, ge=0, description="Held-out tasks; default: the section's eval_size if set, else 50.")
    eval_seed: int | None = Field(None, description="Seed of the held-out tasks; default: the section's eval_seed if set, else 4321.")
    judge: ann.JudgeOptions = Field(default_factory=lambda: ann.JudgeOptions.model_validate({}), description="annotated: a model-as-judge for rubric items rules cannot check (off by default).")

    @model_validator(mode="after")
    def _years(self) -> FinanceOptions:
        if self.format == "ixbrl" and self.max_prompt_tokens < IXBRL_MIN_TOKENS:
            raise ValueError(f"format: ixbrl statements run 10,000 to 25,000 tokens; set max_prompt_tokens to at least "
                             f"{IXBRL_MIN_TOKENS:,} (for a model with a window that long)")
        lo, hi = self.fiscal_years
        if not 1990 <= lo <= hi <= 2100:
            raise ValueError(f"fiscal_years: {self.fiscal_years} is not a range of years (lowest first)")
        return self
