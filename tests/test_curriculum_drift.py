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
