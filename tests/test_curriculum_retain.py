"""curriculum.retain: a mastered group (every reply right, no GRPO signal) trains a reply with a
small positive advantage; anything else is left as GRPO made it."""

from __future__ import annotations

import asyncio
import json
from contextlib import closing

import pytest

from practicum.audit import audit
from practicum.config import load_config
from practicum.curriculum.parts import CurriculumConfig
from practicum.curriculum.retain import RetainConfig, retained_advantages, succeeded
from practicum.curriculum.scaffold import Scaffold, ScaffoldConfig, slot_task
from practicum.engines.base import SamplingParams
from practicum.engines.scripted import ScriptedEngine
from practicum.envs.base import Observation
from practicum.envs.toy import ToyDomain, ToyEnv
from practicum.loop import Run, build_samples, group_advantages, train_async
from practicum.records import Group, GroupState, Message, Score, Task
from practicum.rollout import run_episode
from practicum.store import Store

ON = RetainConfig(enabled=True)
SEVEN = Task(id="alpha/train/0", domain="alpha", prompt=[Message(role="user", content="say seven")], target="seven")


def group(replies: list[str], task: Task = SEVEN) -> Group:
    """One group of ``task`` whose episodes reply ``replies`` (the toy env scores the share of
    words that are the target: "seven" 1.0, "seven three" 0.5, "three" 0.0)."""
    it = iter(replies)
    engine = ScriptedEngine(lambda _p, _c: next(it))
    eps = [asyncio.run(run_episode(slot_task(task, i, len(replies)), ToyEnv(task.domain), engine,
                                   SamplingParams(max_new_tokens=16)))
           for i in range(len(replies))]
    return Group(task=task, episodes=eps, state=GroupState.ready)


def grpo(g: Group) -> list[float]:
    return group_advantages([g], "grpo")[g.id]


def test_a_mastered_group_trains_its_first_replies_with_the_advantage():
    g = group(["seven"] * 4)
    assert grpo(g) == [0.0] * 4  # all alike: GRPO gives it nothing
    assert retained_advantages(g, grpo(g), ON) == [0.1, 0.0, 0.0, 0.0]
    two = RetainConfig(enabled=True, advantage=0.25, samples=2)
    assert retained_advantages(g, grpo(g), two) == [0.25, 0.25, 0.0, 0.0]
    assert retained_advantages(g, grpo(g), RetainConfig(enabled=True, samples=9)) == [0.1] * 4


def test_groups_that_are_not_mastered_are_left_alone():
    wrong = group(["three"] * 4)  # all alike, all wrong
    assert grpo(wrong) == [0.0] * 4 and retained_advantages(wrong, grpo(wrong), ON) is None
    half = group(["seven three"] * 4)  # all alike at 0.5: not right under threshold 1
    assert retained_advantages(half, grpo(half), ON) is None
    assert retained_advantages(half, grpo(half), RetainConfig(enabled=True, threshold=0.5)) == [0.1, 0, 0, 0]
    mixed = group(["seven", "seven", "seven", "three"])  # a signal: GRPO trains it as it is
    assert retained_advantages(mixed, grpo(mixed), ON) is None
    right = group(["seven"] * 4)
    assert retained_advantages(right, grpo(right), RetainConfig()) is None  # off by default
    assert retained_advantages(right, grpo(right), RetainConfig(enabled=True, domains=["beta"])) is None
    assert retained_advantages(right, grpo(right), RetainConfig(enabled=True, domains=["alpha"])) == [0.1, 0, 0, 0]
    assert retained_advantages(right, [0.0] * 3, ON) is None  # advantages that are not this group's


def test_help_that_made_every_reply_right_is_not_mastery():
    """A scaffold's helped episodes (here a hint on every slot) are not the policy's own success."""
    helped = Scaffold("alpha", ScaffoldConfig(hint="one word", guided=True, share=1.0)).apply(SEVEN).task
    g = group(["seven"] * 4, helped)
    assert grpo(g) == [0.0] * 4 and retained_advantages(g, grpo(g), ON) is None


def test_success_reads_the_named_component():
    """The toy env's `exact` component is 1 only when the reply is the target alone."""
    cfg = RetainConfig(enabled=True, success="exact")
    assert succeeded(Score(value=1.0, components={"exact": 1.0}), cfg)
    assert not succeeded(Score(value=1.0, components={"exact": 0.0}), cfg)
    assert not succeeded(Score(value=1.0, components={}), cfg)  # a missing component counts 0
    assert not succeeded(None, cfg)
    assert succeeded(Score(value=1.0), ON) and not succeeded(Score(value=0.99), ON)


def test_build_samples_trains_the_override_and_counts_the_group_as_uniform():
    right, mixed = group(["seven"] * 3), group(["seven", "three", "three"])
    samples, uniform = build_samples([right, mixed], "grpo", overrides={right.id: [0.1, 0.0, 0.0]})
    assert [s.advantage for s in samples[:3]] == [0.1, 0.0, 0.0]
    assert [s.advantage for s in samples[3:]] == pytest.approx(grpo(mixed))
    assert uniform == 0.5  # the mastered group carried no GRPO signal


def test_an_unknown_domain_in_retain_is_a_config_error():
    with pytest.raises(ValueError, match="retain.domains: no domain named gamma"):
        CurriculumConfig(retain={"enabled": True, "domains": ["gamma"]}).check_domains(["alpha", "beta"])


def test_retain_with_the_filter_is_a_config_error():
    """The filter drops all-alike groups before the update: retain would silently do nothing."""
    with pytest.raises(ValueError, match="no mastered group would be left"):
        CurriculumConfig(retain={"enabled": True}, filter={"enabled": True})
    CurriculumConfig(retain={"enabled": True}, filter={"enabled": False})
    CurriculumConfig(retain={"enabled": False}, filter={"enabled": True})


class AlwaysRight(ToyEnv):
    async def step(self, reply: str) -> Observation:
        return Observation(messages=[], done=True, score=Score(value=1.0, explanation="every reply is right"))


class Mastered(ToyDomain):
    """A domain the policy has mastered: every reply scores 1."""

    def make_env(self) -> AlwaysRight:
        return AlwaysRight(self.name)


@pytest.mark.parametrize("samples", [0, 1, 2])
def test_the_loop_trains_mastered_groups_only_with_retain(tiny_run_config, tiny_model_path, samples):
    """The tiny model on a domain where every reply is right: without retain every step has no
    signal and skips its update; with it, each group trains its first `samples` replies (the
    trainer counts them), the policy moves a version a step, and the step metrics count the groups."""
    raw = json.loads(tiny_run_config.path.read_text())
    raw["domains"][0]["name"] = "alpha"
    if samples:
        raw["curriculum"] = {"retain": {"enabled": True, "samples": samples}}
    path = tiny_run_config.path.with_name(f"retain{samples}.yaml")
    path.write_text(json.dumps(raw))
    cfg = load_config(path, [f"run.dir={path.parent / f'retain{samples}'}", "run.steps=2"])
    run = Run(cfg, domains=[Mastered("alpha", ("seven",), seed=3, eval_size=4)], log=lambda _m: None)
    res = asyncio.run(train_async(cfg, run=run, log=lambda _m: None))
    groups = cfg.rollout.prompts_per_step
    for m in res.history:
        assert m["uniform_groups"] == 1.0
        if samples:
            assert not m["skipped"] and m["samples_trained"] == groups * samples
            assert m["retained_groups"] == groups and m["alpha/retained"] == groups
        else:
            assert m["skipped"] and "retained_groups" not in m
    assert run.trainer.version == (2 if samples else 0)
    with closing(Store(cfg.run.dir + "/store.sqlite")) as store:
        assert audit(store).ok


@pytest.mark.parametrize("scale, signal", [(1.0, False), (2.0, True)], ids=["at-the-line", "above-it"])
def test_the_loop_the_trainer_and_retain_draw_no_signal_at_one_line(tiny_model_path, monkeypatch, scale, signal):
    """An advantage of at most ``algorithms.NO_SIGNAL`` is none for all three: the loop counts its group
    uniform, retain may train a mastered group's reply instead, and the trainer skips its samples.
    (They had 1e-9, 1e-9 and 1e-8: a group at 5e-9 was a signal to the loop and none to the trainer.)"""
    import practicum.loop as loop
    from practicum.algorithms import NO_SIGNAL
    from practicum.config import AlgorithmConfig, TrainerConfig
    from practicum.trainer import Sample, Trainer

    g = group(["seven"] * 3)
    tiny = [scale * NO_SIGNAL, -scale * NO_SIGNAL, 0.0]
    monkeypatch.setattr(loop, "group_advantages", lambda groups, kind, rewards=None: {x.id: tiny for x in groups})
    _, uniform = build_samples([g], "grpo")
    assert uniform == (0.0 if signal else 1.0)
    assert (retained_advantages(g, tiny, ON) is None) == signal
    trainer = Trainer(tiny_model_path, TrainerConfig(autocast_dtype="none"), AlgorithmConfig())
    samples = [Sample([1, 4, 7, 20, 2, 1, 5, 20, 20], [0] * 7 + [1, 1], [0.0] * 7 + [-3.5, -3.5], a) for a in tiny]
    assert trainer.update(samples)["samples_trained"] == (2.0 if signal else 0.0)
