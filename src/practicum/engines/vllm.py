"""vLLM as the generation engine (``model.engine: vllm``; the ``vllm`` extra, a GPU).

:class:`VLLMEngine` samples with vLLM's offline ``LLM`` from the token ids the rollout renders
(``TokensPrompt``), so the trained sequence is exactly what was sampled, and returns each
sampled token's log-prob (``SamplingParams(logprobs=0)``; with ``logprobs_mode:
processed_logprobs``, the default here, those of the distribution sampled from, after
temperature and top-p - what the trainer's off-policy correction and the train-vs-rollout
mismatch metric compare against).

**Weights** go in place, colocated: the trainer's state dict is handed to every vLLM worker
through ``LLM.collective_rpc`` and loaded by :class:`PracticumWorkerExtension` (vLLM's
``worker_extension_cls`` hook) with the model's own ``load_weights``; the prefix cache is reset
afterwards, so no later request reuses keys computed by older weights. Loading happens between
two ``generate`` calls (an asyncio lock), never during one.

vLLM batches each call itself; the loop's :class:`~practicum.engines.batching.BatchingEngine`
hands it every request waiting at that moment. ``tests/test_vllm_engine.py`` covers this code
path against a fake ``vllm`` module at its API boundary (no GPU here); on a GPU machine
``PRACTICUM_VLLM_GPU_TEST=1`` runs the same test against the real one.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch

from practicum.engines.base import Completion, SamplingParams
from practicum.errors import EngineFailure


class PracticumWorkerExtension:
    """Mixed into each vLLM worker (``worker_extension_cls``): loads a state dict in place."""

    def practicum_load_weights(self, named: list[tuple[str, torch.Tensor]]) -> int:
        model = self.model_runner.model  # type: ignore[attr-defined]
        model.load_weights(weights=named)
        return len(named)


class VLLMEngine:
    """The :class:`~practicum.engines.base.Engine` of a transformers checkpoint served by vLLM."""

    continuous = False

    def __init__(self, path: str | Path, dtype: torch.dtype = torch.bfloat16, options: Mapping[str, Any] | None = None,
                 seed: int = 0) -> None:
        try:
            import vllm
        except ImportError as e:
            raise EngineFailure("model.engine: vllm needs vLLM and a GPU: pip install 'practicum[vllm]'") from e
        from transformers import AutoTokenizer, GenerationConfig

        from practicum.engines.render import ChatRenderer

        self.vllm = vllm
        self.path = str(path)
        kwargs: dict[str, Any] = {"model": self.path, "dtype": str(dtype).removeprefix("torch."), "seed": seed,
                                  "enable_prefix_caching": True, "logprobs_mode": "processed_logprobs",
                                  "worker_extension_cls": f"{__name__}.PracticumWorkerExtension"}
        kwargs.update(options or {})
        self.llm = vllm.LLM(**kwargs)
        try:
            eos = GenerationConfig.from_pretrained(self.path).eos_token_id
        except OSError:
            eos = None
        self.renderer = ChatRenderer(AutoTokenizer.from_pretrained(self.path), eos)
        self.policy_version = 0
        self._lock: asyncio.Lock | None = None

    def _sampling(self, params: SamplingParams) -> Any:
        return self.vllm.SamplingParams(n=1, temperature=params.temperature, top_p=params.top_p,
                                        max_tokens=params.max_new_tokens, seed=params.seed,
                                        stop=list(params.stop) or None, logprobs=0, skip_special_tokens=True)

    def generate_sync(self, prompts: list[list[int]], params: SamplingParams) -> list[Completion]:
        from vllm.inputs import TokensPrompt

        t0 = time.perf_counter()
        sp = self._sampling(params)
        if params.seed is not None:  # the prompts of one call must not sample alike
            sp = [self.vllm.SamplingParams(**{**self._sampling_kwargs(sp), "seed": params.seed + i})
                  for i in range(len(prompts))]
        outs = self.llm.generate([TokensPrompt(prompt_token_ids=list(p)) for p in prompts], sp, use_tqdm=False)
        seconds = time.perf_counter() - t0
        result = []
        for out in outs:
            o = out.outputs[0]
            ids = list(o.token_ids)
            logps = [float(step[t].logprob) for t, step in zip(ids, o.logprobs or [])]
            if len(logps) != len(ids):
                raise EngineFailure(f"vLLM returned {len(logps)} log-probs for {len(ids)} tokens")
            finish = "length" if o.finish_reason == "length" else "stop"
            if finish == "stop" and ids and ids[-1] not in self.renderer.stop_ids and o.stop_reason is None:
                ids.append(self.renderer.stop_ids[0])  # stopped on an end-of-turn token vLLM left out
                logps.append(0.0)
            result.append(Completion(ids=ids, logprobs=logps, text=o.text, finish_reason=finish,
                                     policy_version=self.policy_version, seconds=seconds))
        return result

    @staticmethod
    def _sampling_kwargs(sp: Any) -> dict[str, Any]:
        keys = ("n", "temperature", "top_p", "max_tokens", "seed", "stop", "logprobs", "skip_special_tokens")
        return {k: getattr(sp, k) for k in keys}

    async def generate(self, prompts: list[list[int]], params: SamplingParams) -> list[Completion]:
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            return await asyncio.to_thread(self.generate_sync, prompts, params)

    def load_weights(self, state: Mapping[str, torch.Tensor], version: int) -> None:
        named = [(k, v.detach()) for k, v in state.items()]
        self.llm.collective_rpc("practicum_load_weights", args=(named,))
        self.llm.reset_prefix_cache()
        self.policy_version = version

    async def publish(self, state: Mapping[str, torch.Tensor], version: int) -> None:
        if self._lock is None:
            self._lock = asyncio.Lock()
        async with self._lock:
            await asyncio.to_thread(self.load_weights, state, version)

    async def close(self) -> None:
        return None
