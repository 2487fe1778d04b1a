"""The fading scaffold: schedules by hand, what a scaffolded prompt looks like, removal at the
threshold of success without help, and evaluation tasks left alone."""

from __future__ import annotations

import json
import random

import pytest
from pydantic import ValidationError

from practicum.curriculum.scaffold import Scaffold, ScaffoldChange, ScaffoldConfig, ScaffoldExample, is_scaffolded
from practicum.records import Message, Score, Task

HELP = {"examples": [ScaffoldExample(question="What is 2*3?", reply="<answer>6</answer>")],
        "hint": "Reply as <answer>N</answer>.", "prefix": "<answer>"}


def task() -> Task:
    return Task(id="p1", domain="products", target=42, prompt=[
        Message(role="system", content="You multiply."), Message(role="user", content="What is 6*7?")])


@pytest.mark.parametrize(("step", "level"), [(0, 1.0), (10, 1.0), (30, 0.5), (40, 0.25), (50, 0.0), (90, 0.0)])
def test_linear_schedule(step, level):
    s = Scaffold("products", ScaffoldConfig(**HELP, schedule="linear", fade_start=10, fade_end=50))
    assert s.level(step) == pytest.approx(level)


@pytest.mark.parametrize(("step", "level"), [(10, 1.0), (19, 1.0), (20, 0.75), (35, 0.5), (49, 0.25), (50, 0.0)])
def test_step_schedule_drops_in_equal_stages(step, level):
    # 4 stages over steps 10..50: a drop of 0.25 every 10 steps
    s = Scaffold("products", ScaffoldConfig(**HELP, schedule="step", fade_start=10, fade_end=50, stages=4))
    assert s.level(step) == level


def test_probe_share_keeps_some_groups_unscaffolded():
    s = Scaffold("products", ScaffoldConfig(**HELP, schedule="constant", probe_share=0.1))
    rng = random.Random(0)
    share = sum(s.decide(0, rng) for _ in range(4000)) / 4000
    assert share == pytest.approx(0.9, abs=0.02)
    late = Scaffold("products", ScaffoldConfig(**HELP, fade_end=10))
    assert not any(late.decide(10, rng) for _ in range(100))


def test_apply_puts_examples_after_the_system_prompt_and_the_hint_on_the_question():
    s = Scaffold("products", ScaffoldConfig(**HELP))
    original = task()
    out = s.apply(original)
    assert [(m.role, m.content) for m in out.task.prompt] == [
        ("system", "You multiply."),
        ("user", "What is 2*3?"), ("assistant", "<answer>6</answer>"),
        ("user", "What is 6*7?\n\nReply as <answer>N</answer>."),
    ]
    assert out.prefix == "<answer>"
    assert is_scaffolded(out.task) and not is_scaffolded(original)  # evaluation can refuse a scaffolded task
    assert original == task()  # unchanged
    assert (out.task.id, out.task.target) == ("p1", 42)


def test_a_prompt_without_a_user_message_is_a_clear_error():
    bad = Task(id="odd", domain="products", prompt=[Message(role="system", content="x")])
    with pytest.raises(ValueError, match="'odd'.*no user message"):
        Scaffold("products", ScaffoldConfig(hint="h")).apply(bad)


def test_removed_for_good_once_success_without_help_passes_the_threshold():
    s = Scaffold("products", ScaffoldConfig(**HELP, schedule="constant", threshold=0.5, window=4))
    assert s.observe(True, [1.0, 1.0, 1.0, 1.0], step=1) is None  # helped: says nothing of unaided success
    assert s.observe(False, [0.0, 0.0], step=2) is None  # 2 of 4 in the window
    assert s.observe(False, [0.0, 1.0], step=3) is None  # 0.25 < 0.5
    change = s.observe(False, [1.0, 1.0], step=4)  # last 4: 0, 1, 1, 1 -> 0.75
    assert change == ScaffoldChange(domain="products", step=4, success=0.75)
    assert s.level(5) == 0.0 and s.removed_at == 4
    assert s.observe(False, [0.0] * 4, step=6) is None  # stays removed


def test_success_can_be_one_component_of_the_score():
    """`success: strict` counts a right answer only in the requested format: the math verifier's
    0.3 for a right value without tags (the whole of a policy that dropped the format) is no
    success, though its score's value reaches a threshold of 0.3."""
    untagged = Score(value=0.3, components={"strict": 0.0, "lenient": 1.0, "format": 0.0})
    tagged = Score(value=1.0, components={"strict": 1.0, "lenient": 1.0, "format": 1.0})
    by_value = Scaffold("products", ScaffoldConfig(**HELP, schedule="constant", threshold=0.3, window=4))
    assert by_value.observe(False, [by_value.measure(untagged)] * 4, step=3) is not None  # removed at 0.3
    s = Scaffold("products", ScaffoldConfig(**HELP, schedule="constant", threshold=0.3, window=4, success="strict"))
    assert s.observe(False, [s.measure(untagged)] * 4, step=3) is None and s.level(4) == 1.0
    assert s.observe(False, [s.measure(tagged)], step=5) is None  # 1 of 4 right in tags: 0.25
    assert s.observe(False, [s.measure(tagged)], step=6) == ScaffoldChange(domain="products", step=6, success=0.5)
    assert s.measure(None) == 0.0 and s.lacking is None  # an episode with no score (it failed) is no success
    assert s.measure(Score(value=1.0, components={"correct": 1.0})) == 0.0 and s.lacking == ["correct"]


def test_config_validation():
    with pytest.raises(ValidationError, match="after fade_start"):
        ScaffoldConfig(**HELP, fade_start=20, fade_end=20)
    with pytest.raises(ValidationError, match="at least one of"):
        ScaffoldConfig()


def test_a_delay_moves_the_fade_later_by_the_discarded_steps():
    # a roll-back from step 30 to step 10 discards 20 steps: step 31 fades like step 11
    s = Scaffold("products", ScaffoldConfig(**HELP, schedule="linear", fade_start=10, fade_end=50))
    s.delay = 20
    assert [s.level(x) for x in (30, 31, 50, 70)] == pytest.approx([1.0, 1 - 1 / 40, 0.5, 0.0])
    copy = Scaffold("products", s.cfg)
    copy.load(json.loads(json.dumps(s.state())))
    assert copy.delay == 20 and copy.level(50) == pytest.approx(0.5)
    copy.load({"removed_at": None, "unaided": []})  # a checkpoint from before delays: none
    assert copy.delay == 0


def test_a_groups_clock_fades_by_the_domains_own_draws_not_the_runs_steps():
    # fade over this domain's groups 16..64: a domain drawn once a step alone at step 40 is still
    # at group 40 (level 0.5), whatever the run's step says; every draw counts, helped or not
    s = Scaffold("products", ScaffoldConfig(**HELP, clock="groups", fade_start=16, fade_end=64, probe_share=0.0))
    rng = random.Random(0)
    assert all(s.decide(1000, rng) for _ in range(16))  # step 1000, but only 16 groups: full help
    assert s.groups == 16 and s.level(1000) == 1.0
    for _ in range(24):
        s.decide(0, rng)
    assert s.groups == 40 and s.level(0) == pytest.approx(0.5) and s.level(10**6) == pytest.approx(0.5)
    s.delay = 30  # a steps-clock delay means nothing here
    assert s.level(0) == pytest.approx(0.5)
    copy = Scaffold("products", s.cfg)
    copy.load(json.loads(json.dumps(s.state())))
    assert copy.groups == 40 and copy.level(0) == pytest.approx(0.5)
    copy.load({"removed_at": None, "unaided": []})  # a checkpoint from before the groups clock: none drawn
    assert copy.groups == 0 and copy.level(0) == 1.0


def test_a_rolled_back_scaffold_waits_on_its_own_clock():
    steps = Scaffold("products", ScaffoldConfig(**HELP, fade_end=10))
    steps.rewound(4)
    assert steps.delay == 4
    groups = Scaffold("products", ScaffoldConfig(**HELP, clock="groups", fade_end=10))
    groups.groups = 7
    groups.rewound(4)  # the count was put back by the checkpoint's state; no delay on top
    assert (groups.delay, groups.groups) == (0, 7)


def test_scaffold_state_round_trips():
    cfg = ScaffoldConfig(**HELP, threshold=0.9, window=3)
    s = Scaffold("products", cfg)
    s.observe(False, [1.0, 0.0], step=1)
    copy = Scaffold("products", cfg)
    copy.load(json.loads(json.dumps(s.state())))
    assert copy.state() == s.state()
    s.removed_at = 7
    copy.load(json.loads(json.dumps(s.state())))
    assert copy.level(0) == 0.0
