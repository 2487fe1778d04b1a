"""Statistics of evaluations by process: pass@k, pass^k, clustered intervals, paired comparisons.

Everything here is a pure function of per-episode records, so it is tested against numbers
computed by hand (tests/test_eval_metrics.py):

* :func:`pass_at_k` - the unbiased estimator of Chen et al. (2021), 1 - C(n-c, k) / C(n, k): the
  chance that at least one of k samples (of the n drawn, c right) is right;
* :func:`pass_hat_k` - pass^k (Yao et al., tau-bench, 2024), C(c, k) / C(n, k): the chance that
  all k are right - reliability rather than luck;
* :func:`clustered_mean` - the mean score with a standard error clustered by task (episodes of
  the same task are not independent draws; with one sample per task it is the ordinary standard
  error), and its 95% interval (Student t with G - 1 degrees of freedom, as inspect_ai and
  Miller's "Adding error bars to evals" recommend);
* :func:`paired` - two runs on the same tasks: the per-task differences, their mean, a 95% t
  interval, a two-sided p-value, and the smallest difference the sample can detect at 80% power
  (two-sided alpha 0.05): (t_{0.975} + t_{0.8}) x sd / sqrt(n);
* :func:`process_metrics` - turns to success, tool-call validity, recovery (episodes that met a
  failing test or a tool error and then succeeded, over those that met one), failed (the model's
  fault) vs errored (the infrastructure's) kept apart, time-outs, tokens, latency, sandbox CPU
  seconds and the cost at configured prices;
* :func:`same_reply` - the reply given to the most distinct tasks, and their share: a policy that
  collapsed onto one answer whatever the question (``<answer>1</answer>`` to every GCD) scores
  only the share of tasks that answer happens to fit, a gain no mean can tell from a skill.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from practicum.curriculum.drift import student_t_sf


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k from n samples with c right (k <= n)."""
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"pass@k needs 0 <= c <= n and 1 <= k <= n (n={n}, c={c}, k={k})")
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def pass_hat_k(n: int, c: int, k: int) -> float:
    """Unbiased pass^k (all of k samples right) from n samples with c right."""
    if not 0 <= c <= n or not 1 <= k <= n:
        raise ValueError(f"pass^k needs 0 <= c <= n and 1 <= k <= n (n={n}, c={c}, k={k})")
    return math.comb(c, k) / math.comb(n, k)


def t_quantile(p: float, df: float) -> float:
    """The q with P(T <= q) = p, for p in (0.5, 1): bisection on the tail (scipy is not a dependency)."""
    if not 0.5 < p < 1.0:
        raise ValueError(f"t_quantile needs 0.5 < p < 1, got {p}")
    lo, hi = 0.0, 1.0
    while student_t_sf(hi, df) > 1.0 - p:
        hi *= 2.0
    for _ in range(100):
        mid = (lo + hi) / 2
        if student_t_sf(mid, df) > 1.0 - p:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def t_p_two_sided(t: float, df: float) -> float:
    return min(1.0, 2.0 * student_t_sf(abs(t), df))


@dataclass
class MeanCI:
    mean: float
    se: float
    lo: float
    hi: float
    n: int  # episodes
    clusters: int  # tasks


def clustered_mean(scores: Sequence[tuple[str, float]], level: float = 0.95) -> MeanCI:
    """Mean of (task, score) pairs with a task-clustered standard error (CR1: the sum over tasks of
    the squared sums of residuals, times G/(G-1), over N^2) and a t interval with G-1 df."""
    n = len(scores)
    if n == 0:
        return MeanCI(float("nan"), float("nan"), float("nan"), float("nan"), 0, 0)
    mean = sum(s for _, s in scores) / n
    sums: dict[str, float] = defaultdict(float)
    for task, s in scores:
        sums[task] += s - mean
    g = len(sums)
    if g < 2:
        return MeanCI(mean, float("nan"), float("nan"), float("nan"), n, g)
    se = math.sqrt(g / (g - 1) * sum(v * v for v in sums.values())) / n
    half = t_quantile(0.5 + level / 2, g - 1) * se
    return MeanCI(mean, se, mean - half, mean + half, n, g)


@dataclass
class Paired:
    n: int  # tasks in both runs
    mean: float  # mean of B - A over tasks
    sd: float
    lo: float
    hi: float
    p: float
    mde: float  # smallest |difference| detectable at 80% power, two-sided alpha 0.05
    wins: int  # tasks where B > A
    losses: int


def paired(a: dict[str, float], b: dict[str, float], level: float = 0.95, power: float = 0.8) -> Paired:
    """B - A on the tasks both runs have (each a task's mean score over its samples)."""
    tasks = sorted(a.keys() & b.keys())
    n = len(tasks)
    diffs = [b[t] - a[t] for t in tasks]
    if n == 0:
        nan = float("nan")
        return Paired(0, nan, nan, nan, nan, nan, nan, 0, 0)
    mean = sum(diffs) / n
    sd = math.sqrt(sum((x - mean) ** 2 for x in diffs) / (n - 1)) if n > 1 else float("nan")
    if n < 2:
        return Paired(n, mean, sd, float("nan"), float("nan"), float("nan"), float("nan"),
                      sum(x > 0 for x in diffs), sum(x < 0 for x in diffs))
    se = sd / math.sqrt(n)
    tq = t_quantile(0.5 + level / 2, n - 1)
    if se == 0:
        p = 1.0 if mean == 0 else 0.0
    else:
        p = t_p_two_sided(mean / se, n - 1)
    mde = (tq + t_quantile(power, n - 1)) * se
    return Paired(n, mean, sd, mean - tq * se, mean + tq * se, p, mde,
                  sum(x > 0 for x in diffs), sum(x < 0 for x in diffs))


# --- process metrics ----------------------------------------------------------------------------
@dataclass
class Process:
    episodes: int
    failed: int  # the model's fault: scored (below success) or failed through its own output
    errored: int  # the infrastructure's: environment, verifier or engine failures after retries
    timed_out: int  # ended at a turn, token or time limit
    success_rate: float
    turns_to_success: float | None  # mean turns of the successful episodes
    tool_calls: int
    tool_call_validity: float | None  # share of tool calls that were well-formed and ran
    met_trouble: int  # episodes that met a failing test or a tool error
    recovered: int  # ... and then succeeded
    recovery_rate: float | None
    tokens: int  # completion tokens
    mean_latency_s: float | None
    prompt_tokens: int = 0  # every turn's whole context, as an API bills it
    sandbox_cpu_s: float = 0.0  # CPU seconds of the environments' sandbox executions (practicum.sandbox.meter)
    cost: float | None = None  # at the given prices: tokens, sandbox CPU seconds, verifier seconds (None: no prices)
    same_reply: float | None = None  # share of distinct tasks given the most common last reply (None: under 2 tasks)
    same_reply_text: str | None = None  # that reply (its first 80 characters)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


INFRA = ("environment", "verifier", "engine")


def process_metrics(episodes: Iterable[Any], success: float = 1.0, prices: Any = None) -> Process:
    """Process metrics of episodes (``practicum.records.Episode``); ``success``: the score at or
    above which an episode succeeded; ``prices`` (``practicum.budget.Prices``): what the cost is
    counted at, as a budget counts it (:class:`practicum.budget.Spend`)."""
    eps = list(episodes)
    errored = [e for e in eps if e.errors and any(x.kind in INFRA for x in e.errors) and not e.trainable]
    ok = [e for e in eps if e not in errored]
    wins = [e for e in ok if e.score is not None and e.score.value >= success]
    timed = [e for e in ok if e.info.end_reason in ("turn_limit", "token_limit", "time_limit")]
    calls = sum(sum(e.info.tool_calls.values()) for e in ok)
    bad_calls = sum(sum(e.info.tool_errors.values()) for e in ok)
    trouble = [e for e in ok if met_trouble(e)]
    recovered = [e for e in trouble if e in wins]
    tokens = sum(len(t.completion_ids) for e in eps for t in e.turns)
    top, share = same_reply(eps)
    return Process(
        episodes=len(eps), failed=len(ok) - len(wins), errored=len(errored), timed_out=len(timed),
        success_rate=len(wins) / len(ok) if ok else 0.0,
        turns_to_success=(sum(len(e.turns) for e in wins) / len(wins)) if wins else None,
        tool_calls=calls + bad_calls,
        tool_call_validity=(calls / (calls + bad_calls)) if calls + bad_calls else None,
        met_trouble=len(trouble), recovered=len(recovered),
        recovery_rate=(len(recovered) / len(trouble)) if trouble else None,
        tokens=tokens, mean_latency_s=(sum(e.seconds for e in eps) / len(eps)) if eps else None,
        prompt_tokens=sum(len(t.prompt_ids) for e in eps for t in e.turns),
        sandbox_cpu_s=sum(e.info.sandbox_cpu_s for e in eps),
        cost=None if prices is None else _cost(eps, prices),
        same_reply=share, same_reply_text=None if top is None else top[:80])


SAME_REPLY_WARN = 0.5  # a share of distinct tasks given one reply that a report points out
SAME_REPLY_MIN_TASKS = 10  # fewer tasks than this: too few for the share to mean a collapse


def one_reply_to_most(tasks: int, share: float | None) -> bool:
    """Whether one reply answered at least SAME_REPLY_WARN of ``tasks`` (SAME_REPLY_MIN_TASKS or more)."""
    return tasks >= SAME_REPLY_MIN_TASKS and share is not None and share >= SAME_REPLY_WARN


def same_reply_warning(domain: str, tasks: int, share: float | None, text: str | None) -> str | None:
    """The line a report prints when one reply answered most of a domain's tasks; None otherwise."""
    if not one_reply_to_most(tasks, share):
        return None
    return f"{domain}: the same reply to {share:.0%} of {tasks} tasks ({text!r}): its score is what that one answer happens to fit"


def same_reply(episodes: Iterable[Any]) -> tuple[str | None, float | None]:
    """The last reply (stripped) given to the most distinct tasks, and the share of the tasks given
    it (a task with several samples counts once for each distinct reply); (None, None) under two
    tasks. Near 1 over many tasks: the policy answers the same whatever it is asked."""
    by_task: dict[str, set[str]] = defaultdict(set)
    for e in episodes:
        if e.turns:
            by_task[e.task_id].add(e.turns[-1].text.strip())
    if len(by_task) < 2:
        return None, None
    counts: dict[str, int] = defaultdict(int)
    for texts in by_task.values():
        for t in texts:
            counts[t] += 1
    top = max(counts, key=lambda t: (counts[t], t))
    return top, counts[top] / len(by_task)


def _cost(eps: list[Any], prices: Any) -> float:
    from practicum.budget import Spend

    spend = Spend()
    spend.add_episodes(eps)
    return spend.money(prices)


def met_trouble(e: Any) -> bool:
    """A tool error, or an observation that reports a failing test or an error, before the end."""
    if sum(e.info.tool_errors.values()) > 0:
        return True
    for m in e.messages:
        if m.role in ("tool", "user") and m is not e.messages[0]:
            text = m.content
            if ("Traceback (most recent call last)" in text or "AssertionError" in text or "FAILED" in text
                    or "error (" in text):
                return True
    return False


def summarise(rows: Sequence[Any], episodes: dict[str, list[Any]], ks: Sequence[int] = (1,),
              success: float = 1.0, prices: Any = None) -> dict[str, Any]:
    """Per domain: the mean score with its task-clustered 95% interval, pass@k and pass^k for each
    k no larger than the samples per task, and the process metrics (with the cost at ``prices``)."""
    out: dict[str, Any] = {}
    by: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for r in rows:
        by[r.domain][r.task].append(r.reward)
    for domain, tasks in by.items():
        n = min(len(v) for v in tasks.values())
        ci = clustered_mean([(t, x) for t, xs in tasks.items() for x in xs])
        m: dict[str, Any] = {"tasks": len(tasks), "samples_per_task": n, "mean": ci.mean, "ci95": [ci.lo, ci.hi],
                             "se_clustered": ci.se}
        for k in ks:
            if k <= n:
                m[f"pass@{k}"] = sum(pass_at_k(len(xs), sum(x >= success for x in xs), k) for xs in tasks.values()) / len(tasks)
                m[f"pass^{k}"] = sum(pass_hat_k(len(xs), sum(x >= success for x in xs), k) for xs in tasks.values()) / len(tasks)
        m["process"] = process_metrics(episodes.get(domain, []), success, prices).as_dict()
        out[domain] = m
    return out
