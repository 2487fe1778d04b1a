"""Difficulty sequencing: filter decisions, refill budget, pass rates, pools, level curriculum."""

from __future__ import annotations

import json
import random

import pytest
from pydantic import ValidationError

from practicum.curriculum.difficulty import (
    DifficultyPools,
    FilterConfig,
    LevelChange,
    LevelCurriculum,
    LevelsConfig,
    PassRates,
    PoolsConfig,
    RevisitConfig,
    Revisits,
    band_pass,
    refill,
    task_key,
)
from practicum.curriculum.scaffold import slot_task, unaided_messages
from practicum.records import Message, Task


@pytest.mark.parametrize(("rewards", "cfg", "keep", "reason"), [
    ([1.0, 1.0, 1.0, 1.0], FilterConfig(), False, "uniform"),  # all right: advantage 0 everywhere
    ([0.0, 0.0, 0.0, 0.0], FilterConfig(), False, "uniform"),  # all wrong
    ([0.0, 0.0, 0.0, 1.0], FilterConfig(), True, "kept"),  # mean 0.25
    ([0.0, 0.0, 0.0, 1.0], FilterConfig(min_pass=0.25), False, "too hard"),  # 0.25 is not above 0.25
    ([1.0, 1.0, 1.0, 0.0], FilterConfig(max_pass=0.75), False, "too easy"),  # 0.75 is not below 0.75
    ([0.5, 0.5, 0.5, 0.6], FilterConfig(max_pass=0.75), True, "kept"),  # partial credit, mean 0.525
    ([], FilterConfig(), False, "empty"),
])
def test_band_pass_decisions(rewards, cfg, keep, reason):
    d = band_pass(rewards, cfg)
    assert (d.keep, d.reason) == (keep, reason)


def test_band_pass_reports_the_mean():
    assert band_pass([0.0, 1.0, 1.0, 1.0], FilterConfig()).mean == 0.75


def test_refill_draws_the_shortfall_within_the_budget():
    cfg = FilterConfig(max_draw_factor=3.0)  # 8 wanted -> at most 24 draws a step
    assert refill(8, kept=5, drawn=8, cfg=cfg).model_dump() == {"draw": 3, "stop": False}
    assert refill(8, kept=5, drawn=22, cfg=cfg).model_dump() == {"draw": 2, "stop": False}  # 2 left in the budget
    assert refill(8, kept=5, drawn=24, cfg=cfg).model_dump() == {"draw": 0, "stop": True}  # train on the 5
    assert refill(8, kept=8, drawn=9, cfg=cfg).model_dump() == {"draw": 0, "stop": True}


def test_filter_config_refuses_an_empty_band():
    with pytest.raises(ValidationError, match="below max_pass"):
        FilterConfig(min_pass=0.6, max_pass=0.5)


def test_pass_rates_with_forgetting():
    rates = PassRates(decay=0.5)
    rates.observe("t", [1.0, 0.0])  # (2 attempts, 1.0)
    rates.observe("t", [1.0, 1.0, 1.0, 1.0])  # (2 x 0.5 + 4, 1 x 0.5 + 4) = (5, 4.5)
    assert rates.attempts("t") == 5.0
    assert rates.rate("t") == pytest.approx(0.9)
    assert rates.rate("never seen") is None


def test_a_task_is_known_by_its_question_not_its_id():
    def task(id_: str, question: str, target: str = "24", domain: str = "products", **metadata) -> Task:
        return Task(id=id_, domain=domain, prompt=[Message(role="user", content=question)], target=target,
                    metadata=metadata)

    key = task_key(task("products/train/7", "6 * 4"))
    assert task_key(task("products/train/900113", "6 * 4", draw={"index": 900113})) == key  # another draw
    assert key.startswith("products:")
    assert task_key(task("products/train/7", "6 * 5")) != key
    assert task_key(task("products/train/7", "6 * 4", target="25")) != key
    assert task_key(task("products/train/7", "6 * 4", domain="math")) != key
    assert task_key(task("x", "worked examples, then 6 * 4", task_key=key)) == key  # a scaffolded draw, stamped


def test_pools_place_tasks_by_pass_rate_and_accept_by_pool():
    rates = PassRates()
    pools = DifficultyPools(PoolsConfig(min_attempts=4, accept={"easy": 0.1, "normal": 1.0, "hard": 0.3}), rates)
    rates.observe("easy", [1.0] * 4)
    rates.observe("hard", [0.0] * 4)
    rates.observe("middling", [1.0, 0.0, 1.0, 0.0])
    rates.observe("few", [1.0] * 3)  # 3 attempts < min_attempts: not placed yet
    assert [pools.pool(t) for t in ("easy", "hard", "middling", "few", "new")] == \
        ["easy", "hard", "normal", "normal", "normal"]
    rng = random.Random(0)
    accepted = {t: sum(pools.accept(t, rng) for _ in range(2000)) / 2000 for t in ("easy", "hard", "new")}
    assert accepted["easy"] == pytest.approx(0.1, abs=0.03)
    assert accepted["hard"] == pytest.approx(0.3, abs=0.03)
    assert accepted["new"] == 1.0


def test_level_curriculum_promotes_demotes_and_reviews():
    cur = LevelCurriculum("gym", LevelsConfig(levels=[{"n": 2}, {"n": 4}, {"n": 8}], promote=0.7, demote=0.1,
                                              window=4, review=0.5))
    for i, r in enumerate([[1.0, 1.0], [1.0, 0.0], [1.0, 1.0]]):
        assert cur.observe(0, r, step=i) is None  # window not full yet
    change = cur.observe(0, [0.0, 1.0], step=3)  # means 1, .5, 1, .5 -> 0.75 >= 0.7
    assert change == LevelChange(domain="gym", step=3, old=0, new=1, pass_rate=0.75)
    assert cur.params(cur.level) == {"n": 4}
    assert cur.observe(0, [1.0], step=4) is None  # a review group of level 0 does not move level 1
    changes = [cur.observe(1, [0.0, 0.0], step=5 + i) for i in range(4)]
    assert changes[:3] == [None, None, None]
    assert changes[3] is not None and (changes[3].old, changes[3].new, changes[3].pass_rate) == (1, 0, 0.0)

    top = LevelCurriculum("gym", LevelsConfig(levels=[{"n": 2}], window=1))
    assert top.observe(0, [1.0], step=0) is None  # nowhere to go

    cur.level = 2
    rng = random.Random(0)
    drawn = [cur.draw_level(rng) for _ in range(2000)]
    assert drawn.count(2) / 2000 == pytest.approx(0.5, abs=0.04)
    assert drawn.count(0) / 2000 == pytest.approx(0.25, abs=0.04)


def test_level_curriculum_needs_levels():
    with pytest.raises(ValueError, match="at least one level"):
        LevelCurriculum("gym", LevelsConfig())


def test_difficulty_state_round_trips_through_json():
    rates = PassRates(decay=0.9)
    rates.observe("t1", [1.0, 0.0])
    copy = PassRates()
    copy.load(json.loads(json.dumps(rates.state())))
    assert (copy.rate("t1"), copy.decay) == (0.5, 0.9)

    cfg = LevelsConfig(levels=[{"n": 2}, {"n": 4}], window=3)
    cur = LevelCurriculum("gym", cfg)
    cur.observe(0, [1.0, 0.0], step=0)
    again = LevelCurriculum("gym", cfg)
    again.load(json.loads(json.dumps(cur.state())))
    assert again.state() == cur.state()
    assert again.observe(0, [1.0], 1) == cur.observe(0, [1.0], 1)


# --- revisits ---------------------------------------------------------------------------------------
def task(i: int, domain: str = "eq", **meta) -> Task:
    return Task(id=f"{domain}/train/{i}", domain=domain, prompt=[Message(role="user", content=f"q{i}")], metadata=meta)


def test_a_failed_task_is_queued_until_its_visits_are_spent_and_the_oldest_goes_first():
    r = Revisits(RevisitConfig(enabled=True, share=1.0, visits=2, capacity=2))
    assert r.offer(task(1), [0.0, 0.0, 0.0, 0.0])  # every episode wrong: mean 0 <= below 0
    assert not r.offer(task(2), [0.0, 0.0, 0.0, 1.0])  # one right: mean 0.25 - it has signal, not a failure
    assert not r.offer(task(3), [])  # nothing trainable: nothing known
    assert r.offer(task(4), [0.0] * 4) and r.offer(task(5), [0.0] * 4)  # capacity 2: task 1, the oldest, is dropped
    assert r.waiting() == {"eq": 2}
    rng = random.Random(0)
    again = r.take("eq", rng)
    assert again.id == "eq/train/4" and again.metadata == {"revisit": 1}  # the oldest left, its first revisit
    assert r.take("other", rng) is None  # nothing queued for that domain
    assert r.offer(again, [0.0] * 4)  # failed again: 1 visit of 2 spent, queued again
    r.take("eq", rng)  # task 5
    second = r.take("eq", rng)
    assert second.id == "eq/train/4" and second.metadata == {"revisit": 2}
    assert not r.offer(second, [0.0] * 4)  # its 2 visits are spent
    assert r.issued == 3 and r.waiting() == {"eq": 0}


def test_only_the_named_domains_failed_tasks_come_back():
    r = Revisits(RevisitConfig(enabled=True, share=1.0, domains=["products"]))
    assert not r.offer(task(1, "eq"), [0.0] * 4)  # eq is not named: its failures are not queued
    assert r.offer(task(2, "products"), [0.0] * 4)
    assert r.waiting() == {"products": 1} and r.take("eq", random.Random(0)) is None


def test_a_task_back_with_a_hint_has_its_answer_in_reach_of_a_guided_share():
    """revisit.hint: the re-issued task's question ends with the hint, `{answer}` filled with its
    target, for the first hint_share of the group's slots (2 of 8 at 0.25); the other slots, and
    the context every episode is trained against, are the plain question; the pass rate stays the
    plain question's. A target that is not a plain value comes back without a hint."""
    r = Revisits(RevisitConfig(enabled=True, share=1.0, hint="The answer is {answer}.", hint_share=0.25))
    plain = Task(id="eq/train/4", domain="eq", prompt=[Message(role="system", content="be brief"),
                                                      Message(role="user", content="6 * 4 =")], target="24")
    assert r.offer(plain, [0.0] * 8)
    back = r.take("eq", random.Random(0))
    assert [m.content for m in back.prompt] == ["be brief", "6 * 4 =\n\nThe answer is 24."]
    assert back.metadata["revisit"] == 1 and back.metadata["scaffold"]["guided"] == 0.25
    assert task_key(back) == task_key(plain)  # the hint is not the question
    slots = [slot_task(back, i, 8) for i in range(8)]
    assert [s.prompt == plain.prompt for s in slots] == [False] * 2 + [True] * 6
    assert unaided_messages(back.prompt, back.metadata["scaffold"]) == plain.prompt  # what the helped two train against
    listed = Task(id="sql/train/1", domain="sql", prompt=[Message(role="user", content="q")], target={"rows": [1]})
    assert r.offer(listed, [0.0]) and r.take("sql", random.Random(0)).prompt == listed.prompt  # no plain answer to give
    assert Revisits(RevisitConfig(enabled=True, share=1.0)).hinted(plain) is plain  # no hint configured
    with pytest.raises(ValidationError):
        RevisitConfig(hint_share=0.0)
    with pytest.raises(ValidationError):
        RevisitConfig(hint="")  # an empty hint would mark episodes helped that saw no help


def test_revisits_take_their_share_of_draws_with_the_draws_generator_and_round_trip():
    cfg = RevisitConfig(enabled=True, share=0.4, below=0.2, visits=1, capacity=64)
    r = Revisits(cfg)
    assert r.offer(task(1, level=2), [0.0, 0.0, 0.0, 0.5])  # mean 0.125 <= below 0.2; its level metadata stays
    picks = [r.take("eq", random.Random(seed)) is not None for seed in range(3)]
    # random.Random(s).random() for s = 0, 1, 2: 0.844, 0.134, 0.956 -> only seed 1 is under 0.4
    assert picks == [False, True, False]
    assert r.offer(task(7), [0.0]) and r.offer(task(8), [0.0])
    state = json.loads(json.dumps(r.state()))  # plain JSON, for the checkpoint
    back = Revisits(cfg)
    back.load(state)
    assert back.issued == 1 and [t.id for t in back.queues["eq"]] == ["eq/train/7", "eq/train/8"]
    back.load({})  # a checkpoint from before revisits
    assert back.waiting() == {} and back.issued == 0
    off = Revisits(RevisitConfig())
    assert not off.offer(task(1), [0.0]) and off.take("eq", random.Random(1)) is None  # off by default
    with pytest.raises(ValidationError):
        RevisitConfig(share=1.5)
