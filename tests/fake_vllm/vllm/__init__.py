"""A fake of vLLM's offline API at the boundary Practicum uses (tests only; no GPU here).

``LLM(**kwargs)``, ``LLM.generate(prompts, sampling_params, use_tqdm)``,
``LLM.collective_rpc(method, args)`` (into a worker built with ``worker_extension_cls`` mixed in,
as vLLM builds it), ``LLM.reset_prefix_cache()``; ``SamplingParams``; request outputs with
``token_ids``, per-token ``logprobs`` dicts of ``Logprob``, ``text``, ``finish_reason`` and
``stop_reason``. Replies are one prompt token picked by the seed, and stop on the model's end-of-sequence
token, each with log-prob -0.5."""

from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from typing import Any

INSTANCES: list[LLM] = []


class SamplingParams:
    def __init__(self, **kw: Any) -> None:
        self.__dict__.update({"n": 1, "temperature": 1.0, "top_p": 1.0, "max_tokens": 16, "seed": None, "stop": None,
                              "logprobs": None, "skip_special_tokens": True, **kw})


@dataclass
class Logprob:
    logprob: float
    rank: int | None = None
    decoded_token: str | None = None


@dataclass
class CompletionOutput:
    index: int
    text: str
    token_ids: list[int]
    logprobs: list[dict[int, Logprob]] | None
    finish_reason: str | None
    stop_reason: int | str | None = None


@dataclass
class RequestOutput:
    prompt_token_ids: list[int]
    outputs: list[CompletionOutput] = field(default_factory=list)


class _Model:
    def __init__(self) -> None:
        self.loaded: list[list[str]] = []

    def load_weights(self, weights):
        names = [n for n, _ in weights]
        self.loaded.append(names)
        return set(names)


class _ModelRunner:
    def __init__(self) -> None:
        self.model = _Model()


class LLM:
    def __init__(self, **kwargs: Any) -> None:
        from transformers import AutoTokenizer

        self.kwargs = kwargs
        self.tokenizer = AutoTokenizer.from_pretrained(kwargs["model"])
        module, _, name = kwargs["worker_extension_cls"].rpartition(".")
        ext = getattr(importlib.import_module(module), name)
        self.worker = type("Worker", (ext,), {})()
        self.worker.model_runner = _ModelRunner()
        self.prefix_resets = 0
        self.calls: list[tuple[int, Any]] = []
        INSTANCES.append(self)

    def generate(self, prompts, sampling_params=None, use_tqdm: bool = True):
        params = sampling_params if isinstance(sampling_params, list) else [sampling_params] * len(prompts)
        out = []
        for p, sp in zip(prompts, params):
            ids = list(p["prompt_token_ids"])
            self.calls.append((len(ids), sp))
            s = sp.seed or 0  # a reply that varies with the seed: tokens picked from the prompt
            reply = [ids[((s * 2654435761) >> 7) % len(ids)]][: max(0, sp.max_tokens - 1)]
            finish = "stop"
            if len(reply) + 1 > sp.max_tokens:
                reply, finish = ids[-sp.max_tokens:], "length"
            else:
                reply = reply + [self.tokenizer.eos_token_id]
            text = self.tokenizer.decode(reply, skip_special_tokens=True)
            lps = [{t: Logprob(-0.5)} for t in reply]
            out.append(RequestOutput(ids, [CompletionOutput(0, text, reply, lps, finish, None)]))
        return out

    def collective_rpc(self, method: str, args: tuple = (), kwargs: dict | None = None):
        return [getattr(self.worker, method)(*args, **(kwargs or {}))]

    def reset_prefix_cache(self) -> bool:
        self.prefix_resets += 1
        return True
