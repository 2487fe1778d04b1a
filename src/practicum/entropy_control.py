"""An entropy bonus that each domain earns by collapsing: adaptive entropy control per domain.

A fixed bonus (``algorithm.entropy_coef``) is the wrong size for a mix: domains whose replies
start sharp lose their exploration within steps (eight copies of one reply: a group that scores
alike and teaches nothing), while domains that start broad need to commit and are held back by the
same bonus (benchmarks/RESULTS.md, multidomain, twenty-first run). Skywork-OR1's adaptive entropy
control (arXiv 2505.22312, §3.2) sizes it by measurement instead: the coefficient rises by a step
while the entropy is below a target and falls by a step while above, and the bonus applies only
while below. Here it runs once per domain, on that domain's own entropy, so no domain is chosen by
hand.

The measured entropy of a domain at a step is the mean -log p of the tokens its episodes sampled
(the behaviour log-probs the engine returns with every token, at the sampling temperature): an
unbiased estimate of the policy's per-token entropy on that domain, free, and - unlike the
trainer's - it covers the all-alike groups the update skips, which are exactly the collapsed ones.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from practicum.records import Group

if TYPE_CHECKING:
    from practicum.config import AlgorithmConfig, DomainSection


def sampled_entropy(groups: Iterable[Group]) -> dict[str, float]:
    """Each domain's mean -log p over the tokens its trainable episodes generated (nats per token);
    a domain with no generated token is absent."""
    sums: dict[str, float] = {}
    counts: dict[str, int] = {}
    for g in groups:
        for e in g.episodes:
            if not e.trainable:
                continue
            for t in e.turns:
                if t.logprobs:
                    d = g.task.domain
                    sums[d] = sums.get(d, 0.0) - sum(t.logprobs)
                    counts[d] = counts.get(d, 0) + len(t.logprobs)
    return {d: sums[d] / counts[d] for d in sums}


@dataclass
class EntropyControl:
    """The coefficient of each controlled domain (``targets``: domain -> target entropy, nats per
    token), moved by ``step`` towards keeping that domain's entropy at its target, within
    [0, ``max_coef``]; ``start``: the coefficients before the first measurement."""

    targets: dict[str, float]
    step: float
    max_coef: float
    start: dict[str, float] = field(default_factory=dict)
    coefs: dict[str, float] = field(init=False)
    below: dict[str, bool] = field(init=False)

    def __post_init__(self) -> None:
        self.coefs = {d: min(self.start.get(d, 0.0), self.max_coef) for d in self.targets}
        self.below = dict.fromkeys(self.targets, False)

    def observe(self, entropy: dict[str, float]) -> None:
        """One step's measured entropy per domain: each controlled domain measured moves its
        coefficient one step up (below its target) or down (at or above it); one not measured
        this step (none of its groups in the batch) keeps its coefficient and its bonus state."""
        for d, target in self.targets.items():
            if d not in entropy:
                continue
            below = entropy[d] < target
            self.below[d] = below
            moved = self.coefs[d] + (self.step if below else -self.step)
            self.coefs[d] = min(max(moved, 0.0), self.max_coef)

    def weights(self) -> dict[str, float]:
        """The bonus weight of each controlled domain's samples now: its coefficient while its
        entropy is below its target, else 0 (a domain above its target gets no bonus, whatever
        its coefficient still is)."""
        return {d: (c if self.below[d] else 0.0) for d, c in self.coefs.items()}

    def state(self) -> dict[str, Any]:
        return {"coefs": dict(self.coefs), "below": dict(self.below)}

    def load(self, state: dict[str, Any]) -> None:
        """Put back :meth:`state`; a domain the state does not know (the config added it) starts fresh."""
        for d in self.targets:
            if d in state.get("coefs", {}):
                self.coefs[d] = min(float(state["coefs"][d]), self.max_coef)
                self.below[d] = bool(state.get("below", {}).get(d, False))


def from_config(algorithm: AlgorithmConfig, domains: Iterable[DomainSection]) -> EntropyControl | None:
    """The run's controller: a domain is controlled when it has a target above 0, its own
    ``entropy_target`` or else ``algorithm.entropy_target``; its coefficient starts at its
    ``entropy_coef`` (its own, else the algorithm's). None when no domain has a target."""
    targets: dict[str, float] = {}
    start: dict[str, float] = {}
    for d in domains:
        target = d.entropy_target if d.entropy_target is not None else algorithm.entropy_target
        if not target:  # None, or 0: this domain keeps the fixed bonus
            continue
        targets[d.name] = float(target)
        start[d.name] = float(d.entropy_coef if d.entropy_coef is not None else algorithm.entropy_coef)
    if not targets:
        return None
    return EntropyControl(targets, algorithm.entropy_coef_step, algorithm.entropy_coef_max, start)
