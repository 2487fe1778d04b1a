"""The real embedded model (SmolLM2-135M) through practicum.loop.train: real GRPO steps change
the weights, and a resumed run is bit-identical to an uninterrupted one. Minutes on 2 cores."""

from __future__ import annotations

import math
import shutil

import pytest
import torch
from safetensors.torch import load_file

from practicum.config import load_config
from practicum.loop import train
from practicum.models import resolve_model
from practicum.store import Store

pytestmark = pytest.mark.slow

# Small enough for about a minute per test on 2 cores; big enough that a step has signal.
SMALL = [
    "rollout.prompts_per_step=4",
    "rollout.group_size=4",
    "rollout.max_new_tokens=16",
    "domains.0.eval_size=4",
    "eval.before=false",
    "eval.after=false",
    "run.time_limit_minutes=null",
]


def _quiet(_msg: str) -> None:
    pass


def _checkpoint(run_dir, step: int) -> dict[str, torch.Tensor]:
    return load_file(str(run_dir / "checkpoints" / f"step_{step:06d}" / "model.safetensors"))


def test_two_grpo_steps_change_the_weights(quickstart_path, tmp_path):
    """Two real GRPO steps on the quickstart config train on real samples with a finite loss,
    and the checkpointed weights differ from the embedded model's."""
    cfg = load_config(quickstart_path, [*SMALL, "run.steps=2", "run.checkpoint_every=2", f"run.dir={tmp_path / 'run'}"])
    res = train(cfg, log=_quiet)
    assert res.steps_done == 2 and len(res.history) == 2
    trained = [m for m in res.history if m["samples_trained"] > 0]
    assert trained, f"no step had a group with differing rewards: {res.history}"
    for m in trained:
        assert math.isfinite(m["loss"]) and math.isfinite(m["grad_norm"]) and m["grad_norm"] > 0
        assert m["logp_mismatch"] < 0.5  # bf16 sampler vs bf16-autocast trainer: close, not equal
    assert res.history[-1]["policy_version"] == len(trained)
    initial = load_file(str(resolve_model("smollm2-135m-instruct") / "model.safetensors"))
    final = _checkpoint(res.run_dir, 2)
    shared = initial.keys() & final.keys()
    assert len(shared) > 10
    changed = [k for k in shared if not torch.equal(initial[k], final[k])]
    assert changed and all(torch.isfinite(final[k]).all() for k in changed)


def _train_groups(run_dir, step: int):
    store = Store(run_dir / "store.sqlite")
    try:
        return [(g.task.id, g.rewards, [e.turns[0].completion_ids for e in g.episodes])
                for g in store.groups(step=step, kind="train")]
    finally:
        store.close()


def test_resume_is_bit_identical(quickstart_path, tmp_path):
    """4 steps straight vs 2 steps then resume=True to 4: identical final weights (torch.equal)
    and identical stored groups, samples and rewards for steps 3 and 4."""

    # One checkpoint kept per run, and the straight run's dropped once read: each is 1.6 GB of
    # weights and Adam state, and CI's disk is not ours to fill.
    def cfg(name, steps):
        return load_config(quickstart_path, [*SMALL, f"run.steps={steps}", "run.checkpoint_every=2",
                                             "run.keep_checkpoints=1", f"run.dir={tmp_path / name}"])

    straight = train(cfg("straight", 4), log=_quiet)
    assert straight.steps_done == 4
    assert any(m["samples_trained"] > 0 for m in straight.history[2:]), "steps 3-4 must train for this test"
    a = _checkpoint(straight.run_dir, 4)
    shutil.rmtree(straight.run_dir / "checkpoints")
    train(cfg("resumed", 2), log=_quiet)
    resumed = train(cfg("resumed", 4), resume=True, log=_quiet)
    assert resumed.steps_done == 4 and len(resumed.history) == 2

    b = _checkpoint(resumed.run_dir, 4)
    assert a.keys() == b.keys()
    assert all(torch.equal(a[k], b[k]) for k in a)
    for step in (3, 4):
        groups = _train_groups(straight.run_dir, step)
        assert groups and groups == _train_groups(resumed.run_dir, step)
    for m_straight, m_resumed in zip(straight.history[2:], resumed.history):
        assert m_straight.get("loss") == m_resumed.get("loss")
        assert m_straight["arithmetic/reward"] == m_resumed["arithmetic/reward"]
