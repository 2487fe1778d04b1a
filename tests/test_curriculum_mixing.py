"""Domain mixing: target shares by hand, and the deficit sampler holding the *trained* ratio
when one domain's episodes take ten times longer (a simulated asynchronous orchestrator)."""

from __future__ import annotations

import heapq
import json
import math
import random
from collections import Counter, deque
from collections.abc import Callable

import pytest
from pydantic import ValidationError

from practicum.curriculum.mixing import DeficitSampler, DomainMixer, MixingConfig, slope


def test_static_targets_are_the_normalised_weights():
    mixer = DomainMixer(MixingConfig(), {"a": 1.0, "b": 3.0})
    assert mixer.targets() == {"a": 0.25, "b": 0.75}
    # mixing.weights overrides a domain's own weight
    assert DomainMixer(MixingConfig(weights={"a": 3.0}), {"a": 1.0, "b": 1.0}).targets() == {"a": 0.75, "b": 0.25}


def test_advantage_mode_softmaxes_mean_abs_advantage_with_a_floor():
    mixer = DomainMixer(MixingConfig(mode="advantage", temperature=0.1, floor=0.05, ema=0.3), {"a": 1.0, "b": 1.0})
    mixer.observe("a", [1, 0], [0.4, -0.4])  # mean |A| 0.4
    mixer.observe("b", [1, 0], [0.2, -0.2])  # mean |A| 0.2
    # softmax of (4, 2) = 1 / (1 + e^-2) = 0.880797; with the floor: 0.05 + 0.9 x 0.880797
    t = mixer.targets()
    assert t["a"] == pytest.approx(0.05 + 0.9 / (1 + math.exp(-2)), abs=1e-9)  # 0.842717
    assert t["b"] == pytest.approx(0.05 + 0.9 * (1 - 1 / (1 + math.exp(-2))), abs=1e-9)  # 0.157283
    mixer.observe("a", [1, 1], [0.0, 0.0])  # EMA: 0.7 x 0.4 + 0.3 x 0 = 0.28
    assert mixer.abs_adv["a"] == pytest.approx(0.28)


def test_advantage_mode_tries_an_unobserved_domain_at_the_best_statistic():
    mixer = DomainMixer(MixingConfig(mode="advantage"), {"a": 1.0, "b": 1.0})
    mixer.observe("a", [1, 0], [0.5, -0.5])
    assert mixer.targets() == pytest.approx({"a": 0.5, "b": 0.5})


def test_improving_mode_favours_the_domain_whose_reward_still_rises():
    mixer = DomainMixer(MixingConfig(mode="improving", temperature=0.1, floor=0.05, window=3), {"a": 1.0, "b": 1.0})
    for ra, rb in [(0.1, 0.5), (0.2, 0.5), (0.3, 0.5), (0.4, 0.5)]:  # the window keeps the last 3
        mixer.observe("a", [ra], [0.0])
        mixer.observe("b", [rb], [0.0])
    # a: slope 0.1 over 3 steps -> gained 0.3; b: 0. softmax(3, 0) = e^3 / (e^3 + 1) = 0.952574
    assert mixer.targets()["a"] == pytest.approx(0.05 + 0.9 * math.exp(3) / (math.exp(3) + 1), abs=1e-9)
    assert slope([0.5, 0.3, 0.1]) == pytest.approx(-0.2)  # a falling domain scores 0, not less
    assert slope([1.0]) == 0.0


def test_headroom_mode_draws_away_from_a_mastered_domain():
    cfg = MixingConfig(mode="headroom", temperature=1.0, floor=0.0, window=2)
    mixer = DomainMixer(cfg, {"a": 1.0, "b": 1.0, "c": 2.0})
    for ra, rb, rc in [([0.2], [1.0, 1.0], [0.0, 1.0]), ([0.4], [1.0], [0.6, 0.8])]:
        mixer.observe("a", ra, [0.0])
        mixer.observe("b", rb, [0.0])
        mixer.observe("c", rc, [0.0])
    # headroom over the last 2 step means: a 1 - 0.3 = 0.7, b 1 - 1 = 0 -> 0.001, c 1 - 0.6 = 0.4;
    # T 1: shares ~ weight x headroom = 0.25 x 0.7, 0.25 x 0.001, 0.5 x 0.4 = 0.175, 0.00025, 0.2
    t = mixer.targets()
    assert t["a"] == pytest.approx(0.175 / 0.37525, abs=1e-9)  # 0.466356
    assert t["b"] == pytest.approx(0.00025 / 0.37525, abs=1e-9)  # 0.000666
    assert t["c"] == pytest.approx(0.2 / 0.37525, abs=1e-9)  # 0.532978
    mixer.observe("c", [0.9], [0.0])  # the window drops c's 0.5: mean 0.8, headroom 0.2
    # T 0.5 squares the headroom: 0.25 x 0.49, 0.25 x 1e-6, 0.5 x 0.04; with the floor 0.05: 0.05 + 0.85 x share
    sharp = DomainMixer(MixingConfig(mode="headroom", temperature=0.5, floor=0.05, window=2), {"a": 1.0, "b": 1.0, "c": 2.0})
    sharp.rewards = {d: list(v) for d, v in mixer.rewards.items()}
    total = 0.1225 + 0.25e-6 + 0.02
    assert sharp.targets()["a"] == pytest.approx(0.05 + 0.85 * 0.1225 / total, abs=1e-9)  # 0.780701
    assert sharp.targets()["b"] == pytest.approx(0.05 + 0.85 * 0.25e-6 / total, abs=1e-9)  # the floor, nearly
    assert mixer.targets()["c"] == pytest.approx(0.1 / 0.27525, abs=1e-9)
    # a reward above 1 (a shaped score) reads as mastered, not as negative headroom
    over = DomainMixer(cfg, {"a": 1.0, "b": 1.0})
    over.observe("a", [1.5], [0.0])
    over.observe("b", [0.0], [0.0])
    assert over.targets()["a"] == pytest.approx(0.001 / 1.001, abs=1e-12)


def test_config_refuses_a_floor_that_starves_the_rest_and_non_positive_weights():
    with pytest.raises(ValueError, match="floor"):
        DomainMixer(MixingConfig(mode="advantage", floor=0.5), {"a": 1.0, "b": 1.0})
    with pytest.raises(ValidationError, match="weights must be > 0"):
        MixingConfig(weights={"a": 0.0})
    with pytest.raises(ValidationError, match="extra"):
        MixingConfig(mod="static")  # a typo is an error


def test_deficit_sampler_is_smooth_weighted_round_robin():
    s = DeficitSampler({"a": 0.5, "b": 0.25, "c": 0.25})
    seq = []
    for _ in range(8):
        d = s.next_domain()
        s.drawn(d)
        s.trained(d)
        seq.append(d)
    # totals 1..8: deficits (target x total - have) pick a; tie b/c -> b; c; a; then again
    assert seq == ["a", "b", "c", "a", "a", "b", "c", "a"]


def test_a_dropped_group_is_drawn_again():
    s = DeficitSampler({"a": 0.5, "b": 0.5})
    s.drawn("a")
    s.drawn("b")
    s.trained("b")
    s.settled("a")  # a's group went stale: a is behind now
    assert s.next_domain() == "a"


def draw_and_train(s: DeficitSampler, n: int) -> str:
    seq = ""
    for _ in range(n):
        d = s.next_domain()
        s.drawn(d)
        s.trained(d)
        seq += d
    return seq


def test_a_changed_target_holds_from_the_change_on():
    """An up-weight of a from 1/4 to 2/5 after 120 groups: the draws after it follow 2:1:1:1 at
    once - judged against the whole run's counts, a would be drawn alone for 31 draws (until
    0.4 x (121 + n) - 30 - n falls to the others' 0.2 x (121 + n) - 30)."""
    s = DeficitSampler({"a": 1, "b": 1, "c": 1, "d": 1})
    assert draw_and_train(s, 120) == "abcd" * 30
    s.set_targets({"a": 2, "b": 1, "c": 1, "d": 1})
    assert draw_and_train(s, 10) == "abcdaabcda"  # 4 a, 2 each of the rest in every 10
    assert Counter(draw_and_train(s, 50)) == {"a": 20, "b": 10, "c": 10, "d": 10}
    assert sum(s.offset.values()) == pytest.approx(0.0)
    s.set_targets({"a": 1, "b": 1, "c": 1, "d": 1})  # back to 1:1:1:1: a is not left out to pay back
    assert Counter(draw_and_train(s, 8)) == {"a": 2, "b": 2, "c": 2, "d": 2}
    assert s.shares()["a"] == pytest.approx((30 + 24 + 2) / 188)  # shares are the real counts


def test_a_target_change_keeps_the_lag_of_a_slow_domain():
    """b's groups were dropped (stale), so b lags by 2 when the target changes: the lag is kept
    and b is drawn first, then the new 1:3 ratio."""
    s = DeficitSampler({"a": 1, "b": 1})
    draw_and_train(s, 20)
    s.drawn("b")
    s.settled("b")
    s.drawn("b")
    s.settled("b")
    s.drawn("a")
    s.trained("a")
    s.drawn("a")
    s.trained("a")  # a 12, b 10
    s.set_targets({"a": 1, "b": 3})
    seq = draw_and_train(s, 10)
    assert seq[:2] == "bb"
    assert Counter(seq) == {"a": 2, "b": 8}  # 3/4 of 10 is 7.5; with the lag of 1.5 kept, 8 (lags after: a 0, b 1)
    with pytest.raises(ValueError, match="domains"):
        s.set_targets({"a": 1, "c": 1})


def test_horizon_forgets_old_counts_so_a_new_target_is_reached():
    s = DeficitSampler({"a": 1.0, "b": 0.0001}, horizon=10)
    for _ in range(200):
        d = s.next_domain()
        s.drawn(d)
        s.trained(d)
    s.set_targets({"a": 0.5, "b": 0.5})
    drawn = Counter()
    for _ in range(40):
        d = s.next_domain()
        s.drawn(d)
        s.trained(d)
        drawn[d] += 1
    assert s.shares()["b"] == pytest.approx(0.5, abs=0.1)  # within 40 groups (4 half-lives)


def simulate(choose: Callable[[], str], sampler: DeficitSampler | None, steps: int, means: dict[str, float],
             prompts: int = 4, staleness: int = 2, seed: int = 0) -> Counter[str]:
    """The orchestrator's admission and staleness rules with episodes of random duration.

    (staleness + 1) x prompts groups in flight; a group of domain d takes Exp(mean d) time; the
    trainer takes ready groups first-finished-first, drops one generated more than
    ``staleness`` versions ago, and each update takes one time unit. Returns trained groups per
    domain.
    """
    rng = random.Random(seed)
    t, version, serial, in_flight = 0.0, 0, 0, 0
    running: list[tuple[float, int, str, int]] = []  # (finish time, serial, domain, version at draw)
    ready: deque[tuple[float, int, str, int]] = deque()
    trained: Counter[str] = Counter()

    def fill() -> None:
        nonlocal serial, in_flight
        while in_flight < (staleness + 1) * prompts:
            d = choose()
            if sampler:
                sampler.drawn(d)
            heapq.heappush(running, (t + rng.expovariate(1 / means[d]), serial, d, version))
            serial, in_flight = serial + 1, in_flight + 1

    for _ in range(steps):
        batch: list[tuple[float, int, str, int]] = []
        fill()
        while len(batch) < prompts:
            if not ready:
                g = heapq.heappop(running)
                t = max(t, g[0])
                ready.append(g)
                continue
            g = ready.popleft()
            if version - g[3] > staleness:  # dropped as stale: leaves the account
                in_flight -= 1
                if sampler:
                    sampler.settled(g[2])
                fill()
                continue
            batch.append(g)
        t, version = t + 1.0, version + 1
        for g in batch:
            trained[g[2]] += 1
            in_flight -= 1
            if sampler:
                sampler.trained(g[2])
    return trained


def test_trained_ratio_holds_when_one_domain_is_ten_times_slower():
    """Domain a's episodes take 10x longer. A weighted coin (the orchestrator's draw) holds the
    ratio of draws, but a's groups go stale more often, so a is under-trained (0.36 of trained
    groups for a target of 0.5). The deficit sampler redraws what was dropped: over 2,000 trained
    groups the trained share is within 0.01 of the target; and within 0.02 for a 0.6/0.3/0.1
    mix of three speeds."""
    means = {"a": 10.0, "b": 1.0}
    coin = random.Random(1)
    plain = simulate(lambda: coin.choices(["a", "b"])[0], None, 500, means)
    assert plain["a"] / plain.total() < 0.42  # the problem exists in the simulation

    s = DeficitSampler({"a": 0.5, "b": 0.5})
    balanced = simulate(s.next_domain, s, 500, means)
    assert balanced.total() == 2000
    assert balanced["a"] / balanced.total() == pytest.approx(0.5, abs=0.01)

    targets = {"a": 0.6, "b": 0.3, "c": 0.1}
    s3 = DeficitSampler(targets)
    three = simulate(s3.next_domain, s3, 500, {"a": 10.0, "b": 3.0, "c": 1.0}, seed=3)
    for d, share in targets.items():
        assert three[d] / three.total() == pytest.approx(share, abs=0.02)


def test_sampler_and_mixer_state_round_trip_through_json():
    s = DeficitSampler({"a": 0.7, "b": 0.3}, horizon=50)
    for _ in range(7):
        d = s.next_domain()
        s.drawn(d)
    s.trained("a")
    s.settled("b")
    s.set_targets({"a": 0.2, "b": 0.8})  # offsets now
    copy = DeficitSampler({"a": 1.0, "b": 1.0}, horizon=50)
    copy.load(json.loads(json.dumps(s.state())))
    assert copy.state() == s.state()
    assert [copy.next_domain() for _ in range(3)] == [s.next_domain() for _ in range(3)]

    mixer = DomainMixer(MixingConfig(mode="advantage"), {"a": 1.0, "b": 1.0})
    mixer.observe("a", [1.0, 0.0], [0.5, -0.5])
    other = DomainMixer(MixingConfig(mode="advantage"), {"a": 1.0, "b": 1.0})
    other.load(json.loads(json.dumps(mixer.state())))
    assert other.targets() == mixer.targets()
    assert set(s.metrics()) == {"a/mix_target", "a/mix_trained", "b/mix_target", "b/mix_trained"}
