"""Experience replay: who enters, priorities by |advantage| and recency, eviction, the share
mixed back, weighted draws, and the age weight built on algorithms.behaviour_weights."""

from __future__ import annotations

import json
import math
import random

import pytest
import torch

from practicum.curriculum.replay import ReplayBuffer, ReplayConfig, age_weights, check_correction


def buffer(**kw) -> ReplayBuffer:
    return ReplayBuffer(ReplayConfig(enabled=True, **kw))


def test_only_high_signal_groups_enter():
    b = buffer(min_signal=0.1)
    assert b.add("g1", "math", [1.0, -1.0, 1.0, -1.0], step=0, version=0)  # mean |A| 1
    assert not b.add("g2", "math", [0.05, -0.05], step=0, version=0)  # 0.05 < 0.1
    assert not b.add("g3", "math", [0.0, 0.0], step=0, version=0)  # a uniform group
    assert not b.add("g1", "math", [1.0, -1.0], step=1, version=1)  # already in
    assert list(b.entries) == ["g1"]


def test_priority_halves_every_half_life_and_the_lowest_is_evicted():
    b = buffer(capacity=2, half_life=10.0, min_signal=0.0)
    b.add("g1", "a", [1.0, -1.0], step=0, version=0)  # signal 1.0
    b.add("g2", "a", [0.5, -0.5], step=0, version=0)  # signal 0.5
    assert b.priority(b.entries["g1"], step=10) == pytest.approx(0.5)
    assert b.priority(b.entries["g1"], step=20) == pytest.approx(0.25)
    # at step 10: g1 0.5, g2 0.25, g3 0.8 -> g2 goes
    assert b.add("g3", "b", [0.8, -0.8], step=10, version=10)
    assert set(b.entries) == {"g1", "g3"}
    # a newcomer lower than everything is itself the one evicted
    assert not b.add("g4", "b", [0.1, -0.1], step=10, version=10)


def test_split_takes_the_share_as_far_as_the_buffer_holds():
    b = buffer(share=0.25, min_signal=0.0, max_age=8)
    assert b.split(8, version=0) == (8, 0)  # empty buffer: all fresh
    b.add("g1", "a", [1.0, -1.0], step=0, version=0)
    assert b.split(8, version=0) == (7, 1)  # round(0.25 x 8) = 2, one available
    b.add("g2", "a", [1.0, -1.0], step=0, version=5)
    assert b.split(8, version=5) == (6, 2)
    assert b.split(8, version=9) == (7, 1)  # g1 is 9 versions old > max_age 8: pruned
    assert list(b.entries) == ["g2"]


def test_draws_are_proportional_to_priority_and_uses_are_bounded():
    b = buffer(min_signal=0.0, max_uses=1, half_life=1e9)
    counts = {"hi": 0, "lo": 0}
    for seed in range(4000):
        b.entries.clear()
        b.add("hi", "a", [3.0, -3.0], step=0, version=0)  # priority 3
        b.add("lo", "a", [1.0, -1.0], step=0, version=0)  # priority 1
        (pick,) = b.sample(1, step=0, version=0, rng=random.Random(seed))
        counts[pick.group_id] += 1
    assert counts["hi"] / 4000 == pytest.approx(0.75, abs=0.03)  # 3 / (3 + 1)

    b.entries.clear()
    b.add("g", "a", [1.0, -1.0], step=0, version=0)
    (pick,) = b.sample(2, step=4, version=3, rng=random.Random(0))
    assert (pick.group_id, pick.age, pick.domain) == ("g", 3, "a")
    assert b.sample(1, step=5, version=3, rng=random.Random(0)) == []  # used max_uses times


def test_age_weight_is_the_capped_geometric_mean_of_the_token_weights():
    log = math.log
    # sequence 0: token weights pi_prox / pi_b = 0.5 / 0.25 = 2 and 0.25 / 0.5 = 0.5 -> sqrt(2 x 0.5) = 1;
    #             its third token is outside the mask (weight 100, ignored)
    # sequence 1: both tokens 4 -> 4, capped at 2
    # sequence 2: no trained token -> 1
    prox = torch.tensor([[log(0.5), log(0.25), log(1.0)], [log(0.4), log(0.4), 0.0], [0.0, 0.0, 0.0]])
    beh = torch.tensor([[log(0.25), log(0.5), log(0.01)], [log(0.1), log(0.1), 0.0], [0.0, 0.0, 0.0]])
    mask = torch.tensor([[1, 1, 0], [1, 1, 0], [0, 0, 0]])
    w = age_weights(prox, beh, mask, cap=2.0)  # [3]
    torch.testing.assert_close(w, torch.tensor([1.0, 2.0, 1.0]))
    assert age_weights(prox[1:2], beh[1:2], mask[1:2], cap=10.0).item() == pytest.approx(4.0)


def test_replay_is_refused_without_an_off_policy_correction():
    with pytest.raises(ValueError, match="off_policy"):
        check_correction("none")
    check_correction("tis")


def test_replay_state_round_trips_and_draws_the_same():
    b = buffer(min_signal=0.0)
    for i, s in enumerate([0.3, 0.9, 0.5]):
        b.add(f"g{i}", "a", [s, -s], step=i, version=i)
    b.sample(1, step=3, version=3, rng=random.Random(7))
    copy = buffer(min_signal=0.0)
    copy.load(json.loads(json.dumps(b.state())))
    assert copy.state() == b.state()
    assert copy.sample(2, 4, 4, random.Random(1)) == b.sample(2, 4, 4, random.Random(1))
