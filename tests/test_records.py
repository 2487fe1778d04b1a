"""Records validate on construction, and an episode's training sequence is built from its turns."""

from __future__ import annotations

import math

import pytest
from pydantic import ValidationError

from practicum.records import Episode, Score, Turn


@pytest.mark.parametrize("value", [-0.01, 1.01, 2.0, math.nan, math.inf])
def test_score_rejects_values_outside_unit_interval(value):
    """A verifier cannot emit a score outside [0, 1] (or NaN): the record refuses it."""
    with pytest.raises(ValidationError, match="score value must lie in"):
        Score(value=value)


@pytest.mark.parametrize("value", [0.0, 0.25, 1.0])
def test_score_accepts_the_unit_interval(value):
    """The ends of [0, 1] and values inside are valid scores."""
    assert Score(value=value).value == value


def _turn(prompt: list[int], completion: list[int], logprobs: list[float]) -> Turn:
    return Turn(prompt_ids=prompt, completion_ids=completion, logprobs=logprobs, text="",
                finish_reason="stop", policy_version=3)


def test_training_sequence_over_two_turns():
    """Turn 2's context = turn 1's context + completion + an observation. The sequence is the
    last context + its completion; only generated tokens have mask 1 and their log-probs."""
    ep = Episode(task_id="t", domain="d", turns=[
        _turn([1, 2, 3], [4, 5], [-0.1, -0.2]),
        _turn([1, 2, 3, 4, 5, 6, 7], [8, 9], [-0.3, -0.4]),  # 6, 7: the environment's reply
    ])
    ids, mask, logps = ep.training_sequence()
    assert ids == [1, 2, 3, 4, 5, 6, 7, 8, 9]
    assert mask == [0, 0, 0, 1, 1, 0, 0, 1, 1]
    assert logps == [0.0, 0.0, 0.0, -0.1, -0.2, 0.0, 0.0, -0.3, -0.4]
    assert ep.policy_version == 3


def test_training_sequence_of_a_single_turn_and_of_none():
    """One turn: prompt (mask 0) then completion (mask 1). No turns: empty lists."""
    ep = Episode(task_id="t", domain="d", turns=[_turn([5, 6], [7], [-0.5])])
    assert ep.training_sequence() == ([5, 6, 7], [0, 0, 1], [0.0, 0.0, -0.5])
    assert Episode(task_id="t", domain="d").training_sequence() == ([], [], [])


@pytest.mark.parametrize(
    "second_prompt",
    [
        [1, 2, 9, 4, 5, 6],  # rewrites a prompt token
        [1, 2, 3, 4, 6],  # rewrites a generated token
        [1, 2, 3, 4],  # drops part of the previous completion
    ],
)
def test_training_sequence_rejects_a_turn_that_does_not_extend_the_last(second_prompt):
    """If the environment rewrote the context, the ids no longer match what was sampled: error."""
    ep = Episode(task_id="t", domain="d", turns=[
        _turn([1, 2, 3], [4, 5], [-0.1, -0.2]),
        _turn(second_prompt, [8], [-0.3]),
    ])
    with pytest.raises(ValueError, match="does not extend"):
        ep.training_sequence()
