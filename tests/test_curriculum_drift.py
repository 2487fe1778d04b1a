"""The drift guard: its tests against hand-computed and tabulated values, synthetic curves (a
real regression is caught and reacted to as configured; noise of the same size on a small
sample is not; a flat noisy domain rarely raises a false alarm), rollback, and state."""

from __future__ import annotations

import json
import math
import random

import pytest

from practicum.curriculum.drift import (
    DriftConfig,
    DriftGuard,
    betainc,
    mcnemar_p,
    paired_t_p,
    student_t_sf,
)


def test_exact_mcnemar_by_hand():
    assert mcnemar_p(3, 1) == 5 / 16  # P(X >= 3), X ~ Bin(4, 1/2) = (4 + 1) / 16
    assert mcnemar_p(2, 0) == 0.25
    assert mcnemar_p(0, 0) == 1.0
    # 40 losses, 5 gains: (C(45,5) + C(45,4) + C(45,3) + C(45,2) + 45 + 1) / 2^45 = 1385980 / 2^45
    assert mcnemar_p(40, 5) == pytest.approx(1385980 / 2**45, rel=1e-12)


@pytest.mark.parametrize(("t", "df", "p"), [
    (1.812461, 10, 0.05),  # t tables: one-sided 5% point of t_10
    (2.763769, 10, 0.01),  # 1% point of t_10
    (1.0, 1, 0.25),  # Cauchy: 1/2 - atan(1) / pi
    (2.0, 10, 0.036694),
    (0.0, 7, 0.5),
    (-1.0, 5, 1 - 0.181609),  # symmetry
    (1.644854, 1e6, 0.05),  # large df: the normal's 5% point
])
def test_student_t_tail_against_tables(t, df, p):
    assert student_t_sf(t, df) == pytest.approx(p, abs=2e-6)


def test_incomplete_beta_edges_and_a_closed_form():
    assert (betainc(2, 3, 0.0), betainc(2, 3, 1.0)) == (0.0, 1.0)
    x = 0.3  # I_x(1, b) = 1 - (1 - x)^b
    assert betainc(1, 4, x) == pytest.approx(1 - (1 - x) ** 4, abs=1e-12)


def test_paired_t_by_hand():
    # diffs 1, 2, 3: mean 2, sd 1, t = 2 / (1 / sqrt 3) = 3.4641; t_2 tail = (1 - t / sqrt(2 + t^2)) / 2
    t = 2 * math.sqrt(3)
    assert paired_t_p([1.0, 2.0, 3.0]) == pytest.approx((1 - t / math.sqrt(2 + t * t)) / 2, abs=1e-9)  # 0.0370899
    assert paired_t_p([0.5, 0.5]) == 0.0  # a constant positive drop
    assert paired_t_p([0.0, 0.0]) == 1.0


def outcomes(right: int, n: int = 100) -> dict[str, float]:
    """Tasks t0..t{right-1} right, the rest wrong."""
    return {f"t{i}": float(i < right) for i in range(n)}


@pytest.mark.parametrize("reaction", ["warn", "upweight", "rollback"])
def test_a_poisoned_domain_is_caught_and_reacted_to_as_configured(reaction):
    """math improves 40 -> 60 of 100 over steps 0..40, then its reward is poisoned and it falls;
    code stays flat. At step 50 the drop (60 -> 45: 15 losses, 0 gains, p = 2^-15, below
    0.05 / 5 candidates) is a first regressed check; at step 60 the second, and the guard reacts."""
    g = DriftGuard(DriftConfig(enabled=True, reaction=reaction, upweight_factor=3.0))  # margin .05, patience 2
    math_curve = [40, 45, 50, 55, 60, 45, 40]
    seen = []
    for e, right in enumerate(math_curve):
        g.record(10 * e, "math", outcomes(right))
        g.record(10 * e, "code", outcomes(50))
        seen.append({d.domain: d for d in g.check(10 * e)})
    assert not any(s["math"].regressed for s in seen[:5])
    assert not any(s["code"].regressed for s in seen)
    first, second = seen[5]["math"], seen[6]["math"]
    assert (first.regressed, first.streak, first.action, first.best_step) == (True, 1, "none", 40)
    assert first.drop == pytest.approx(0.15) and first.p_value == 2**-15 and first.test == "mcnemar"
    assert (second.regressed, second.streak, second.action) == (True, 2, reaction)
    assert second.weight_factor == (3.0 if reaction == "upweight" else 1.0)
    assert second.rollback_to == (40 if reaction == "rollback" else None)  # the last step where nothing regressed
    assert "best 0.600 at step 40" in second.line() and reaction in second.line()
    assert seen[6]["code"].action == "none" and seen[6]["code"].line() == "code: ok"


def test_an_upweight_that_does_not_bring_the_domain_back_escalates_to_a_rollback():
    """The poisoned curve of the test above, patience 1: at step 50 math is up-weighted; still
    regressed at 60 (escalate_after 1), the guard rolls back to step 40 instead, with no
    up-weight. Without escalate_after it up-weights again."""
    cfg = dict(enabled=True, reaction="upweight", upweight_factor=3.0, patience=1)
    for escalate, second_action in ((1, "rollback"), (None, "upweight")):
        g = DriftGuard(DriftConfig(**cfg, escalate_after=escalate))
        assert g.cfg.may_roll_back is (escalate is not None)
        seen = []
        for e, right in enumerate([40, 45, 50, 55, 60, 45, 40]):
            g.record(10 * e, "math", outcomes(right))
            seen.append(g.check(10 * e)[0])
        first, second = seen[5], seen[6]
        assert (first.action, first.weight_factor, first.rollback_to) == ("upweight", 3.0, None)
        assert (second.streak, second.action) == (2, second_action)
        assert (second.weight_factor, second.rollback_to) == ((1.0, 40) if escalate else (3.0, None))
    assert DriftConfig(reaction="rollback").may_roll_back and not DriftConfig(reaction="warn", escalate_after=1).may_roll_back


def test_noise_of_the_same_size_on_a_small_sample_is_not_caught():
    """A drop of 0.2 (6 -> 4 right of 10 tasks: 3 lost, 1 gained) is above the margin, but
    p = 5/16: noise. A drop of 0.3 on 100 tasks (40 lost, 10 gained) is caught."""
    g = DriftGuard(DriftConfig(enabled=True, patience=1))
    g.record(0, "d", {f"t{i}": float(i in {0, 1, 2, 3, 4, 5}) for i in range(10)})
    g.record(10, "d", {f"t{i}": float(i in {3, 4, 5, 6}) for i in range(10)})
    g.check(0)
    (d,) = g.check(10)
    assert d.drop == pytest.approx(0.2) and d.p_value == 5 / 16 and not d.regressed

    big = DriftGuard(DriftConfig(enabled=True, patience=1))
    big.record(0, "d", outcomes(60))
    # right now: tasks 30..49 and 60..69 -> lost 0..29 and 50..59 (40), gained 60..69 (10)
    big.record(10, "d", {f"t{i}": float(30 <= i < 50 or 60 <= i < 70) for i in range(100)})
    big.check(0)
    (d,) = big.check(10)
    assert (d.drop, d.p_value < 0.05, d.regressed) == (pytest.approx(0.3), True, True)


def test_continuous_scores_use_the_paired_t_test_and_few_tasks_give_no_verdict():
    g = DriftGuard(DriftConfig(enabled=True, patience=1, min_tasks=3))
    g.record(0, "d", {"a": 0.9, "b": 0.8, "c": 0.7})
    g.record(10, "d", {"a": 0.8, "b": 0.6, "c": 0.4})  # drops 0.1, 0.2, 0.3
    g.check(0)
    (d,) = g.check(10)
    assert d.test == "paired_t" and d.p_value == pytest.approx(paired_t_p([0.1, 0.2, 0.3]))
    assert d.regressed  # mean drop 0.2, p 0.037 < 0.05 / 1
    few = DriftGuard(DriftConfig(enabled=True, min_tasks=10))
    few.record(0, "d", {"a": 1.0})
    few.record(10, "d", {"a": 0.0})
    assert [x.test for x in (few.check(0) + few.check(10))] == ["none", "none"]


def flat_noisy_run(seed: int, cfg: DriftConfig, drop_at: int | None = None, drop: float = 0.0) -> list[bool]:
    """100 tasks, each right with its own probability, redrawn at every one of 10 evaluations
    (far noisier than a greedy evaluation); from evaluation ``drop_at`` every probability falls
    by ``drop``. Returns whether the guard reacted at each evaluation."""
    rng = random.Random(seed)
    p = [rng.random() for _ in range(100)]
    g = DriftGuard(cfg)
    acted = []
    for e in range(10):
        q = [x - drop if drop_at is not None and e >= drop_at else x for x in p]
        g.record(e, "d", {f"t{i}": float(rng.random() < q[i]) for i in range(100)})
        acted.append(any(d.action != "none" for d in g.check(e)))
    return acted


def test_a_flat_noisy_domain_rarely_raises_an_alarm_and_a_real_drop_is_caught():
    """The figures quoted in drift.py's docstring, on 200 runs of 10 evaluations each. With the
    defaults (alpha 0.05 over the candidates of the best, patience 2) a flat domain raises a
    false alarm in under 2% of runs; with patience 1, in over 10%. A drop of
    0.2 in every task's probability from evaluation 5 is caught by evaluation 6 (the second
    check after it) in at least 85% of runs; a drop of 0.15 by evaluation 9 in at least 85%."""
    defaults = DriftConfig(enabled=True)
    false_alarms = sum(any(flat_noisy_run(s, defaults)) for s in range(200)) / 200
    assert false_alarms < 0.02

    hasty = sum(any(flat_noisy_run(s, DriftConfig(enabled=True, patience=1))) for s in range(200)) / 200
    assert hasty > 0.1  # reacting at the first regressed check: noise does it

    caught = sum(any(flat_noisy_run(s, defaults, drop_at=5, drop=0.2)[5:7]) for s in range(200)) / 200
    assert caught >= 0.85
    caught = sum(any(flat_noisy_run(s, defaults, drop_at=5, drop=0.15)[5:10]) for s in range(200)) / 200
    assert caught >= 0.85


def test_rollback_forgets_the_discarded_branch_and_state_round_trips():
    g = DriftGuard(DriftConfig(enabled=True, reaction="rollback", patience=1))
    for e, right in enumerate([50, 60, 30]):
        g.record(10 * e, "d", outcomes(right))
        decisions = g.check(10 * e)
    assert decisions[0].rollback_to == 10
    copy = DriftGuard(DriftConfig(enabled=True, reaction="rollback", patience=1))
    copy.load(json.loads(json.dumps(g.state())))
    assert copy.state() == g.state()
    g.rolled_back(10)
    assert sorted(g.history["d"]) == [0, 10] and g.last_good == 10 and g.streak == {}


def test_a_flat_mean_that_forgets_as_much_as_it_learns_is_told_by_the_counts():
    """The mix's products in the multidomain benchmark: the mean held while facts it had right went
    wrong and others came right. Ten tasks by hand, 0/1: the best is step 5 (6 right)."""
    g = DriftGuard(DriftConfig(enabled=True))
    steps = {0: [1, 1, 0, 0, 0, 0, 0, 0, 0, 0],   # 2 right
             5: [1, 1, 1, 1, 1, 1, 0, 0, 0, 0],   # 6 right: the best
             10: [0, 1, 1, 1, 1, 0, 1, 1, 0, 0]}  # 6 right: t0 and t5 lost, t6 and t7 gained
    for step, row in steps.items():
        g.record(step, "d", {f"t{i}": float(x) for i, x in enumerate(row)})
        d = g.check(step)[0]
    assert not d.regressed and d.best_step == 5 and d.drop == 0.0
    assert (d.lost, d.gained) == (2, 2)
    assert d.forgotten == 2  # t0 (right at 0 and 5) and t5 (right at 5)
    g.record(15, "d", {f"t{i}": float(x) for i, x in enumerate([1, 1, 1, 1, 1, 0, 0, 0, 0, 0])})
    d = g.check(15)[0]  # against the best (5, the earlier of two ties at 0.6): t5 lost, none gained
    assert (d.best_step, d.lost, d.gained) == (5, 1, 0)
    assert d.forgotten == 3  # t5 (right at 5), t6 and t7 (right at 10)
    first = DriftGuard(DriftConfig(enabled=True))
    first.record(0, "d", {"t0": 1.0})
    assert first.check(0)[0].forgotten == 0  # nothing earlier to forget
    half = DriftGuard(DriftConfig(enabled=True, min_tasks=2))
    for step, row in {0: [0.5, 1.0, 0.0], 5: [0.25, 1.0, 0.5]}.items():  # partial credit: below its own best
        half.record(step, "d", {f"t{i}": x for i, x in enumerate(row)})
        d = half.check(step)[0]
    assert (d.lost, d.gained, d.forgotten) == (1, 1, 1)


# --- collapse: one reply to most held-out tasks ---------------------------------------------------
def answers(right: int, reply_of, n: int = 100) -> tuple[dict[str, float], tuple[str, float]]:
    """Scores (t0..t{right-1} right) and the commonest reply with its share, as
    eval_metrics.same_reply gives them, for replies ``reply_of(i)`` to tasks t0..t{n-1}."""
    replies = [reply_of(i) for i in range(n)]
    top = max(set(replies), key=replies.count)
    return outcomes(right, n), (top, replies.count(top) / n)


def test_a_collapse_onto_one_reply_is_a_regression_though_the_score_rose():
    """gcd in the eighth multidomain run: 14 of 100 right at step 0, replying '12' to 59 tasks;
    at step 5, '1' to 95 tasks and 19 right; at step 10, '1' to all and 17 right. The drop test
    sees no regression (the mean rose); with collapse 0.8 both later checks are regressions:
    the first up-weights, the second (escalate_after 1) rolls back to step 0, the last good."""
    curve = [(14, lambda i: "12" if i < 59 else f"r{i}"), (19, lambda i: "1" if i < 95 else f"r{i}"),
             (17, lambda i: "1")]

    def run(cfg: DriftConfig) -> list:
        g = DriftGuard(cfg)
        out = []
        for e, (right, reply_of) in enumerate(curve):
            scores, same = answers(right, reply_of)
            g.record(5 * e, "gcd", scores, same)
            out.append(g.check(5 * e)[0])
        return out

    plain = run(DriftConfig(enabled=True, reaction="upweight", patience=1, escalate_after=1))
    assert not any(d.regressed for d in plain)
    seen = run(DriftConfig(enabled=True, reaction="upweight", patience=1, escalate_after=1, collapse=0.8))
    assert [(d.regressed, d.collapsed, d.action) for d in seen] == [
        (False, False, "none"), (True, True, "upweight"), (True, True, "rollback")]
    assert seen[1].same_reply == 0.95 and seen[1].reply == "1" and (seen[1].varied_step, seen[1].varied_same_reply) == (0, 0.59)
    assert seen[2].rollback_to == 0 and seen[2].best_step == 0  # the collapsed step 5 is never the best
    assert seen[1].line() == ("gcd: the same reply to 95% of its held-out tasks ('1'; 59% at step 0), "
                              "score 0.190 -> upweight")


def test_a_domain_that_always_answered_alike_is_not_flagged_and_a_collapsed_best_is_skipped():
    """A yes/no domain answers "No" to 85 of 100 tasks from its first evaluation on: no collapse.
    A domain that collapses (40 right, one reply to 90) and then recovers a real 20 is compared
    with its first evaluation (15), not with the collapsed 40: no drop."""
    g = DriftGuard(DriftConfig(enabled=True, patience=1, collapse=0.8))
    for e, right in enumerate([50, 52]):
        scores, same = answers(right, lambda i: "No" if i < 85 else "Yes")
        g.record(e, "yesno", scores, same)
        assert not g.check(e)[0].regressed
    h = DriftGuard(DriftConfig(enabled=True, patience=1, collapse=0.8))
    for e, (right, share) in enumerate([(15, 0.2), (40, 0.9), (20, 0.3)]):
        scores, same = answers(right, lambda i, share=share: "x" if i < 100 * share else f"r{i}")
        h.record(e, "d", scores, same)
        d = h.check(e)[0]
    assert (d.regressed, d.best_step) == (False, 0)  # with the collapsed 40 as best: 20 losses, p 2^-20, regressed


def test_collapse_needs_min_tasks_and_state_carries_the_replies():
    g = DriftGuard(DriftConfig(enabled=True, patience=1, collapse=0.8, min_tasks=10))
    g.record(0, "d", outcomes(1, 5), ("a", 0.2))
    g.record(1, "d", outcomes(1, 5), ("a", 1.0))  # 5 tasks: too few to call it
    g.check(0)
    assert not g.check(1)[0].regressed
    g.record(2, "d", outcomes(5, 20), ("a", 1.0))  # no task shared with a best: a collapse still counts
    assert g.check(2)[0].collapsed
    copy = DriftGuard(g.cfg)
    copy.load(json.loads(json.dumps(g.state())))
    assert copy.state() == g.state() and copy.same["d"][2] == (1.0, "a")
    old = {k: v for k, v in g.state().items() if k != "same"}  # a checkpoint from before the collapse check
    copy.load(json.loads(json.dumps(old)))
    assert copy.same == {}
    g.rolled_back(1)
    assert sorted(g.same["d"]) == [0, 1]


@pytest.mark.parametrize("bad", [0.0, 1.5, -0.2])
def test_a_collapse_share_outside_0_1_is_a_config_error(bad):
    with pytest.raises(ValueError, match="collapse"):
        DriftConfig(enabled=True, collapse=bad)
