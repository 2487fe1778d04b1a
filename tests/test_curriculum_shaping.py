"""Reward shaping: each component by hand, their weighted sum, and per-domain normalisation."""

from __future__ import annotations

import json
import math

import pytest
from pydantic import ValidationError

from practicum.curriculum.shaping import (
    Attempt,
    RewardNorm,
    ShapingConfig,
    attempt_of,
    length_rewards,
    overlong_penalty,
    shape_group,
)
from practicum.records import Episode, Score, Turn


@pytest.mark.parametrize(("tokens", "penalty"), [(0, 0.0), (80, 0.0), (90, -0.5), (95, -0.75), (100, -1.0), (130, -1.0)])
def test_dapo_soft_overlong_penalty(tokens, penalty):
    # max 100, buffer 20: free up to 80, then (80 - tokens) / 20, -1 past the limit
    assert overlong_penalty(tokens, max_tokens=100, buffer=20) == pytest.approx(penalty)


def test_kimi_length_reward_pays_short_right_answers_and_never_short_wrong_ones():
    # lengths 10, 20, 30: lambda = 0.5 - (len - 10) / 20 = 0.5, 0, -0.5
    assert length_rewards([10, 20, 30], [True, False, True]) == [0.5, 0.0, -0.5]
    assert length_rewards([10, 30], [False, False]) == [0.0, -0.5]  # min(0, 0.5) for a short wrong one
    assert length_rewards([7, 7], [True, False]) == [0.0, 0.0]  # no spread, no signal


def test_components_and_weighted_sum():
    cfg = ShapingConfig(correctness=1.0, format=0.2, overlong=0.5, overlong_buffer=20, length=0.1, partial=0.3)
    right = Attempt(reply="so <answer>4</answer>", tokens=10, score=Score(value=1.0, components={"partial": 1.0}))
    wrong = Attempt(reply="4", tokens=90, score=Score(value=0.0, components={"partial": 0.5}))
    a, b = shape_group([right, wrong], cfg, max_tokens=100)
    assert a.components == {"correctness": 1.0, "format": 1.0, "overlong": 0.0, "length": 0.5, "partial": 1.0}
    assert a.total == pytest.approx(1.0 + 0.2 + 0.0 + 0.1 * 0.5 + 0.3)  # 1.55
    assert b.components == {"correctness": 0.0, "format": 0.0, "overlong": -0.5, "length": -0.5, "partial": 0.5}
    assert b.total == pytest.approx(0.5 * -0.5 + 0.1 * -0.5 + 0.3 * 0.5)  # -0.15


def test_default_shaping_is_the_score_value():
    att = Attempt(reply="<answer>1</answer>", tokens=500, score=Score(value=0.7))
    (r,) = shape_group([att], ShapingConfig(), max_tokens=64)
    assert r.total == 0.7


def test_a_bad_format_pattern_is_a_config_error():
    with pytest.raises(ValidationError, match="format_pattern"):
        ShapingConfig(format_pattern="(unclosed")


def test_attempt_of_an_episode_joins_its_turns():
    ep = Episode(task_id="t", domain="d", score=Score(value=1.0), turns=[
        Turn(prompt_ids=[1], completion_ids=[2, 3], logprobs=[0.0, 0.0], text="a", finish_reason="stop", policy_version=0),
        Turn(prompt_ids=[1, 2, 3, 4], completion_ids=[5], logprobs=[0.0], text="b", finish_reason="stop", policy_version=0),
    ])
    assert attempt_of(ep) == Attempt(reply="a\nb", tokens=3, score=Score(value=1.0))
    assert attempt_of(Episode(task_id="t", domain="d")).score.value == 0.0


def test_reward_norm_per_domain():
    norm = RewardNorm()
    norm.update("a", [1.0, 2.0, 3.0, 4.0])  # mean 2.5, population std sqrt(1.25)
    norm.update("b", [100.0, 300.0])  # mean 200, std 100: another scale, kept apart
    assert norm.apply("a", [4.0])[0] == pytest.approx(1.5 / math.sqrt(1.25))  # 1.341641
    assert norm.apply("b", [300.0]) == [1.0]
    norm.update("c", [2.0, 2.0])
    assert norm.apply("c", [3.0]) == [1.0]  # std 0: only centred
    norm.update("a", [5.0])  # Welford: the same as all five at once
    assert norm.std("a") == pytest.approx(math.sqrt(2.0))
    copy = RewardNorm()
    copy.load(json.loads(json.dumps(norm.state())))
    assert copy.apply("a", [5.0]) == norm.apply("a", [5.0])
