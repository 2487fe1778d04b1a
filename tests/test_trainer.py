"""Trainer checkpoints and the KL term, on the tiny model; model resolution errors."""

from __future__ import annotations

import json
import math
import random

import numpy as np
import pytest
import torch

from practicum.config import AlgorithmConfig, TrainerConfig
from practicum.errors import CheckpointError, ModelError
from practicum.models import resolve_model
from practicum.trainer import Sample, Trainer, new_totals

# Two sequences of the tiny vocabulary: a prompt (mask 0) then two generated tokens (mask 1).
SAMPLES = [
    Sample([1, 4, 7, 20, 2, 1, 5, 20, 20], [0] * 7 + [1, 1], [0.0] * 7 + [-3.5, -3.5], 1.0),
    Sample([1, 4, 7, 20, 2, 1, 5, 9, 2], [0] * 7 + [1, 1], [0.0] * 7 + [-3.5, -3.5], -1.0),
]


def _trainer(path, mode: str = "full", **algo) -> Trainer:
    return Trainer(path, TrainerConfig(autocast_dtype="none", mode=mode, lr=1e-2), AlgorithmConfig(**algo))


def _weights(tr: Trainer) -> dict[str, torch.Tensor]:
    return {k: v.clone() for k, v in tr.model.state_dict().items()}


@pytest.mark.parametrize("mode", ["full", "lora"])
def test_checkpoint_round_trip(tiny_model_path, tmp_path, mode):
    """save then load into a fresh trainer restores weights, optimiser state, RNG states, step and
    version: the next update is identical to the one the original trainer makes."""
    a = _trainer(tiny_model_path, mode)
    a.update(SAMPLES)
    a.update(SAMPLES)
    random.seed(1), np.random.seed(1), torch.manual_seed(1)
    a.save(tmp_path / "ckpt", {"next_step": 3})
    assert not (tmp_path / "ckpt.tmp").exists()
    rng_at_save = torch.rand(2).tolist(), random.random(), float(np.random.rand())

    b = _trainer(tiny_model_path, mode)
    torch.manual_seed(99)
    state = b.load(tmp_path / "ckpt")
    assert state["next_step"] == 3 and (b.step, b.version) == (a.step, a.version) == (2, 2)
    assert (torch.rand(2).tolist(), random.random(), float(np.random.rand())) == rng_at_save
    wa, wb = _weights(a), _weights(b)
    assert wa.keys() == wb.keys() and all(torch.equal(wa[k], wb[k]) for k in wa)
    a.update(SAMPLES)
    b.update(SAMPLES)
    wa, wb = _weights(a), _weights(b)
    assert all(torch.equal(wa[k], wb[k]) for k in wa)  # the optimiser's moments were restored too


def test_incomplete_or_mismatched_checkpoint_is_refused(tiny_model_path, tmp_path):
    """A folder without state, or a LoRA checkpoint loaded into a full trainer, raises
    CheckpointError naming the folder."""
    full = _trainer(tiny_model_path)
    (tmp_path / "empty").mkdir()
    with pytest.raises(CheckpointError, match="empty"):
        full.load(tmp_path / "empty")
    lora = _trainer(tiny_model_path, "lora")
    lora.save(tmp_path / "lora_ckpt", {})
    with pytest.raises(CheckpointError, match="lora_ckpt"):
        full.load(tmp_path / "lora_ckpt")
    full.save(tmp_path / "full_ckpt", {})
    with pytest.raises(CheckpointError, match="full_ckpt"):
        lora.load(tmp_path / "full_ckpt")


def test_kl_term_trains_zero_advantage_samples(tiny_model_path):
    """With kl_coef > 0 the update keeps zero-advantage samples (the KL still has a gradient
    once the policy has moved), reports a KL that is >= 0 and grows as the policy drifts."""
    tr = _trainer(tiny_model_path, kl_coef=0.1)
    assert tr.ref_model is not None
    first = tr.update(SAMPLES)
    assert first["samples_trained"] == 2 and first["kl"] >= 0
    for _ in range(5):
        tr.update(SAMPLES)  # the policy moves away from the reference
    zero = [Sample(s.ids, s.mask, s.behaviour_logprobs, 0.0) for s in SAMPLES]
    stats = tr.update(zero)
    assert stats["samples_trained"] == 2 and stats["skipped"] == 0.0
    assert stats["kl"] > first["kl"] + 1e-4


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_logits_taken_a_chunk_at_a_time_train_as_the_full_logits(tiny_model_path, temperature):
    """trainer.logits_chunk (1 here: every trained position its own chunk) gives the gradient of
    the full logits (logits_chunk 0), parameter by parameter, and the same loss and logged entropy
    over three updates - also with a sample whose completion has an untrained token inside it.
    (Adam's first steps divide by the gradient's own size, so float rounding in a near-zero
    component moves a weight by up to lr x 1e-3: the weights are compared to that.)"""
    from practicum import algorithms as A

    gap = Sample([1, 4, 7, 20, 2, 1, 5, 9, 20, 2], [0] * 7 + [1, 0, 1], [0.0] * 7 + [-3.5, 0.0, -3.5], 0.5)
    samples = [*SAMPLES, gap]

    def trainer(chunk: int) -> Trainer:
        return Trainer(tiny_model_path, TrainerConfig(autocast_dtype="none", lr=1e-2, logits_chunk=chunk), AlgorithmConfig())

    full, chunked = trainer(0), trainer(1)
    norm = A.loss_normaliser([sum(s.mask) for s in samples], "token_mean", 0)
    for tr in (full, chunked):
        tr._accumulate(samples, norm, A.SURROGATES["none"], temperature, new_totals())
    grads = [(a.grad, b.grad) for a, b in zip(full.model.parameters(), chunked.model.parameters())]
    assert all(a is not None for a, _ in grads) and any(float(a.abs().max()) > 1e-3 for a, _ in grads)
    for a, b in grads:
        torch.testing.assert_close(b, a, rtol=1e-4, atol=1e-7)
    full, chunked = trainer(0), trainer(1)
    for _ in range(3):
        a, b = full.update(samples, temperature), chunked.update(samples, temperature)
        assert b["loss"] == pytest.approx(a["loss"], rel=1e-4, abs=1e-6)
        assert b["entropy"] == pytest.approx(a["entropy"], rel=1e-5)
        assert b["tokens_trained"] == a["tokens_trained"] == 6
    wa, wb = _weights(full), _weights(chunked)
    assert all(torch.allclose(wa[k], wb[k], atol=1e-5) for k in wa)


def test_an_adapter_on_the_vocabulary_projection_is_trained_through_the_full_logits(tiny_model_path):
    """LoRA on lm_head: the chunked path projects with the plain weight and would miss the adapter,
    so the trainer takes the full logits there - the lm_head adapter gets the same gradient as
    with logits_chunk 0, and a gradient at all."""
    from practicum import algorithms as A

    def trainer(chunk: int) -> Trainer:
        torch.manual_seed(0)  # the same adapter initialisation for both
        cfg = TrainerConfig(autocast_dtype="none", mode="lora", lr=1e-2, logits_chunk=chunk)
        cfg.lora.target_modules = ["lm_head", "q_proj"]
        return Trainer(tiny_model_path, cfg, AlgorithmConfig())

    full, chunked = trainer(0), trainer(128)
    norm = A.loss_normaliser([sum(s.mask) for s in SAMPLES], "token_mean", 0)
    for tr in (full, chunked):
        tr._accumulate(SAMPLES, norm, A.SURROGATES["none"], 1.0, new_totals())
    head = {n: p.grad for n, p in chunked.model.named_parameters() if "lm_head" in n and "lora_" in n}
    want = {n: p.grad for n, p in full.model.named_parameters() if "lm_head" in n and "lora_" in n}
    assert head and all(g is not None for g in head.values())
    assert any(float(g.abs().max()) > 0 for g in head.values())
    for n, g in head.items():
        torch.testing.assert_close(g, want[n], rtol=1e-4, atol=1e-7)


def _entropy_at(tr: Trainer, samples: list[Sample]) -> float:
    """The policy's mean entropy over the samples' generated tokens, recomputed from scratch."""
    from practicum.algorithms import token_entropy

    with torch.no_grad():
        mb = next(tr._micro_batches(samples))
        ent = token_entropy(tr._logits(tr.model, mb))
    return float((ent * mb.mask).sum() / mb.mask.sum())


def test_entropy_is_logged_and_the_bonus_raises_it(tiny_model_path):
    """Every update logs its estimate of the policy's entropy: the mean -log pi, before the step,
    of the trained tokens. With entropy_coef > 0 the same updates end at a higher (exact)
    entropy than without: the bonus pushes against the sharpening the updates cause."""
    plain, bonus = _trainer(tiny_model_path), _trainer(tiny_model_path, entropy_coef=0.5)
    with torch.no_grad():
        mb = next(plain._micro_batches(SAMPLES))
        surprise = float((-plain._token_logprobs(plain.model, mb) * mb.mask).sum() / mb.mask.sum())
    assert surprise > 0
    assert plain.update(SAMPLES)["entropy"] == pytest.approx(surprise, rel=1e-4)
    assert bonus.update(SAMPLES)["entropy"] == pytest.approx(surprise, rel=1e-4)
    for _ in range(4):
        plain.update(SAMPLES)
        bonus.update(SAMPLES)
    assert _entropy_at(bonus, SAMPLES) > _entropy_at(plain, SAMPLES) + 1e-3


def test_entropy_bonus_trains_uniform_groups_only_when_asked(tiny_model_path):
    """Zero-advantage samples are skipped under the bonus by default (no extra pass); with
    entropy_all_samples they are trained for the bonus alone, and their entropy rises."""
    zero = [Sample(s.ids, s.mask, s.behaviour_logprobs, 0.0) for s in SAMPLES]
    default = _trainer(tiny_model_path, entropy_coef=0.5)
    assert default.update(zero)["skipped"] == 1.0
    every = _trainer(tiny_model_path, entropy_coef=0.5, entropy_all_samples=True)
    before = _entropy_at(every, zero)
    stats = every.update(zero)
    assert stats["samples_trained"] == 2 and stats["skipped"] == 0.0
    assert _entropy_at(every, zero) > before
    off = _trainer(tiny_model_path, entropy_all_samples=True)  # no bonus: nothing to train them for
    assert off.update(zero)["skipped"] == 1.0


def test_a_domains_own_entropy_coef_replaces_the_global_one(tiny_model_path):
    """A sample's own entropy_coef (its domain's) is packed in place of algorithm.entropy_coef,
    and trains exactly as the global weight would: the same weights after the same update."""
    from dataclasses import replace

    own = [replace(s, entropy_coef=0.5) for s in SAMPLES]
    by_global, by_domain = _trainer(tiny_model_path, entropy_coef=0.5), _trainer(tiny_model_path)
    mixed = [replace(SAMPLES[0], entropy_coef=0.0), SAMPLES[1]]
    assert next(by_global._micro_batches(mixed)).entropy_coefs.tolist() == [0.0, 0.5]
    by_global.update(SAMPLES)
    by_domain.update(own)
    wa, wb = _weights(by_global), _weights(by_domain)
    assert all(torch.equal(wa[k], wb[k]) for k in wa)
    plain = _trainer(tiny_model_path)
    plain.update(SAMPLES)
    assert any(not torch.equal(wa[k], w) for k, w in _weights(plain).items())


def test_resolve_model_errors(tmp_path):
    """Unknown names and folders that are not checkpoints raise ModelError saying what to give."""
    with pytest.raises(ModelError, match="built-in name"):
        resolve_model("no-such-model")
    (tmp_path / "config.json").write_text(json.dumps({}))
    with pytest.raises(ModelError, match="not a transformers checkpoint"):
        resolve_model(str(tmp_path))


def test_tiny_model_is_deterministic(tmp_path):
    """make_tiny_model with the same seed writes the same weights, without touching the global
    RNG; another seed gives other weights."""
    from safetensors.torch import load_file

    from practicum.testing import make_tiny_model

    state = torch.get_rng_state()
    a = load_file(str(make_tiny_model(tmp_path / "a", seed=3) / "model.safetensors"))
    b = load_file(str(make_tiny_model(tmp_path / "b", seed=3) / "model.safetensors"))
    c = load_file(str(make_tiny_model(tmp_path / "c", seed=4) / "model.safetensors"))
    assert torch.equal(torch.get_rng_state(), state)
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert any(not torch.equal(a[k], c[k]) for k in a)


def test_a_sample_without_generated_tokens_is_ignored(tiny_model_path):
    """A sample whose mask is all 0 (an engine returned an empty completion) carries no
    gradient: the update trains on the others instead of crashing while packing it."""
    tr = _trainer(tiny_model_path)
    empty = Sample([1, 4, 7, 20], [0, 0, 0, 0], [0.0] * 4, 1.0)
    stats = tr.update([empty, *SAMPLES])
    assert stats["tokens_trained"] == sum(sum(s.mask) for s in SAMPLES)
    assert stats["skipped"] == 0.0


# --- off-policy correction ---------------------------------------------------------------------
# Two samples whose advantages do not cancel, so the loss at ratio 1 is not 0: with token_mean,
# loss = -(1.0 * 2 tokens + 0.5 * 2 tokens) / 4 tokens x weight = -0.75 x weight.
SIGNED = [Sample(s.ids, s.mask, s.behaviour_logprobs, a) for s, a in zip(SAMPLES, [1.0, 0.5])]


def _trainer_logprobs(tr: Trainer, samples: list[Sample]) -> list[list[float]]:
    """The trainer's own log-probs of each sample's tokens (0 on the prompt), as the update will
    compute them: the same packing, the same forward."""
    (mb,) = list(tr._micro_batches(samples))  # the two samples share a prompt: one row
    with torch.no_grad():
        logp = tr._token_logprobs(tr.model, mb)  # [S, T]
    return [[0.0] * 7 + logp[i, :2].tolist() for i in range(len(samples))]


def _with_behaviour(samples: list[Sample], logps: list[list[float]], shift: float) -> list[Sample]:
    """The samples as if drawn by an engine whose log-prob of every generated token is the
    trainer's + shift (shift < 0: the engine found them less likely, so the weight is e^-shift)."""
    return [Sample(s.ids, s.mask, [lp + shift if m else 0.0 for lp, m in zip(lps, s.mask)], s.advantage)
            for s, lps in zip(samples, logps)]


@pytest.mark.parametrize("method", ["tis", "decoupled"])
def test_corrections_reduce_to_none_when_the_engine_agrees(tiny_model_path, method):
    """With behaviour log-probs equal to the trainer's, every weight is exactly 1 and no metric
    sees a gap: tis and decoupled take exactly the update that none takes."""
    probe = _trainer(tiny_model_path)
    samples = _with_behaviour(SIGNED, _trainer_logprobs(probe, SIGNED), 0.0)
    base, corrected = _trainer(tiny_model_path), _trainer(tiny_model_path, off_policy=method)
    a, b = base.update(samples), corrected.update(samples)
    wa, wb = _weights(base), _weights(corrected)
    assert all(torch.equal(wa[k], wb[k]) for k in wa)
    assert a["loss"] == b["loss"] == pytest.approx(-0.75)
    assert (b["mismatch_abs_logp"], b["mismatch_kl"], b["is_truncated_frac"]) == (0.0, 0.0, 0.0)


def test_none_ignores_the_behaviour_logprobs(tiny_model_path):
    """off_policy none (the default) trains on the samples as if on-policy: whatever the engine
    reported, the update is the same; only the mismatch metrics differ."""
    logps = _trainer_logprobs(_trainer(tiny_model_path), SIGNED)
    a, b = _trainer(tiny_model_path), _trainer(tiny_model_path)
    sa = a.update(_with_behaviour(SIGNED, logps, 0.0))
    sb = b.update(_with_behaviour(SIGNED, logps, -3.0))
    wa, wb = _weights(a), _weights(b)
    assert all(torch.equal(wa[k], wb[k]) for k in wa)
    assert sa["loss"] == sb["loss"] and sb["mismatch_abs_logp"] == pytest.approx(3.0, abs=1e-5)


@pytest.mark.parametrize("algo", [{}, {"off_policy": "tis"}, {"off_policy": "decoupled", "decoupled_cap": 5.0}])
def test_a_guided_sample_is_trained_as_the_policys_own_under_every_correction(tiny_model_path, algo):
    """A guided scaffold's helped sample was drawn by the engine with help in its context that the
    trained context lacks: here the engine found every token e^3 times likelier than the trainer
    does (pi_plain / pi_helped = e^-3). Marked guided, it takes exactly the update off_policy
    none takes (weight 1, loss -0.75) and shows no mismatch; unmarked, tis would scale its loss by
    e^-3 = 0.0498 - the guidance all but cancelled on the tokens it is there to teach."""
    logps = _trainer_logprobs(_trainer(tiny_model_path), SIGNED)
    helped = _with_behaviour(SIGNED, logps, 3.0)
    guided = [Sample(s.ids, s.mask, s.behaviour_logprobs, s.advantage, guided=True) for s in helped]
    base, tr = _trainer(tiny_model_path), _trainer(tiny_model_path, **algo)
    a, b = base.update(SIGNED), tr.update(guided)
    wa, wb = _weights(base), _weights(tr)
    assert all(torch.equal(wa[k], wb[k]) for k in wa)
    assert a["loss"] == b["loss"] == pytest.approx(-0.75) and (b["mismatch_abs_logp"], b["mismatch_kl"]) == (0.0, 0.0)
    if algo.get("off_policy") == "tis":
        unmarked = _trainer(tiny_model_path, **algo).update(helped)
        assert unmarked["loss"] == pytest.approx(-0.75 * math.exp(-3.0), rel=1e-4)
        assert unmarked["mismatch_abs_logp"] == pytest.approx(3.0, abs=1e-5)


@pytest.mark.parametrize(
    "algo, loss",
    [
        ({}, -0.75),  # none: weight 1
        ({"off_policy": "tis", "tis_cap": 2.0}, -0.75 * 2),  # e^3 = 20.1 clamped to 2
        ({"off_policy": "decoupled"}, -0.75 * math.exp(3.0)),  # -15.06: the full weight
        ({"off_policy": "decoupled", "decoupled_cap": 5.0}, 0.0),  # every token over the cap: dropped
    ],
)
def test_stale_samples_are_weighted_by_the_chosen_correction(tiny_model_path, algo, loss):
    """An engine that found every generated token e^3 times less likely than the trainer does
    (log-prob 3 lower: weight pi_train / pi_behaviour = e^3 = 20.09) scales the loss of
    -0.75 by the correction's weight. The metrics report the same gap under every correction:
    |Δ log p| = 3; k3 of KL(behaviour || train) = r - 1 - log r with r = e^3, i.e.
    20.0855 - 1 - 3 = 16.0855; and every token over the cap in force (tis_cap 2 under none and
    tis, 5 under capped decoupled; none under uncapped decoupled)."""
    logps = _trainer_logprobs(_trainer(tiny_model_path), SIGNED)
    tr = _trainer(tiny_model_path, **algo)
    stats = tr.update(_with_behaviour(SIGNED, logps, -3.0))
    assert stats["loss"] == pytest.approx(loss, rel=1e-5, abs=1e-6)
    assert stats["mismatch_abs_logp"] == pytest.approx(3.0, abs=1e-5)
    assert stats["mismatch_kl"] == pytest.approx(math.exp(3.0) - 1.0 - 3.0, rel=1e-5)  # 16.0855
    over = tr.algo.weight_cap is not None
    assert stats["is_truncated_frac"] == (1.0 if over else 0.0)
    if loss == 0.0:
        assert stats["grad_norm"] == 0.0  # nothing left to learn from


@pytest.mark.slow
def test_embedded_model_mismatch_is_the_bf16_gap(quickstart_path):
    """With nothing stale (the engine holds exactly the trainer's weights), the train-vs-rollout
    mismatch is the numerics gap alone: the bf16 engine (KV-cache decode) against the trainer's
    bf16-autocast forward over fp32 master weights. Measured on the embedded SmolLM2-135M with
    the quickstart's prompts at temperature 1; the figure is in docs/algorithms.md:
        .venv/bin/python -m pytest -q -s -m slow tests/test_trainer.py -k bf16_gap
    """
    import asyncio

    from transformers import AutoTokenizer

    from practicum.config import load_config
    from practicum.domains import build_domain
    from practicum.engines.base import SamplingParams
    from practicum.engines.hf import HFEngine

    cfg = load_config(quickstart_path, [])
    path = resolve_model(cfg.model.name)
    domain = build_domain(cfg.domains[0], cfg.run.seed, cfg.base_dir)
    tok = AutoTokenizer.from_pretrained(path)
    chats = [[{"role": m.role, "content": m.content} for m in domain.source.train_task(i).prompt] for i in range(4)]
    prompts = [tok(tok.apply_chat_template(c, add_generation_prompt=True, tokenize=False), add_special_tokens=False).input_ids
               for c in chats[:2] for _ in range(2)]  # small: a bf16 update is slow on this CPU
    engine = HFEngine(path, dtype=torch.bfloat16)
    replies = asyncio.run(engine.generate(prompts, SamplingParams(max_new_tokens=24, temperature=1.0, seed=1)))
    samples = [Sample(p + c.ids, [0] * len(p) + [1] * len(c.ids), [0.0] * len(p) + c.logprobs, 1.0 if i % 2 else -1.0)
               for i, (p, c) in enumerate(zip(prompts, replies))]
    trainer = Trainer(path, TrainerConfig(autocast_dtype="bfloat16"), AlgorithmConfig())  # the bf16 setting auto picks where bf16 is native
    stats = trainer.update(samples, temperature=1.0)
    print(f"\nbf16 engine vs bf16-autocast trainer, {stats['tokens_trained']:.0f} tokens: "
          f"mean |Δ log p| {stats['mismatch_abs_logp']:.4f}, k3 KL {stats['mismatch_kl']:.5f}, "
          f"weights over tis_cap 2: {stats['is_truncated_frac']:.4f}")
    assert 0 < stats["mismatch_abs_logp"] < 0.05
    assert 0 <= stats["mismatch_kl"] < 0.01
    assert stats["is_truncated_frac"] < 0.01


def test_lr_schedule_sets_the_optimiser_and_survives_a_checkpoint(tiny_model_path, tmp_path):
    """Under a linear schedule to 0 (peak 1e-2) an update at progress 0.25 runs at 7.5e-3 - the
    optimiser's own lr, reported as ``lr`` - and one without progress keeps it; a checkpoint
    restores it; an invalid wsd (warmup into the decay) is refused."""
    cfg = TrainerConfig(autocast_dtype="none", lr=1e-2, lr_schedule="linear")
    tr = Trainer(tiny_model_path, cfg, AlgorithmConfig())
    assert tr.lr == pytest.approx(1e-2)
    stats = tr.update(SAMPLES, progress=0.25)
    assert stats["lr"] == pytest.approx(7.5e-3) and tr.optimizer.param_groups[0]["lr"] == pytest.approx(7.5e-3)
    assert tr.update(SAMPLES)["lr"] == pytest.approx(7.5e-3)
    tr.update(SAMPLES, progress=0.5)
    tr.save(tmp_path / "ckpt", {})
    back = Trainer(tiny_model_path, cfg, AlgorithmConfig())
    back.load(tmp_path / "ckpt")
    assert back.lr == pytest.approx(5e-3) and back.update(SAMPLES)["lr"] == pytest.approx(5e-3)
    with pytest.raises(ValueError, match="warmup_fraction"):
        TrainerConfig(lr_schedule="wsd", warmup_fraction=0.5, decay_fraction=0.6)


def test_pcgrad_with_one_domain_is_the_plain_update(tiny_model_path):
    """trainer.gradient_surgery pcgrad on a batch of one domain changes nothing: the same weights."""
    plain = _trainer(tiny_model_path)
    cfg = TrainerConfig(autocast_dtype="none", lr=1e-2, gradient_surgery="pcgrad")
    surg = Trainer(tiny_model_path, cfg, AlgorithmConfig())
    one = [Sample(s.ids, s.mask, s.behaviour_logprobs, s.advantage, domain="a") for s in SAMPLES]
    a, b = plain.update(one), surg.update(one)
    assert "grad_conflicts" not in b and a["grad_norm"] == pytest.approx(b["grad_norm"])
    wa, wb = _weights(plain), _weights(surg)
    assert all(torch.equal(wa[k], wb[k]) for k in wa)


def test_pcgrad_cancels_two_domains_that_pull_exactly_apart(tiny_model_path):
    """The same sequence in domain a at advantage +1 and in domain b at -0.5: the plain gradient is
    half of a's (they partly cancel); the two gradients are antiparallel (cosine -1, one conflict of
    one pair), so PCGrad removes each one's whole component along the other and nothing is left."""
    seq = SAMPLES[0]
    batch = [Sample(seq.ids, seq.mask, seq.behaviour_logprobs, 1.0, domain="a"),
             Sample(seq.ids, seq.mask, seq.behaviour_logprobs, -0.5, domain="b")]
    plain = _trainer(tiny_model_path).update(batch)
    cfg = TrainerConfig(autocast_dtype="none", lr=1e-2, gradient_surgery="pcgrad")
    surg = Trainer(tiny_model_path, cfg, AlgorithmConfig()).update(batch)
    assert surg["grad_conflicts"] == 1.0 and surg["grad_cosine_min"] == pytest.approx(-1.0, abs=1e-4)
    assert plain["grad_norm"] > 0.01 and surg["grad_norm"] < 1e-4 * plain["grad_norm"]
    assert surg["loss"] == pytest.approx(plain["loss"]) and surg["tokens_trained"] == plain["tokens_trained"]


def _two_domains() -> tuple[list[Sample], list[Sample]]:
    """Domain a: the module's two samples; domain b: the same two sequences at other advantages."""
    a = [Sample(s.ids, s.mask, s.behaviour_logprobs, s.advantage, domain="a") for s in SAMPLES]
    b = [Sample(s.ids, s.mask, s.behaviour_logprobs, adv, domain="b") for s, adv in zip(SAMPLES, (-0.5, 2.0))]
    return a, b


def test_per_domain_updates_with_one_domain_are_the_joint_update(tiny_model_path):
    one, _ = _two_domains()
    joint, split = _trainer(tiny_model_path), _trainer(tiny_model_path)
    a, b = joint.update(one), split.update(one, per_domain=True)
    assert a["grad_norm"] == pytest.approx(b["grad_norm"]) and "a/grad_norm" not in b
    wa, wb = _weights(joint), _weights(split)
    assert all(torch.equal(wa[k], wb[k]) for k in wa)


def test_per_domain_updates_are_each_domains_own_step_in_rotating_order(tiny_model_path):
    """A per-domain update of a batch of domains a and b is the same as a trainer making b's update
    and then a's (step 1 starts at the second name: the order rotates by step): the same weights,
    the same two gradient norms, one version. The joint update of the same batch clips the summed
    gradient once and ends elsewhere."""
    a, b = _two_domains()
    split = _trainer(tiny_model_path)
    stats = split.update(a + b, per_domain=True)
    seq = _trainer(tiny_model_path)
    sb, sa = seq.update(b), seq.update(a)
    assert split.version == 1 and seq.version == 2
    assert stats["b/grad_norm"] == pytest.approx(sb["grad_norm"]) and stats["a/grad_norm"] == pytest.approx(sa["grad_norm"])
    assert stats["grad_norm"] == pytest.approx((sa["grad_norm"] + sb["grad_norm"]) / 2)
    assert stats["loss"] == pytest.approx((sa["loss"] + sb["loss"]) / 2)
    assert stats["tokens_trained"] == sa["tokens_trained"] + sb["tokens_trained"] == 8
    ws, wq = _weights(split), _weights(seq)
    assert all(torch.equal(ws[k], wq[k]) for k in ws)
    joint = _trainer(tiny_model_path)
    joint.update(a + b)
    wj = _weights(joint)
    assert any(not torch.allclose(wj[k], ws[k]) for k in wj)
    # the next step begins with a: a trainer doing a then b lands where step 2 does
    split.update(a + b, per_domain=True)
    seq.update(a), seq.update(b)
    ws, wq = _weights(split), _weights(seq)
    assert all(torch.equal(ws[k], wq[k]) for k in ws)


def test_per_domain_updates_refuse_gradient_surgery(tiny_model_path):
    a, b = _two_domains()
    cfg = TrainerConfig(autocast_dtype="none", lr=1e-2, gradient_surgery="pcgrad")
    with pytest.raises(ValueError, match="gradient surgery"):
        Trainer(tiny_model_path, cfg, AlgorithmConfig()).update(a + b, per_domain=True)
