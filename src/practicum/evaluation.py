"""Held-out evaluation: greedy episodes over each domain's evaluation tasks, one row per task.

Used by training (before, every ``run.eval_every`` steps, after) and by ``practicum eval``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from practicum.budget import BudgetConfig, Spend
from practicum.curriculum.scaffold import is_scaffolded
from practicum.engines.base import Engine, SamplingParams
from practicum.envs.base import Domain
from practicum.records import Episode, GroupState
from practicum.rollout import run_groups
from practicum.store import Store

LIMITS = ("turn_limit", "token_limit", "time_limit")  # end reasons of an episode cut short, still scored


BUDGET_CHUNK = 8  # tasks evaluated between two budget checks


class EvalRow(BaseModel):
    """One evaluated task: its score and how the episode went."""

    task: str
    domain: str
    reward: float
    components: dict[str, float]
    turns: int
    tool_calls: int
    tool_errors: int
    end: str  # why the episode ended (see :class:`~practicum.records.EpisodeInfo`), or its state
    errors: list[str]  # error kinds of the episode
    sample: int = 0  # which of the task's samples (practicum eval --samples)


class DomainTally(BaseModel):
    """How one domain's evaluation went, besides its scores: what the eval table shows next to the means."""

    tasks: int
    errors: int  # episodes that failed (end "failed": environment, verifier, engine, unusable model output)
    error_kinds: dict[str, int]  # kind -> failed episodes of that kind
    limited: int  # episodes cut at a turn, token or time limit (scored on what they reached; not errors)
    seconds: float  # wall time of the domain's episodes, verification included


@dataclass
class EvalResult:
    """Held-out results per domain: means of each score component, and of the score value;
    ``tallies`` counts tasks, failed episodes and seconds per domain."""

    per_domain: dict[str, dict[str, float]]
    seconds: float
    per_task: list[EvalRow] = field(default_factory=list)
    tallies: dict[str, DomainTally] = field(default_factory=dict)
    episodes: dict[str, list[Episode]] = field(default_factory=dict)  # per domain, for process metrics
    spend: dict[str, Any] | None = None  # with a budget: what the evaluation consumed (practicum.budget)
    stopped: str | None = None  # with a budget: the budget reached, if the evaluation stopped at it

    def line(self) -> str:
        parts = []
        for d, m in self.per_domain.items():
            comps = " ".join(f"{k} {v:.3f}" for k, v in m.items() if k != "n")
            parts.append(f"{d}: {comps} (n={int(m['n'])})")
        return "; ".join(parts)


async def evaluate(
    engine: Engine,
    domains: list[Domain],
    max_new_tokens: int,
    max_turns: int = 1,
    store: Store | None = None,
    step: int = 0,
    limit: int | None = None,
    max_tokens: int | None = None,
    max_seconds: float | None = None,
    samples: int = 1,
    temperature: float | None = None,
    seed: int = 0,
    budget: BudgetConfig | None = None,
) -> EvalResult:
    """Held-out evaluation, per domain, with one row per episode: greedy, or ``samples`` episodes
    per task at ``temperature`` (default 1.0 when sampling), seeded by ``seed``."""
    t0 = time.perf_counter()
    if temperature is None:
        temperature = 0.0 if samples == 1 else 1.0
    params = SamplingParams(max_new_tokens=max_new_tokens, temperature=temperature,
                            seed=None if temperature == 0 else seed)
    out: dict[str, dict[str, float]] = {}
    rows: list[EvalRow] = []
    tallies: dict[str, DomainTally] = {}
    episodes: dict[str, list[Episode]] = {}
    spend = Spend()
    for dom in domains:
        t_dom = time.perf_counter()
        tasks = dom.source.eval_tasks()[:limit]
        helped = [t.id for t in tasks if is_scaffolded(t)]
        if helped:  # a held-out score is the policy's own: a scaffold's help must never reach it
            raise ValueError(f"domain {dom.name!r}: held-out tasks carry a training scaffold: {', '.join(helped[:5])}")
        if budget is None:
            groups = await run_groups(tasks, samples, lambda _t, dom=dom: dom.make_env(), engine, params, max_turns,
                                      max_tokens, max_seconds)
        else:  # in chunks, so that the evaluation stops cleanly at its budget
            groups = []
            for i in range(0, len(tasks), BUDGET_CHUNK):
                if spend.reached(budget):
                    break
                chunk = await run_groups(tasks[i:i + BUDGET_CHUNK], samples, lambda _t, dom=dom: dom.make_env(), engine,
                                         params, max_turns, max_tokens, max_seconds)
                spend.add(chunk)
                spend.wall_seconds = time.perf_counter() - t0
                groups += chunk
        first = len(rows)
        for g in groups:
            for i, ep in enumerate(g.episodes):
                comps = {k: v for k, v in (ep.score.components if ep.score else {}).items() if not k.startswith("test:")}
                rows.append(EvalRow(task=g.task.id, domain=dom.name, reward=ep.reward, components=comps,
                                    turns=len(ep.turns), tool_calls=sum(ep.info.tool_calls.values()),
                                    tool_errors=ep.info.tool_error_count, end=ep.info.end_reason,
                                    errors=[e.kind for e in ep.errors], sample=i))
        tallies[dom.name] = _tally(rows[first:], time.perf_counter() - t_dom)
        sums: dict[str, float] = {}
        eps = [ep for g in groups for ep in g.episodes]
        for g in groups:
            for ep in g.episodes:
                if ep.score is None:
                    continue
                for k, v in {"reward": ep.score.value, **ep.score.components}.items():
                    if k.startswith("test:"):  # per-test outcomes of one task: meaningless averaged over tasks
                        continue
                    sums[k] = sums.get(k, 0.0) + v
            if store is not None:
                g.state = GroupState.evaluated
        if store is not None:
            for g in groups:
                store.add_group(g, step, kind="eval")
        n = max(len(eps), 1)
        out[dom.name] = {**{k: v / n for k, v in sums.items()}, "n": float(len(eps))}
        episodes[dom.name] = eps
    result = EvalResult(out, time.perf_counter() - t0, rows, tallies, episodes)
    if budget is not None:
        result.spend = spend.state(budget.prices)
        result.stopped = spend.reached(budget)
    return result


def _tally(rows: list[EvalRow], seconds: float) -> DomainTally:
    """Failed episodes are those that ended ``failed``; their kinds are the errors that are not limits."""
    failed = [r for r in rows if r.end == "failed"]
    kinds: dict[str, int] = {}
    for r in failed:
        for k in dict.fromkeys(e for e in r.errors if e not in LIMITS) or ["unknown"]:
            kinds[k] = kinds.get(k, 0) + 1
    return DomainTally(tasks=len(rows), errors=len(failed), error_kinds=kinds,
                       limited=sum(r.end in LIMITS for r in rows), seconds=seconds)
