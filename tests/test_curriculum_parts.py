"""The curriculum section as a whole: validation against the run's domains, and one state
dict for the checkpoint that puts every part back as it was."""

from __future__ import annotations

import json
import random

import pytest
from pydantic import ValidationError

from practicum.curriculum import Curriculum, CurriculumConfig


def config() -> CurriculumConfig:
    return CurriculumConfig.model_validate({
        "mixing": {"mode": "advantage", "horizon": 64},
        "filter": {"enabled": True, "min_pass": 0.0, "max_pass": 1.0},
        "pools": {"enabled": True, "decay": 0.9},
        "levels": {"gym": {"levels": [{"n": 2}, {"n": 4}], "window": 2}},
        "replay": {"enabled": True, "min_signal": 0.0},
        "shaping": {"math": {"format": 0.1, "normalise": True}},
        "scaffold": {"math": {"prefix": "<answer>", "threshold": 0.5, "window": 2}},
        "drift": {"enabled": True, "reaction": "upweight"},
    })


def test_an_empty_section_changes_nothing():
    cur = Curriculum(CurriculumConfig(), {"math": 1.0, "gym": 3.0})
    assert cur.sampler.targets == {"math": 0.25, "gym": 0.75}
    assert cur.shaping("math").correctness == 1.0 and not cur.cfg.replay.enabled and not cur.cfg.drift.enabled


def test_per_domain_entries_must_name_a_domain_of_the_run():
    with pytest.raises(ValueError, match="curriculum.scaffold: no domain named maths"):
        Curriculum(CurriculumConfig.model_validate({"scaffold": {"maths": {"hint": "h"}}}), {"math": 1.0})
    with pytest.raises(ValueError, match="curriculum.mixing.weights: no domain named x"):
        Curriculum(CurriculumConfig.model_validate({"mixing": {"weights": {"x": 1.0}}}), {"math": 1.0})
    with pytest.raises(ValueError, match="curriculum.revisit.domains: no domain named prods"):
        Curriculum(CurriculumConfig.model_validate({"revisit": {"domains": ["prods"]}}), {"math": 1.0})
    with pytest.raises(ValidationError, match="replay.capacityy"):
        CurriculumConfig.model_validate({"replay": {"capacityy": 3}})


def test_every_part_survives_a_checkpoint():
    cfg = config()
    cur = Curriculum(cfg, {"math": 1.0, "gym": 1.0})
    rng = random.Random(0)
    for step in range(1, 6):
        for d in ("math", "gym"):
            cur.sampler.drawn(d)
            cur.sampler.trained(d)
            rewards = [float(rng.random() < 0.5) for _ in range(4)]
            adv = [r - sum(rewards) / 4 for r in rewards]
            cur.mixer.observe(d, rewards, adv)
            cur.rates.observe(f"{d}-{step}", rewards)
            cur.replay.add(f"g{d}{step}", d, adv, step, step)
            cur.norm.update(d, rewards)
            cur.drift.record(step, d, {f"t{i}": float(rng.random() < 0.5) for i in range(20)})
        cur.levels["gym"].observe(cur.levels["gym"].level, [1.0, 1.0], step)
        cur.scaffolds["math"].observe(False, [0.0], step)
        cur.drift.check(step)
    saved = json.loads(json.dumps(cur.state()))  # what a checkpoint holds: plain JSON
    again = Curriculum(cfg, {"math": 1.0, "gym": 1.0})
    again.load(saved)
    assert again.state() == cur.state()
    assert again.mixer.targets() == cur.mixer.targets()
    assert again.sampler.next_domain() == cur.sampler.next_domain()
    assert again.replay.sample(2, 6, 6, random.Random(3)) == cur.replay.sample(2, 6, 6, random.Random(3))
    assert again.levels["gym"].level == cur.levels["gym"].level == 1


def test_a_rewind_puts_back_what_describes_the_policy_and_keeps_the_stream_and_the_guard():
    """The drift guard rolled the policy back to a checkpoint: pass rates, levels, the mixer's
    signal, reward statistics, replay buffer and scaffolds go back to that checkpoint's (the
    scaffold's fade runs the discarded steps later); the trained balance and the guard's
    history stay."""
    cfg = config()
    cur = Curriculum(cfg, {"math": 1.0, "gym": 1.0})
    cur.replay.add("early", "math", [1.0, -1.0], 2, 2)
    saved = json.loads(json.dumps(cur.state()))  # the checkpoint of step 2
    for step in (3, 4, 5):
        cur.sampler.drawn("math")
        cur.sampler.trained("math")
        cur.mixer.observe("math", [1.0, 1.0], [0.0, 0.0])
        cur.rates.observe(f"t{step}", [1.0, 1.0])
        cur.replay.add(f"late{step}", "math", [0.5, -0.5], step, step)
        cur.norm.update("math", [1.0, 1.0])
        cur.levels["gym"].observe(cur.levels["gym"].level, [1.0, 1.0], step)
        cur.scaffolds["math"].observe(False, [1.0, 1.0], step)  # window 2 at threshold 0.5: removed
        cur.drift.record(step, "math", {"a": 1.0})
    assert cur.scaffolds["math"].removed_at == 3 and cur.levels["gym"].level == 1
    trained, history = dict(cur.sampler.trained_counts), cur.drift.state()["history"]
    cur.rewind(saved, lost=3)  # at step 5, back to step 2
    assert cur.scaffolds["math"].removed_at is None and cur.scaffolds["math"].delay == 3
    assert cur.scaffolds["math"].level(6) == pytest.approx(0.97)  # fade 0 -> 100: step 6 now fades like step 3
    assert cur.levels["gym"].level == 0 and set(cur.replay.entries) == {"early"}
    for part in ("mixer", "rates", "norm", "replay"):
        assert cur.state()[part] == saved[part], part
    assert cur.sampler.trained_counts == trained and cur.sampler.trained_counts["math"] > 2.9  # 3, decayed
    assert cur.state()["drift"]["history"] == history


def test_a_rewind_puts_a_groups_clock_back_to_the_checkpoints_count():
    cur = Curriculum(CurriculumConfig.model_validate({
        "scaffold": {"math": {"prefix": "<answer>", "clock": "groups", "fade_start": 0, "fade_end": 10}}}), {"math": 1.0})
    rng = random.Random(0)
    for _ in range(2):
        cur.scaffolds["math"].decide(1, rng)
    saved = json.loads(json.dumps(cur.state()))  # the checkpoint: 2 groups drawn
    for _ in range(6):
        cur.scaffolds["math"].decide(2, rng)
    assert cur.scaffolds["math"].level(2) == pytest.approx(0.2)
    cur.rewind(saved, lost=1)
    s = cur.scaffolds["math"]
    assert (s.groups, s.delay) == (2, 0) and s.level(3) == pytest.approx(0.8)
