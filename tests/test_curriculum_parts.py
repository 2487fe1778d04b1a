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
