"""The trainer: applies GRPO-family updates to the policy and publishes new weights.

One update is one linear function, :meth:`Trainer.update`: drop samples that carry no signal,
pack the rest into micro-batches by token budget, compute token log-probs under bf16 autocast,
the clipped surrogate (and KL to a frozen reference when asked), accumulate, clip, step.

Samples whose advantage is zero contribute exactly nothing to the policy gradient when no KL
term is used, so they are dropped before the forward pass (with GRPO, every group whose
episodes all scored alike); the loss is normalised over the samples that remain, as DAPO's
dynamic sampling does. With ``epochs == 1`` the update is fully on-policy and the "old"
log-probs equal the new ones (detached), so no extra forward pass is spent on them.

Full fine-tuning keeps fp32 master weights; LoRA (peft) trains adapters only and publishes
merged weights. Checkpoints hold the weights or adapter, the optimiser, the RNG states and
the step, written to a temporary folder and renamed into place.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from practicum import algorithms as A
from practicum.config import AlgorithmConfig, TrainerConfig
from practicum.errors import CheckpointError


@dataclass
class Sample:
    """One sequence to train on."""

    ids: list[int]  # prompt + completion (+ observations), [L]
    mask: list[int]  # 1 on tokens the policy generated, [L]
    behaviour_logprobs: list[float]  # engine log-probs on masked tokens (0 elsewhere), [L]
    advantage: float


def _dtype(name: str) -> torch.dtype:
    return {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32}[name]


class Trainer:
    def __init__(self, model_path: str | Path, cfg: TrainerConfig, algo: AlgorithmConfig, device: str = "cpu") -> None:
        from transformers import AutoModelForCausalLM

        self.cfg = cfg
        self.algo = algo
        self.device = torch.device(device)
        self.autocast_dtype = _dtype(cfg.autocast_dtype) if cfg.autocast_dtype != "none" else None
        model = AutoModelForCausalLM.from_pretrained(model_path, dtype=torch.float32).to(self.device)
        if cfg.gradient_checkpointing:
            model.gradient_checkpointing_enable()
        model.config.use_cache = False
        self.ref_model = None
        if algo.kl_coef > 0:
            self.ref_model = AutoModelForCausalLM.from_pretrained(model_path, dtype=torch.bfloat16).to(self.device)
            self.ref_model.eval().requires_grad_(False)
        if cfg.mode == "lora":
            from peft import LoraConfig, get_peft_model

            lcfg = LoraConfig(
                r=cfg.lora.r,
                lora_alpha=cfg.lora.alpha,
                lora_dropout=cfg.lora.dropout,
                target_modules=cfg.lora.target_modules,
                task_type="CAUSAL_LM",
            )
            model = get_peft_model(model, lcfg)
        self.model = model
        self.model.train()
        params = [p for p in self.model.parameters() if p.requires_grad]
        self.optimizer = torch.optim.AdamW(
            params, lr=cfg.lr, betas=(cfg.beta1, cfg.beta2), weight_decay=cfg.weight_decay, eps=1e-8
        )
        self.step = 0
        self.version = 0

    # --- the update ------------------------------------------------------------------------
    def update(self, samples: list[Sample]) -> dict[str, float]:
        t0 = time.perf_counter()
        algo = self.algo
        keep = [s for s in samples if algo.kl_coef > 0 or abs(s.advantage) > 1e-8]
        stats: dict[str, float] = {
            "samples": float(len(samples)),
            "samples_trained": float(len(keep)),
            "skipped": float(not keep),
        }
        self.step += 1
        if not keep:
            stats["train_seconds"] = time.perf_counter() - t0
            return stats
        norm = A.loss_normaliser([sum(s.mask) for s in keep], algo.aggregation, algo.max_tokens_norm)
        totals = {"loss": 0.0, "kl": 0.0, "clip_frac": 0.0, "tokens": 0.0, "logp_mismatch": 0.0}
        self.optimizer.zero_grad(set_to_none=True)
        for mb in self._micro_batches(keep):
            padded, mask, behaviour, adv = (t.to(self.device) for t in mb)
            ids = padded.clamp(min=0)  # padding becomes id 0 with attention 0 and mask 0
            attention = (padded >= 0).long()
            targets = ids[:, 1:]
            tmask = mask[:, 1:].float()  # token t is predicted at position t-1
            with self._autocast():
                logits = self.model(input_ids=ids, attention_mask=attention).logits[:, :-1]
            logp = A.token_logprobs(logits, targets)  # [B, T-1]
            del logits
            old_logp = logp.detach()  # on-policy: one update per batch of rollouts
            per_tok, clipped = A.clipped_surrogate(logp, old_logp, adv, algo.clip_low, algo.clip_high)
            if self.ref_model is not None:
                with torch.no_grad(), self._autocast():
                    ref_logits = self.ref_model(input_ids=ids, attention_mask=attention).logits[:, :-1]
                ref_logp = A.token_logprobs(ref_logits, targets)
                del ref_logits
                kl = A.kl_k3(logp, ref_logp)
                per_tok = per_tok + algo.kl_coef * kl
                totals["kl"] += float((kl.detach() * tmask).sum())
            loss = A.aggregate(per_tok, tmask, norm)
            loss.backward()
            n_tok = float(tmask.sum())
            totals["loss"] += float(loss.detach())
            totals["clip_frac"] += float((clipped * tmask).sum())
            totals["tokens"] += n_tok
            # |trainer log-prob - engine log-prob|: how far the sampler's numerics drift from ours
            totals["logp_mismatch"] += float(((logp.detach() - behaviour[:, 1:]).abs() * tmask).sum())
        params = [p for p in self.model.parameters() if p.requires_grad]
        grad_norm = torch.nn.utils.clip_grad_norm_(params, self.cfg.max_grad_norm)
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        self.version += 1
        tokens = max(totals["tokens"], 1.0)
        stats.update(
            loss=totals["loss"],
            kl=totals["kl"] / tokens,
            clip_frac=totals["clip_frac"] / tokens,
            logp_mismatch=totals["logp_mismatch"] / tokens,
            tokens_trained=totals["tokens"],
            grad_norm=float(grad_norm),
            train_seconds=time.perf_counter() - t0,
        )
        return stats

    def _autocast(self):
        if self.autocast_dtype is None:
            return torch.autocast(self.device.type, enabled=False)
        return torch.autocast(self.device.type, dtype=self.autocast_dtype)

    def _micro_batches(self, samples: list[Sample]) -> Iterator[tuple[torch.Tensor, ...]]:
        """Pack samples, sorted by length, into right-padded batches of at most
        ``micro_batch_tokens`` padded tokens. Padding ids are -1 (masked, attention 0)."""
        order = sorted(samples, key=lambda s: len(s.ids))
        budget = self.cfg.micro_batch_tokens
        batch: list[Sample] = []
        for s in order:
            width = max([len(x.ids) for x in batch] + [len(s.ids)])
            if batch and width * (len(batch) + 1) > budget:
                yield self._collate(batch)
                batch = []
            batch.append(s)
        if batch:
            yield self._collate(batch)

    @staticmethod
    def _collate(batch: list[Sample]) -> tuple[torch.Tensor, ...]:
        width = max(len(s.ids) for s in batch)
        ids = torch.full((len(batch), width), -1, dtype=torch.long)
        mask = torch.zeros((len(batch), width), dtype=torch.long)
        behaviour = torch.zeros((len(batch), width), dtype=torch.float32)
        for i, s in enumerate(batch):
            n = len(s.ids)
            ids[i, :n] = torch.tensor(s.ids)
            mask[i, :n] = torch.tensor(s.mask)
            behaviour[i, :n] = torch.tensor(s.behaviour_logprobs)
        adv = torch.tensor([s.advantage for s in batch], dtype=torch.float32)
        return ids, mask, behaviour, adv  # ids: -1 marks padding

    # --- weights for the engine ----------------------------------------------------------
    @torch.no_grad()
    def export_weights(self) -> dict[str, torch.Tensor]:
        """The policy's weights under the base model's parameter names (LoRA merged)."""
        if self.cfg.mode != "lora":
            return {k: v.detach() for k, v in self.model.state_dict().items()}
        self.model.merge_adapter()
        try:
            out = {}
            for k, v in self.model.get_base_model().state_dict().items():
                if "lora_" in k:
                    continue
                out[k.replace(".base_layer.", ".")] = v.detach().clone()
            return out
        finally:
            self.model.unmerge_adapter()

    # --- checkpoints -----------------------------------------------------------------------
    def save(self, path: Path, extra: dict) -> None:
        tmp = path.with_name(path.name + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        if self.cfg.mode == "lora":
            self.model.save_pretrained(tmp / "adapter")
        else:
            from safetensors.torch import save_model

            save_model(self.model, str(tmp / "model.safetensors"))
        torch.save(
            {
                "optimizer": self.optimizer.state_dict(),
                "rng": {
                    "python": random.getstate(),
                    "numpy": np.random.get_state(),
                    "torch": torch.get_rng_state(),
                },
            },
            tmp / "trainer_state.pt",
        )
        (tmp / "state.json").write_text(json.dumps({"step": self.step, "version": self.version, **extra}, indent=1))
        shutil.rmtree(path, ignore_errors=True)
        os.replace(tmp, path)

    def load(self, path: Path) -> dict:
        if not (path / "state.json").is_file() or not (path / "trainer_state.pt").is_file():
            raise CheckpointError(f"{path} is not a complete checkpoint (state.json or trainer_state.pt missing)")
        if self.cfg.mode == "lora":
            from peft import set_peft_model_state_dict
            from safetensors.torch import load_file

            f = path / "adapter" / "adapter_model.safetensors"
            if not f.is_file():
                raise CheckpointError(f"{path} holds no LoRA adapter; was it saved by a full fine-tune?")
            set_peft_model_state_dict(self.model, load_file(str(f)))
        else:
            from safetensors.torch import load_model

            f = path / "model.safetensors"
            if not f.is_file():
                raise CheckpointError(f"{path} holds no full weights; was it saved by a LoRA run?")
            load_model(self.model, str(f))
        st = torch.load(path / "trainer_state.pt", weights_only=False)
        self.optimizer.load_state_dict(st["optimizer"])
        random.setstate(st["rng"]["python"])
        np.random.set_state(st["rng"]["numpy"])
        torch.set_rng_state(st["rng"]["torch"])
        state = json.loads((path / "state.json").read_text())
        self.step = int(state["step"])
        self.version = int(state["version"])
        return state
