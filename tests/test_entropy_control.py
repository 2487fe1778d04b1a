"""The adaptive entropy bonus per domain (practicum.entropy_control): the controller's steps by
hand, the sampled-entropy measurement, the config, and the real loop (tiny model, toy domains)
giving each controlled domain's samples its weight, logging it, and keeping it across a resume."""

from __future__ import annotations

import asyncio
import json

import pytest

from practicum import loop as loop_mod
from practicum.config import load_config
from practicum.entropy_control import EntropyControl, from_config, sampled_entropy
from practicum.envs.toy import ToyDomain
from practicum.errors import ConfigError
from practicum.loop import Run, train_async
from practicum.records import Episode, EpisodeState, Group, GroupState, Message, Score, Task, Turn


def test_controller_steps_by_hand():
    """a's entropy below its target: its coefficient climbs one step a measurement, to the cap,
    and applies; b above: stays at 0. Unmeasured, a domain keeps its state. Back above its
    target, a steps down and its bonus stops at once."""
    c = EntropyControl({"a": 0.5, "b": 1.0}, step=0.01, max_coef=0.025)
    assert c.weights() == {"a": 0.0, "b": 0.0}
    c.observe({"a": 0.3, "b": 1.2})
    assert c.coefs == pytest.approx({"a": 0.01, "b": 0.0}) and c.weights() == pytest.approx({"a": 0.01, "b": 0.0})
    c.observe({"a": 0.3})  # b not in this step's batch
    assert c.coefs == pytest.approx({"a": 0.02, "b": 0.0})
    c.observe({"a": 0.49, "b": 0.9})
    assert c.coefs == pytest.approx({"a": 0.025, "b": 0.01})  # a at the cap; b now below: one step
    assert c.weights() == pytest.approx({"a": 0.025, "b": 0.01})
    c.observe({"a": 0.5, "b": 0.9})  # a at its target counts as above
    assert c.coefs == pytest.approx({"a": 0.015, "b": 0.02}) and c.weights() == pytest.approx({"a": 0.0, "b": 0.02})
    again = EntropyControl({"a": 0.5, "b": 1.0}, step=0.01, max_coef=0.025)
    again.load(c.state())
    assert again.coefs == c.coefs and again.weights() == c.weights()


def test_controller_starts_at_its_entropy_coef_capped():
    c = EntropyControl({"a": 0.5}, step=0.01, max_coef=0.02, start={"a": 0.05})
    assert c.coefs == {"a": 0.02} and c.weights() == {"a": 0.0}  # no bonus before a measurement below
    c.observe({"a": 0.1})
    assert c.weights() == {"a": 0.02}


def _group(domain: str, logprobs: list[list[float]], failed: bool = False) -> Group:
    task = Task(id=f"{domain}/train/0", domain=domain, prompt=[Message(role="user", content="q")])
    eps = []
    for lp in logprobs:
        ep = Episode(task_id=task.id, domain=domain, state=EpisodeState.dropped if failed else EpisodeState.done,
                     score=Score(value=0.0))
        ep.turns.append(Turn(prompt_ids=[1], completion_ids=[2] * len(lp), logprobs=lp, text="x",
                             finish_reason="stop", policy_version=0))
        eps.append(ep)
    return Group(task=task, episodes=eps, state=GroupState.ready)


def test_sampled_entropy_is_the_mean_surprise_per_generated_token():
    """a: tokens of -log p 0.5, 1.5 and 1.0 (one episode of two tokens, one of one) -> 1.0; a
    dropped episode's tokens are not the policy's current draws and do not count; b: 0.2."""
    groups = [_group("a", [[-0.5, -1.5], [-1.0]]), _group("a", [[-9.0]], failed=True), _group("b", [[-0.2]])]
    assert sampled_entropy(groups) == pytest.approx({"a": 1.0, "b": 0.2})
    assert sampled_entropy([_group("c", [[-3.0]], failed=True)]) == {}


def _config(tmp_path, algorithm: dict, domains: list[dict]):
    raw = {"run": {"name": "t", "dir": str(tmp_path / "r")}, "model": {"name": "smollm2-135m-instruct"},
           "domains": [{"name": n, "env": "math", "source": {"kind": "jsonl", "path": "x.jsonl"}, **d}
                       for n, d in zip("abc", domains)], "algorithm": algorithm}
    p = tmp_path / "c.yaml"
    p.write_text(json.dumps(raw))
    return load_config(p)


def test_config_targets_per_domain(tmp_path):
    """The global target covers every domain; a domain's own replaces it; a domain's 0 leaves it
    out (its fixed entropy_coef then applies). Each starts at its own entropy_coef, else the
    global one. No target anywhere: no controller."""
    cfg = _config(tmp_path, {"entropy_target": 0.2, "entropy_coef": 0.01, "entropy_coef_step": 0.002},
                  [{"entropy_target": 0.6}, {"entropy_coef": 0.03}, {"entropy_target": 0}])
    c = from_config(cfg.algorithm, cfg.domains)
    assert c.targets == {"a": 0.6, "b": 0.2} and c.start == {"a": 0.01, "b": 0.03}
    assert c.step == 0.002 and c.max_coef == 0.05
    fixed = _config(tmp_path, {"entropy_coef": 0.01}, [{}, {"entropy_coef": 0.1}])  # fixed bonuses, no target
    assert from_config(fixed.algorithm, fixed.domains) is None
    opted_out = _config(tmp_path, {"entropy_target": 0.2}, [{"entropy_target": 0}])
    assert from_config(opted_out.algorithm, opted_out.domains) is None
    with pytest.raises(ConfigError, match="entropy_target"):
        _config(tmp_path, {"entropy_target": -1}, [{}])
    with pytest.raises(ConfigError, match="entropy_coef_step"):
        _config(tmp_path, {"entropy_target": 0.2, "entropy_coef_step": 0}, [{}])
    # the controller's step and ceiling without a target anywhere would do nothing: said, not ignored
    with pytest.raises(ConfigError, match="entropy_coef_step tune the adaptive entropy bonus, and no domain"):
        _config(tmp_path, {"entropy_coef": 0.01, "entropy_coef_step": 0.002}, [{}])
    with pytest.raises(ConfigError, match="entropy_coef_max tune"):
        _config(tmp_path, {"entropy_target": 0.2, "entropy_coef_max": 0.1}, [{"entropy_target": 0}])
    assert _config(tmp_path, {"entropy_coef_max": 0.1}, [{"entropy_target": 0.3}]).algorithm.entropy_coef_max == 0.1


def test_the_loop_gives_each_controlled_domain_its_weight_and_keeps_it_on_resume(
        tiny_run_config, tiny_model_path, monkeypatch):
    """alpha's target (50 nats) is above any entropy the tiny model samples, so its coefficient
    climbs a step every step it is drawn and its samples carry it; beta's target 0 leaves it
    out (no bonus, no coefficient logged). Every step logs each drawn domain's sampled entropy,
    equal to the mean -log p its groups' tokens had. The coefficients come back on resume."""
    raw = json.loads(tiny_run_config.path.read_text())
    section = raw["domains"][0]
    raw["domains"] = [{**section, "name": "alpha", "entropy_target": 50.0}, {**section, "name": "beta", "entropy_target": 0}]
    raw["algorithm"] = {"entropy_target": 50.0, "entropy_coef_step": 0.01, "entropy_coef_max": 0.035}
    path = tiny_run_config.path.with_name("ent.yaml")
    path.write_text(json.dumps(raw))
    cfg = load_config(path, [f"run.dir={path.parent / 'ent'}", "run.steps=4", "run.checkpoint_every=2"])
    seen: list[tuple[dict, dict]] = []
    real_build = loop_mod.build_samples

    def spy(groups, kind, rewards=None, entropy_coefs=None, overrides=None):
        samples, uniform = real_build(groups, kind, rewards, entropy_coefs, overrides)
        seen.append((sampled_entropy(groups), {s.domain: s.entropy_coef for s in samples}))
        return samples, uniform

    monkeypatch.setattr(loop_mod, "build_samples", spy)
    doms = [ToyDomain("alpha", ("seven", "three"), seed=3, eval_size=8), ToyDomain("beta", ("one", "two"), seed=3, eval_size=8)]
    run = Run(cfg, domains=doms, log=lambda _m: None)
    res = asyncio.run(train_async(cfg, run=run, log=lambda _m: None))
    drawn_alpha = 0
    for m, (measured, carried) in zip(res.history, seen):
        for d, h in measured.items():
            assert m[f"{d}/entropy"] == pytest.approx(h)
        if "alpha" in measured:
            drawn_alpha += 1
            want = min(0.01 * drawn_alpha, 0.035)
            assert m["alpha/entropy_coef"] == pytest.approx(want) and carried["alpha"] == pytest.approx(want)
        if "beta" in carried:
            assert carried["beta"] is None  # not controlled: algorithm.entropy_coef (0) applies
        assert "beta/entropy_coef" not in m
    assert drawn_alpha >= 2
    saved = json.loads((run.checkpoints.latest() / "state.json").read_text())["entropy_control"]
    assert saved["coefs"]["alpha"] == pytest.approx(min(0.01 * drawn_alpha, 0.035)) and "beta" not in saved["coefs"]
    more = load_config(path, [f"run.dir={path.parent / 'ent'}", "run.steps=6", "run.checkpoint_every=2"])
    again = Run(more, resume=True, domains=doms, log=lambda _m: None)
    assert again.entropy is not None and again.entropy.state() == saved
    again.close()
