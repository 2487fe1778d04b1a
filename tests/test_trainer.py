"""Trainer checkpoints and the KL term, on the tiny model; model resolution errors."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest
import torch

from practicum.config import AlgorithmConfig, TrainerConfig
from practicum.errors import CheckpointError, ModelError
from practicum.models import resolve_model
from practicum.trainer import Sample, Trainer

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
