"""The vLLM engine's code path against a fake `vllm` module at its API boundary (tests/fake_vllm:
no GPU and no vLLM here). What the fake stands for: vLLM's offline `LLM` - token-id prompts,
per-token log-probs, worker RPC for weight updates, the prefix-cache reset. On a machine with a
GPU and vLLM, PRACTICUM_VLLM_GPU_TEST=1 runs the training test against the real module."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest
import torch

from practicum.engines.base import SamplingParams

REAL = os.environ.get("PRACTICUM_VLLM_GPU_TEST") == "1"


@pytest.fixture
def vllm_module(monkeypatch):
    if REAL:
        import vllm

        return vllm
    monkeypatch.syspath_prepend(str(Path(__file__).with_name("fake_vllm")))
    import sys

    for name in [m for m in sys.modules if m == "vllm" or m.startswith("vllm.")]:
        monkeypatch.delitem(sys.modules, name)
    import vllm

    assert "fake_vllm" in vllm.__file__
    return vllm


def test_generation_returns_token_ids_and_per_token_logprobs(vllm_module, tiny_model_path):
    from practicum.engines.vllm import VLLMEngine
    from practicum.records import Message

    engine = VLLMEngine(tiny_model_path, torch.float32)
    llm = engine.llm
    assert llm.kwargs["logprobs_mode"] == "processed_logprobs" and llm.kwargs["enable_prefix_caching"]
    ids = engine.renderer.chat_ids([Message(role="user", content="say 3")])
    out = asyncio.run(engine.generate([ids, ids], SamplingParams(max_new_tokens=8, temperature=1.0, seed=5)))
    for c in out:
        assert len(c.logprobs) == len(c.ids) > 0 and c.finish_reason == "stop"
        assert c.ids[-1] in engine.renderer.stop_ids  # ends with its stop token, as the contract says
    if not REAL:
        assert all(lp == -0.5 for c in out for lp in c.logprobs)
        seeds = [sp.seed for _, sp in llm.calls]
        assert seeds == [5, 6]  # the prompts of one call do not share a seed
        assert llm.calls[0][0] == len(ids)  # the rendered token ids were sent, not text


def test_training_with_the_vllm_engine_updates_its_weights_and_logs_the_mismatch(vllm_module, tiny_run_config):
    """Two training steps with generation by the vLLM engine: each update reaches every worker
    through collective_rpc (all parameter names), the prefix cache is reset, and the
    train-vs-rollout mismatch of the behaviour log-probs is in the step metrics."""
    from practicum.engines.vllm import VLLMEngine
    from practicum.loop import Run, train_async

    cfg = tiny_run_config("vllm", "run.steps=2", "rollout.temperature=1.0")
    engine = VLLMEngine(cfg.model.name, torch.float32)
    run = Run(cfg, engine=engine, overwrite=True, log=lambda _m: None)
    names = set(run.trainer.export_weights())
    result = asyncio.run(train_async(cfg, run=run, log=lambda _m: None))
    assert result.steps_done == 2
    updates = [m for m in result.history if not m.get("skipped")]
    if not REAL:
        loaded = engine.llm.worker.model_runner.model.loaded
        assert len(loaded) == len(updates) >= 1 and all(set(batch) == names for batch in loaded)
        assert engine.llm.prefix_resets == len(loaded)
    assert engine.policy_version == run.trainer.version
    assert all("mismatch_abs_logp" in m for m in updates) and any(m["mismatch_abs_logp"] > 0 for m in updates)
