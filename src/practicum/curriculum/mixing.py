"""Which domain the next group comes from: target weights, and a sampler that holds them on
the stream of *trained* groups.

Two parts, used together:

* :class:`DomainMixer` turns the per-domain statistics of each step into target shares.
  ``static``: the configured weights. ``improving``: towards domains whose training reward is
  still rising (the least-squares slope of their last ``window`` step means). ``headroom``:
  towards domains the policy has not mastered yet, share proportional to weight x (1 - mean
  training reward over the last ``window`` steps) ** (1 / temperature): a solved domain's
  groups are all right and teach nothing, so its draws go to the others (a domain-level form of
  DoReMi's "excess loss" weighting, Xie et al. 2023, with the failure rate for the loss; rewards
  are read as scores in [0, 1]). ``advantage``:
  towards domains whose groups carry the most signal, the running mean |advantage| (DUMP,
  Wang et al. 2025, "Automated distribution-level curriculum learning for RL-based LLM
  post-training"; DUMP adds a UCB bonus that this leaves out). Adaptive shares are a softmax of
  the statistic over ``temperature``, times the configured weight, with a floor so no domain
  is starved (a starved domain would never produce the statistic that could bring it back).
* :class:`DeficitSampler` picks the domain of each draw. A weighted coin (the orchestrator's
  ``draw_task``) holds the ratio of *draws*; but groups of a slow domain (sandboxed, long
  episodes, a ``domain_concurrency`` cap) wait longer, so more of them are dropped as stale,
  and more are still in flight when a run ends: the *trained* ratio falls below the target.
  The sampler draws the domain whose trained-plus-in-flight count lags its target share the
  most (smooth weighted round robin over what reached, or may still reach, an update). A group
  dropped or failed leaves the account, so its domain is drawn again. The trained ratio then
  differs from the target by at most the groups in flight, whatever the speeds. A changed
  target (an adaptive mode every step, a drift up-weight) holds for the draws from then on:
  each domain keeps the lag it had at the change, and the run's history under the old target
  is not paid back - measured against the whole run, a domain up-weighted from 1/4 to 2/5
  after 120 groups would be drawn alone for the next 31.

Limits: the sampler is deterministic given its state, so a run's draws are a function of its
history, not of (seed, k) alone: the state must be checkpointed (:meth:`DeficitSampler.state`)
or rebuilt from the store's per-domain counts on resume.
"""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import Field, model_validator

from practicum.curriculum.base import Strict


class MixingConfig(Strict):
    mode: Literal["static", "improving", "headroom", "advantage"] = Field(
        default="static", description="static: the configured weights; improving: towards domains whose training reward still "
        "rises; headroom: towards domains not mastered yet, share ~ weight x (1 - mean training reward over the window) ** "
        "(1 / temperature), rewards read as scores in [0, 1]; advantage: towards domains with the largest running mean "
        "|advantage| (DUMP).")
    weights: dict[str, float] = Field(default_factory=dict, description="Weight per domain name (default: the "
                                      "domain's own `weight`). Normalised to shares.")
    temperature: float = Field(default=0.1, gt=0, description="Adaptive modes: softmax temperature over the statistic "
                               "(mean |advantage|, reward gained over the window, or log of the headroom: 1 gives shares "
                               "proportional to weight x headroom). Smaller: sharper.")
    floor: float = Field(default=0.05, ge=0, lt=1, description="Adaptive modes: least share of every domain; the number of "
                         "domains times the floor must stay below 1.")
    ema: float = Field(default=0.3, gt=0, le=1, description="advantage: weight of the newest step in the running mean |advantage|.")
    window: int = Field(default=8, ge=2, description="improving: steps of per-domain mean reward the slope is fitted on; "
                        "headroom: steps of per-domain mean reward averaged.")
    balance: Literal["trained", "drawn"] = Field(
        default="drawn", description="drawn: a weighted coin per draw (the orchestrator's draw, reproducible from (seed, k)); "
        "trained: draw the domain whose trained-plus-in-flight groups lag its share most (holds the trained ratio "
        "when domains differ in speed; the sampler's state goes into the checkpoint).")
    updates: Literal["joint", "per_domain"] = Field(
        default="joint", description="joint: a step's groups of every domain make one optimizer step; per_domain: each "
        "domain's groups make their own (loss over its own tokens, its gradient clipped on its own), one domain after "
        "another in an order rotating by step, so that clipping does not split one step's length among the domains. "
        "Not with trainer.gradient_surgery.")
    horizon: int | None = Field(default=None, ge=1, description="trained balance: forget trained counts (and lags) with "
                                "this half-life in groups (None: the whole run counts); a changed target holds "
                                "from the change on either way.")

    @model_validator(mode="after")
    def _positive_weights(self) -> MixingConfig:
        bad = [d for d, w in self.weights.items() if not w > 0]
        if bad:
            raise ValueError(f"mixing.weights must be > 0 (got {', '.join(bad)})")
        return self


HEADROOM_MIN = 1e-3  # a domain solved on every draw keeps a share of its weight x 0.001 ** (1 / T) (and the floor)


def normalise(weights: dict[str, float]) -> dict[str, float]:
    total = sum(weights.values())
    if not total > 0:
        raise ValueError(f"weights must have a positive sum, got {weights}")
    return {d: w / total for d, w in weights.items()}


def slope(values: list[float]) -> float:
    """Least-squares slope of ``values`` against 0, 1, 2, ... (0 for fewer than two)."""
    n = len(values)
    if n < 2:
        return 0.0
    mx, my = (n - 1) / 2, sum(values) / n
    return sum((i - mx) * (v - my) for i, v in enumerate(values)) / sum((i - mx) ** 2 for i in range(n))


class DomainMixer:
    """Target shares per domain, from the configured weights and (adaptive modes) what each
    domain's groups showed at each step."""

    def __init__(self, cfg: MixingConfig, domain_weights: dict[str, float]) -> None:
        self.cfg = cfg
        self.base = normalise({d: cfg.weights.get(d, w) for d, w in domain_weights.items()})
        if cfg.mode != "static" and len(self.base) * cfg.floor >= 1:
            raise ValueError(f"mixing.floor {cfg.floor} x {len(self.base)} domains must stay below 1")
        self.abs_adv: dict[str, float] = {}  # running mean |advantage| per domain
        self.rewards: dict[str, list[float]] = {d: [] for d in self.base}  # last `window` step means

    def observe(self, domain: str, rewards: list[float], advantages: list[float]) -> None:
        """One step's trained episodes of ``domain``: their rewards and advantages."""
        if not rewards:
            return
        hist = self.rewards[domain]
        hist.append(sum(rewards) / len(rewards))
        del hist[:-self.cfg.window]
        mean_abs = sum(abs(a) for a in advantages) / max(len(advantages), 1)
        old = self.abs_adv.get(domain)
        self.abs_adv[domain] = mean_abs if old is None else (1 - self.cfg.ema) * old + self.cfg.ema * mean_abs

    def statistic(self, domain: str) -> float | None:
        """What the adaptive mode ranks domains by (None: not observed yet)."""
        if self.cfg.mode == "advantage":
            return self.abs_adv.get(domain)
        hist = self.rewards[domain]
        if self.cfg.mode == "headroom":  # log of what is left to learn: the softmax then gives weight x headroom ** (1 / T)
            if not hist:
                return None
            mean = min(max(sum(hist) / len(hist), 0.0), 1.0)
            return math.log(max(1.0 - mean, HEADROOM_MIN))
        return max(slope(hist), 0.0) * len(hist) if len(hist) >= 2 else None  # reward gained over the window

    def targets(self) -> dict[str, float]:
        """Target share of each domain. A domain not observed yet gets the best observed
        statistic (it is tried before it can be judged)."""
        if self.cfg.mode == "static":
            return dict(self.base)
        stats = {d: self.statistic(d) for d in self.base}
        known = [s for s in stats.values() if s is not None]
        if not known:
            return dict(self.base)
        top = max(known)
        logits = {d: math.log(self.base[d]) + (top if s is None else s) / self.cfg.temperature
                  for d, s in stats.items()}
        m = max(logits.values())
        soft = normalise({d: math.exp(v - m) for d, v in logits.items()})
        f = self.cfg.floor
        return {d: f + (1 - len(soft) * f) * p for d, p in soft.items()}

    def state(self) -> dict[str, Any]:
        return {"abs_adv": dict(self.abs_adv), "rewards": {d: list(v) for d, v in self.rewards.items()}}

    def load(self, state: dict[str, Any]) -> None:
        self.abs_adv = {d: float(v) for d, v in state["abs_adv"].items()}
        self.rewards = {d: [float(x) for x in state["rewards"].get(d, [])] for d in self.base}


class DeficitSampler:
    """Draws the domain whose trained-plus-in-flight groups lag their target share the most.

    The caller reports each group's fate: :meth:`drawn` when it is drawn, :meth:`trained` when
    an update used it, :meth:`settled` when it left without training (dropped, failed).
    """

    def __init__(self, targets: dict[str, float], horizon: int | None = None) -> None:
        self.targets = normalise(targets)
        self.decay = 0.5 ** (1 / horizon) if horizon else 1.0  # per trained group
        self.trained_counts: dict[str, float] = {d: 0.0 for d in self.targets}
        self.in_flight: dict[str, int] = {d: 0 for d in self.targets}
        # what each domain's count is taken to be beyond its real one, so that a target change
        # keeps every deficit as it was (the offsets sum to 0, so the total is the real one)
        self.offset: dict[str, float] = {d: 0.0 for d in self.targets}

    def _have(self) -> dict[str, float]:
        return {d: self.trained_counts[d] + self.in_flight[d] + self.offset[d] for d in self.targets}

    def set_targets(self, targets: dict[str, float]) -> None:
        new = normalise(targets)
        if set(new) != set(self.targets):
            raise ValueError(f"targets name domains {sorted(new)}, the sampler has {sorted(self.targets)}")
        # the deficit of d at the next draw is target_d x (H + 1) - have_d: moving d's offset by
        # (new_d - old_d) x (H + 1) leaves it unchanged, and the draws after follow the new target
        total = sum(self._have().values()) + 1
        for d in self.targets:
            self.offset[d] += (new[d] - self.targets[d]) * total
        self.targets = new

    def next_domain(self) -> str:
        have = self._have()
        total = sum(have.values()) + 1  # the draw being made counts
        # largest deficit (rounded so float noise does not break ties); ties: larger target, then
        # the first name in sorted order (max keeps the first maximum)
        return max(sorted(self.targets), key=lambda d: (round(self.targets[d] * total - have[d], 9), self.targets[d]))

    def drawn(self, domain: str) -> None:
        self.in_flight[domain] += 1

    def trained(self, domain: str) -> None:
        self.in_flight[domain] -= 1
        if self.decay < 1:
            for d in self.trained_counts:
                self.trained_counts[d] *= self.decay
                self.offset[d] *= self.decay
        self.trained_counts[domain] += 1

    def settled(self, domain: str) -> None:
        """A group of ``domain`` left without being trained: it no longer counts."""
        self.in_flight[domain] -= 1

    def shares(self) -> dict[str, float]:
        """Share of each domain among trained groups (decayed counts under a horizon)."""
        total = sum(self.trained_counts.values())
        return {d: c / total if total else 0.0 for d, c in self.trained_counts.items()}

    def metrics(self) -> dict[str, float]:
        """Per-domain figures for the step's metrics: target and trained share."""
        shares = self.shares()
        return {k: v for d in self.targets
                for k, v in ((f"{d}/mix_target", self.targets[d]), (f"{d}/mix_trained", shares[d]))}

    def state(self) -> dict[str, Any]:
        return {"targets": dict(self.targets), "trained": dict(self.trained_counts), "in_flight": dict(self.in_flight),
                "offset": dict(self.offset)}

    def load(self, state: dict[str, Any]) -> None:
        self.targets = {d: float(v) for d, v in state["targets"].items()}
        self.trained_counts = {d: float(v) for d, v in state["trained"].items()}
        self.in_flight = {d: int(v) for d, v in state["in_flight"].items()}
        # a checkpoint written before the offsets: none
        self.offset = {d: float(state.get("offset", {}).get(d, 0.0)) for d in self.targets}
