"""Budgets: training stops cleanly when its spend reaches one (``budget:`` in a run config).

:class:`Spend` counts, per domain, what the loop consumed: the episodes of every group it took
(trained, or dropped by the curriculum's filter), their prompt tokens as an API bills them (each
turn's whole context), their completion tokens, the sandbox CPU seconds of every execution their
environments made (``Episode.info.sandbox_cpu_s``: tool runs, tests, set-up; see
:mod:`practicum.sandbox.meter`), and the verifier wall seconds domains record
(``info.extra["verify"]["seconds"]`` of the code verifier); plus the run's training wall time.
Money is tokens times the configured prices plus sandbox CPU seconds and verifier seconds times
theirs. After each step
the loop records the spend in the store (metrics of kind ``spend``), shows it in the step
summary, and stops - checkpoint written, nothing lost - at the first budget reached. A resumed
run starts from the stored spend.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class Prices(BaseModel):
    model_config = ConfigDict(extra="forbid")
    prompt_per_million: float = Field(0.0, ge=0, description="Price of a million prompt tokens.")
    completion_per_million: float = Field(0.0, ge=0, description="Price of a million completion tokens.")
    sandbox_second: float = Field(0.0, ge=0, description="Price of one verifier wall second (the code verifier's).")
    sandbox_cpu_second: float = Field(0.0, ge=0, description="Price of one CPU second of sandbox execution.")


class BudgetConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    tokens: int | None = Field(None, ge=1, description="Stop once prompt + completion tokens reach this.")
    completion_tokens: int | None = Field(None, ge=1, description="Stop once completion tokens reach this.")
    sandbox_seconds: float | None = Field(None, gt=0, description="Stop once recorded verifier wall seconds reach this.")
    sandbox_cpu_seconds: float | None = Field(None, gt=0, description="Stop once sandbox CPU seconds reach this.")
    wall_minutes: float | None = Field(None, gt=0, description="Stop once training wall time reaches this (evaluation included).")
    money: float | None = Field(None, gt=0, description="Stop once the spend at `prices` reaches this.")
    prices: Prices = Field(default_factory=Prices, description="Token and sandbox prices (any currency).")

    @property
    def limited(self) -> bool:
        """Whether any budget is set."""
        return any(v is not None for v in (self.tokens, self.completion_tokens, self.sandbox_seconds,
                                           self.sandbox_cpu_seconds, self.wall_minutes, self.money))


KEYS = ("episodes", "prompt_tokens", "completion_tokens", "sandbox_seconds", "sandbox_cpu_seconds")


class Spend:
    def __init__(self) -> None:
        self.domains: dict[str, dict[str, float]] = defaultdict(lambda: dict.fromkeys(KEYS, 0.0))
        self.wall_seconds = 0.0

    def add(self, groups: list[Any]) -> None:
        for g in groups:
            self.add_episodes(g.episodes)

    def add_episodes(self, episodes: list[Any]) -> None:
        for e in episodes:
            d = self.domains[e.domain]
            d["episodes"] += 1
            d["prompt_tokens"] += sum(len(t.prompt_ids) for t in e.turns)
            d["completion_tokens"] += sum(len(t.completion_ids) for t in e.turns)
            d["sandbox_cpu_seconds"] += e.info.sandbox_cpu_s
            verify = e.info.extra.get("verify")
            if isinstance(verify, dict) and isinstance(verify.get("seconds"), (int, float)):
                d["sandbox_seconds"] += float(verify["seconds"])

    def total(self, key: str) -> float:
        return sum(d[key] for d in self.domains.values())

    def money(self, prices: Prices) -> float:
        return (self.total("prompt_tokens") * prices.prompt_per_million / 1e6
                + self.total("completion_tokens") * prices.completion_per_million / 1e6
                + self.total("sandbox_seconds") * prices.sandbox_second
                + self.total("sandbox_cpu_seconds") * prices.sandbox_cpu_second)

    def reached(self, b: BudgetConfig) -> str | None:
        """The first budget reached, in words, or None."""
        tokens = self.total("prompt_tokens") + self.total("completion_tokens")
        checks = [("tokens", tokens, b.tokens), ("completion tokens", self.total("completion_tokens"), b.completion_tokens),
                  ("sandbox seconds", self.total("sandbox_seconds"), b.sandbox_seconds),
                  ("sandbox CPU seconds", self.total("sandbox_cpu_seconds"), b.sandbox_cpu_seconds),
                  ("wall minutes", self.wall_seconds / 60, b.wall_minutes), ("money", self.money(b.prices), b.money)]
        for name, spent, limit in checks:
            if limit is not None and spent >= limit:
                return f"budget reached: {name} {spent:,.6g} >= {limit:,.6g}"
        return None

    def state(self, prices: Prices) -> dict[str, Any]:
        return {"wall_seconds": self.wall_seconds, "money": self.money(prices),
                "domains": {k: dict(v) for k, v in self.domains.items()}}

    def load(self, state: dict[str, Any]) -> None:
        self.wall_seconds = float(state.get("wall_seconds", 0.0))
        for name, d in (state.get("domains") or {}).items():
            self.domains[name] = {k: float(d.get(k, 0.0)) for k in KEYS}

    def line(self, prices: Prices) -> str:
        parts = [f"{name} {int(d['prompt_tokens'] + d['completion_tokens']):,} tok"
                 + (f" {d['sandbox_cpu_seconds']:.3g} cpu-s" if d["sandbox_cpu_seconds"] else "")
                 for name, d in sorted(self.domains.items())]
        money = self.money(prices)
        return "spend: " + ", ".join(parts) + (f", {money:.4g} money" if money else "")
