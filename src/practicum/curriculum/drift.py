"""Drift guard: notice when a domain's held-out score slides, and say what to do about it.

The caller gives the guard every held-out evaluation, per domain, as a score per task
(:meth:`DriftGuard.record`), then asks :meth:`DriftGuard.check`. A domain has regressed when,
on the tasks both evaluations share,

1. its mean is below its best earlier evaluation by more than ``margin`` (a drop worth acting
   on), and
2. a one-sided paired test rejects "no drop" at level ``alpha`` (a drop that is not noise;
   corrected as below).

Paired, because both evaluations ran the same held-out tasks: task difficulty cancels, and
a drop is judged by the tasks that changed. The tests:

* 0/1 scores: the exact McNemar test. Only discordant tasks carry information: b tasks right
  at the best evaluation and wrong now, c the reverse; under "no drop" b ~ Binomial(b + c, 1/2),
  and p = P(X >= b).
* other scores: the paired t-test on the per-task differences, p = P(T_{n-1} >= t).

scipy is not a dependency (a large package for two distributions), so both are computed here:
the binomial tail with :func:`math.comb`, Student's t tail through the regularised incomplete
beta function (its continued fraction, Numerical Recipes 6.4), checked against tabulated
values in the tests.

Two corrections keep noise from triggering it. The best evaluation is the maximum of k
earlier ones, so it is biased upward (the winner's curse): the test runs at ``alpha / k``
(Bonferroni over the candidates the best was chosen from). And a domain checked every N steps is
tested many times: a reaction needs ``patience`` regressed checks in a row. Measured on
synthetic curves (tests/test_curriculum_drift.py, 200 runs): a flat domain of 100 held-out
tasks, each task's 0/1 outcome redrawn at every one of 10 evaluations (noisier than a greedy
evaluation of a slowly moving policy): a false alarm in under 2% of runs with the defaults,
about 15% with ``patience: 1`` (and about 60% with neither correction, in a one-off run of the
same model). A drop of 0.2 in every task's chance is caught by the second check after it in
at least 85% of runs; a drop of 0.15 within five checks in at least 85% (64% by the second).

Reactions are decisions returned to the caller (:class:`DriftDecision`, a record to store and
show in the step summary): ``warn``; ``upweight`` (the domain's sampling weight times
``upweight_factor`` while it stays regressed); ``rollback`` (to the last evaluation step at
which no domain had regressed: the caller restores the checkpoint of that step, then calls
:meth:`DriftGuard.rolled_back`). ``upweight`` with ``escalate_after`` k rolls back when the
domain is still regressed k checks after its up-weight began: more draws of a domain cannot
bring it back when its own groups no longer reward what it lost - in the fifth multidomain run
gcd dropped its answer tags in a mix; its groups then rewarded only a right value without tags
(the lenient 0.3), so the up-weight trained the untagged form further, and gcd stayed at 0.03
through three more checks.

A second way to regress, off unless ``collapse`` is set: a policy that gives one and the same
reply to most held-out tasks has stopped answering the question, whatever its score - it scores
the share of tasks that one answer happens to fit, which can be above its best. In the eighth
multidomain run gcd's greedy replies became ``<answer>1</answer>`` to 95% of the held-out tasks
by the first check (step 5) and to all of them later, while its mean rose (0.14 -> 0.17): the
drop test saw nothing. With ``collapse: s``, an evaluation where the commonest reply answers at
least ``s`` of the domain's tasks (``min_tasks`` or more) counts as regressed when an earlier
evaluation of the domain was below ``s`` - the policy once told the tasks apart (a domain that
always answered so, a yes/no task or an untrained model repeating itself, is not flagged); such an
evaluation is never the domain's best, so a drop is measured from before it.
The caller passes the share with the scores (:meth:`DriftGuard.record`; ``same_reply`` of
:mod:`practicum.eval_metrics`).
"""

from __future__ import annotations

import math
from typing import Any, Literal

from pydantic import BaseModel, Field

from practicum.curriculum.base import Strict

Reaction = Literal["warn", "upweight", "rollback"]


class DriftConfig(Strict):
    enabled: bool = Field(default=False, description="Check each held-out evaluation per domain against its best.")
    margin: float = Field(default=0.05, ge=0, description="Least drop of the mean held-out score below the domain's best that counts.")
    alpha: float = Field(default=0.05, gt=0, lt=1, description="Significance level of the one-sided paired test.")
    test: Literal["auto", "mcnemar", "paired_t"] = Field(
        default="auto", description="auto: exact McNemar when every score is 0 or 1, else the paired t-test.")
    min_tasks: int = Field(default=10, ge=2, description="Fewest paired held-out tasks for a verdict (fewer: no decision).")
    patience: int = Field(default=2, ge=1, description="Regressed checks in a row before the reaction (1: react at once).")
    reaction: Reaction = Field(default="warn", description="What to do about a regressed domain: warn, upweight it, or roll back to the last good evaluation step.")
    upweight_factor: float = Field(default=2.0, gt=1, description="upweight: multiply the regressed domain's sampling weight by this while it stays regressed.")
    escalate_after: int | None = Field(default=None, ge=1, description="upweight: when the domain is still regressed this many "
                                       "checks after its up-weight began, roll back instead (None: never). The last good "
                                       "evaluation's checkpoint is kept, as under rollback.")

    collapse: float | None = Field(default=None, gt=0, le=1, description="A domain whose held-out evaluation gives one "
                                   "and the same reply to at least this share of its tasks counts as regressed, whatever its "
                                   "score (None: off); only once an earlier evaluation of it did not.")

    @property
    def may_roll_back(self) -> bool:
        """Whether a verdict can be a roll-back (the loop keeps the last good checkpoint then)."""
        return self.reaction == "rollback" or (self.reaction == "upweight" and self.escalate_after is not None)


class DriftDecision(BaseModel):
    """One domain's verdict at one evaluation; ``action`` is "none" when it has not regressed."""

    step: int
    domain: str
    best_step: int | None
    best: float | None  # mean over the paired tasks at best_step
    current: float  # mean over the paired tasks now
    drop: float
    p_value: float
    test: str
    tasks: int  # paired tasks
    regressed: bool  # this check found a significant drop beyond the margin, or a collapse
    streak: int  # regressed checks in a row, this one included
    action: Literal["none", "warn", "upweight", "rollback"]
    weight_factor: float = 1.0
    rollback_to: int | None = None
    # the share of the domain's tasks given its commonest reply and that reply; with ``collapse``
    # set, whether this evaluation collapsed (then it regressed), and the earlier evaluation whose
    # commonest reply answered the fewest tasks (step, share)
    same_reply: float | None = None
    reply: str | None = None
    collapsed: bool = False
    varied_step: int | None = None
    varied_same_reply: float | None = None
    # what moved under the mean: paired tasks scoring lower now than at best_step (lost) and higher
    # (gained), and tasks scoring below their own best of any earlier evaluation (forgotten) - a
    # domain can hold its mean while it forgets as much as it learns
    lost: int = 0
    gained: int = 0
    forgotten: int = 0

    def line(self) -> str:
        if not self.regressed:
            return f"{self.domain}: ok"
        react = (f" -> {self.action}" + (f" to step {self.rollback_to}" if self.rollback_to is not None else "")
                 if self.action != "none" else f", {self.streak} check(s) in a row")
        if self.collapsed:
            return (f"{self.domain}: the same reply to {self.same_reply:.0%} of its held-out tasks ({self.reply!r}; "
                    f"{self.varied_same_reply:.0%} at step {self.varied_step}), score {self.current:.3f}" + react)
        if self.action == "none":
            return f"{self.domain}: below best by {self.drop:.3f} (p={self.p_value:.3g})" + react
        return (f"{self.domain}: {self.current:.3f} vs best {self.best:.3f} at step {self.best_step} "
                f"(drop {self.drop:.3f}, {self.test} p={self.p_value:.3g}, n={self.tasks})" + react)


def mcnemar_p(losses: int, gains: int) -> float:
    """One-sided exact McNemar: P(X >= losses), X ~ Binomial(losses + gains, 1/2)."""
    n = losses + gains
    if n == 0:
        return 1.0
    return sum(math.comb(n, k) for k in range(losses, n + 1)) / 2**n


def _beta_cf(a: float, b: float, x: float) -> float:
    """Continued fraction of the incomplete beta function (modified Lentz)."""
    tiny, eps = 1e-300, 1e-15
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 300):
        for num in (m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
                    -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))):
            d = 1.0 + num * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + num / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < eps:
            break
    return h


def betainc(a: float, b: float, x: float) -> float:
    """Regularised incomplete beta I_x(a, b), for x in [0, 1]."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1) / (a + b + 2):  # the fraction converges fast here; else use the symmetry
        return front * _beta_cf(a, b, x) / a
    return 1.0 - front * _beta_cf(b, a, 1.0 - x) / b


def student_t_sf(t: float, df: float) -> float:
    """P(T >= t) for Student's t with ``df`` degrees of freedom."""
    tail = 0.5 * betainc(df / 2, 0.5, df / (df + t * t))
    return tail if t >= 0 else 1.0 - tail


def paired_t_p(diffs: list[float]) -> float:
    """One-sided paired t-test of mean(diffs) > 0."""
    n = len(diffs)
    mean = sum(diffs) / n
    var = sum((d - mean) ** 2 for d in diffs) / (n - 1)
    if var == 0.0:
        return 0.0 if mean > 0 else 1.0
    return student_t_sf(mean / math.sqrt(var / n), n - 1)


class DriftGuard:
    """Held-out history per domain, and the verdicts drawn from it."""

    def __init__(self, cfg: DriftConfig) -> None:
        self.cfg = cfg
        self.history: dict[str, dict[int, dict[str, float]]] = {}  # domain -> step -> task id -> score
        self.same: dict[str, dict[int, tuple[float, str]]] = {}  # domain -> step -> (share, reply): commonest reply
        self.last_good: int | None = None  # latest evaluation step at which no domain had regressed
        self.streak: dict[str, int] = {}  # domain -> regressed checks in a row

    def record(self, step: int, domain: str, scores: dict[str, float],
               same_reply: tuple[str | None, float | None] | None = None) -> None:
        """``scores``: task id -> score; ``same_reply``: (the reply given to the most tasks, the
        share of tasks given it), as :func:`practicum.eval_metrics.same_reply` returns it."""
        self.history.setdefault(domain, {})[step] = dict(scores)
        if same_reply is not None and same_reply[1] is not None:
            self.same.setdefault(domain, {})[step] = (float(same_reply[1]), same_reply[0] or "")

    def _most_varied(self, domain: str, step: int) -> int | None:
        """The evaluation before ``step`` whose commonest reply answered the smallest share of tasks."""
        earlier = {s: v[0] for s, v in self.same.get(domain, {}).items() if s < step}
        return min(earlier, key=lambda s: (earlier[s], s)) if earlier else None

    def _collapsed(self, domain: str, step: int) -> bool:
        """Whether ``domain``'s evaluation at ``step`` gave one reply to ``collapse`` of its tasks or
        more, when an earlier evaluation did not."""
        same, limit = self.same.get(domain, {}), self.cfg.collapse
        varied = self._most_varied(domain, step)
        if limit is None or step not in same or varied is None or len(self.history[domain][step]) < self.cfg.min_tasks:
            return False
        return same[step][0] >= limit > same[varied][0]

    def _candidates(self, domain: str, step: int) -> dict[int, dict[str, float]]:
        """The evaluations before ``step`` a best can be chosen from: not empty, not collapsed."""
        return {s: v for s, v in self.history.get(domain, {}).items() if s < step and v and not self._collapsed(domain, s)}

    def _best(self, domain: str, step: int) -> int | None:
        earlier = self._candidates(domain, step)
        # highest mean; ties: the earlier step
        return max(earlier, key=lambda s: (sum(earlier[s].values()) / len(earlier[s]), -s)) if earlier else None

    def forgotten(self, domain: str, step: int) -> int:
        """Tasks of ``domain``'s evaluation at ``step`` that score below their own best of the
        evaluations before it (for 0/1 scores: right at some earlier check, wrong now)."""
        now = self.history[domain][step]
        earlier = [v for s, v in self.history[domain].items() if s < step]
        return sum(1 for t, x in now.items() if any(t in v and v[t] > x for v in earlier))

    def verdict(self, step: int, domain: str) -> DriftDecision:
        """Compare ``domain``'s evaluation at ``step`` with its best earlier one; call once per
        evaluation (it counts the streak)."""
        now = self.history[domain][step]
        best_step = self._best(domain, step)
        best = self.history[domain][best_step] if best_step is not None else {}
        shared = sorted(now.keys() & best.keys())
        cur_mean = sum(now[t] for t in shared) / len(shared) if shared else sum(now.values()) / max(len(now), 1)
        collapsed = self._collapsed(domain, step)
        share, reply = self.same.get(domain, {}).get(step, (None, None))
        varied = self._most_varied(domain, step)
        seen = {"same_reply": share, "reply": reply, "collapsed": collapsed, "varied_step": varied,
                "varied_same_reply": None if varied is None else self.same[domain][varied][0]}
        seen["forgotten"] = self.forgotten(domain, step)
        if best_step is None or len(shared) < self.cfg.min_tasks:  # nothing to pair with: a collapse is still seen
            return self._react(step, domain, collapsed, dict(best_step=best_step, best=None, current=cur_mean, drop=0.0,
                                                             p_value=1.0, test="none", tasks=len(shared)), seen)
        best_mean = sum(best[t] for t in shared) / len(shared)
        binary = all(v in (0.0, 1.0) for t in shared for v in (now[t], best[t]))
        test = "mcnemar" if self.cfg.test == "mcnemar" or (self.cfg.test == "auto" and binary) else "paired_t"
        losses = sum(1 for t in shared if best[t] > now[t])
        gains = sum(1 for t in shared if best[t] < now[t])
        seen.update(lost=losses, gained=gains)
        if test == "mcnemar":
            p = mcnemar_p(losses, gains)
        else:
            p = paired_t_p([best[t] - now[t] for t in shared])
        drop = best_mean - cur_mean
        regressed = collapsed or (drop > self.cfg.margin and p < self.cfg.alpha / len(self._candidates(domain, step)))
        return self._react(step, domain, regressed, dict(best_step=best_step, best=best_mean, current=cur_mean,
                                                         drop=drop, p_value=p, test=test, tasks=len(shared)), seen)

    def _react(self, step: int, domain: str, regressed: bool, found: dict[str, Any], seen: dict[str, Any]) -> DriftDecision:
        """Count the streak and pick the reaction for a verdict."""
        streak = self.streak[domain] = self.streak.get(domain, 0) + 1 if regressed else 0
        action = self.cfg.reaction if streak >= self.cfg.patience else "none"
        if (action == "upweight" and self.cfg.escalate_after is not None and self.last_good is not None
                and streak >= self.cfg.patience + self.cfg.escalate_after):
            action = "rollback"  # the up-weight did not bring it back: its groups may not reward what it lost
        return DriftDecision(
            step=step, domain=domain, regressed=regressed, streak=streak, action=action,
            weight_factor=self.cfg.upweight_factor if action == "upweight" else 1.0,
            rollback_to=self.last_good if action == "rollback" else None, **found, **seen)

    def check(self, step: int) -> list[DriftDecision]:
        """Verdicts of every domain evaluated at ``step``; advances ``last_good`` when none regressed."""
        decisions = [self.verdict(step, d) for d in sorted(self.history) if step in self.history[d]]
        if not any(d.regressed for d in decisions):
            self.last_good = step
        return decisions

    def rolled_back(self, to_step: int) -> None:
        """The run went back to ``to_step``: evaluations after it belong to a discarded branch."""
        for steps in [*self.history.values(), *self.same.values()]:
            for s in [s for s in steps if s > to_step]:
                del steps[s]
        self.last_good = to_step
        self.streak = {}

    def state(self) -> dict[str, Any]:
        return {"last_good": self.last_good, "streak": dict(self.streak),
                "history": {d: {str(s): dict(v) for s, v in steps.items()} for d, steps in self.history.items()},
                "same": {d: {str(s): [share, text] for s, (share, text) in steps.items()} for d, steps in self.same.items()}}

    def load(self, state: dict[str, Any]) -> None:
        self.last_good = None if state["last_good"] is None else int(state["last_good"])
        self.streak = {d: int(n) for d, n in state["streak"].items()}
        self.history = {d: {int(s): {t: float(x) for t, x in v.items()} for s, v in steps.items()}
                        for d, steps in state["history"].items()}
        self.same = {d: {int(s): (float(share), str(text)) for s, (share, text) in steps.items()}
                     for d, steps in state.get("same", {}).items()}  # absent from checkpoints before the collapse check
