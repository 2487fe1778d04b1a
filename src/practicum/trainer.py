"""The trainer: applies GRPO-family updates to the policy and publishes new weights.

One update is one linear function, :meth:`Trainer.update`: drop samples that carry no signal,
pack the rest into micro-batches by token budget, compute token log-probs under bf16 autocast,
the clipped surrogate (and KL to a frozen reference when asked), accumulate, clip, step.

Samples whose advantage is zero contribute exactly nothing to the policy gradient when no KL
term is used, so they are dropped before the forward pass (with GRPO, every group whose
episodes all scored alike); the loss is normalised over the samples that remain, as DAPO's
dynamic sampling does. There is one update per batch of rollouts, so the "old" (proximal)
log-probs equal the new ones (detached) and no extra forward pass is spent on them.

The samples were drawn by the engine, not by this policy: in bf16, and under the asynchronous
orchestrator up to ``async.max_staleness`` versions ago. Each carries the engine's log-probs of its
tokens (the behaviour policy); ``algorithm.off_policy`` chooses how the loss corrects for the gap
(see :data:`practicum.algorithms.SURROGATES`), and the gap itself is reported on every update
(``mismatch_abs_logp``, ``mismatch_kl``, ``is_truncated_frac``) whatever the correction.

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
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from practicum import algorithms as A
from practicum.config import AlgorithmConfig, TrainerConfig
from practicum.errors import CheckpointError
from practicum.hardware import resolve_autocast


@dataclass
class Sample:
    """One sequence to train on."""

    ids: list[int]  # prompt + completion (+ observations), [L]
    mask: list[int]  # 1 on tokens the policy generated, [L]
    behaviour_logprobs: list[float]  # engine log-probs on masked tokens (0 elsewhere), [L]
    advantage: float
    # a guided scaffold's helped episode: the engine sampled it with help the trained context lacks, so
    # its log-probs are of another context, no proposal to correct from: trained as the policy's own
    guided: bool = False
    domain: str = ""  # its task's domain: gradient surgery (trainer.gradient_surgery) treats each as a task
    entropy_coef: float | None = None  # its domain's own entropy bonus weight (None: algorithm.entropy_coef)

    def entropy_weight(self, default: float) -> float:
        """Its entropy bonus weight: its domain's own, else ``default`` (algorithm.entropy_coef)."""
        return default if self.entropy_coef is None else self.entropy_coef


def new_totals() -> dict[str, float]:
    """An update's running sums, which ``Trainer._accumulate`` adds each micro-batch to."""
    return {"loss": 0.0, "kl": 0.0, "entropy": 0.0, "clip_frac": 0.0, "tokens": 0.0,
            "mismatch_abs_logp": 0.0, "mismatch_kl": 0.0, "is_truncated": 0.0}


def _prefix_len(s: Sample) -> int:
    """Length of the sample's leading context (mask 0): its first prompt."""
    for i, m in enumerate(s.mask):
        if m:
            return i
    return len(s.mask)


@dataclass
class PackedBatch:
    """A micro-batch of prompt-sharing rows.

    ids, positions: [R, L]; attention: [R, 1, L, L] bool (True = may attend);
    pred_index: [S, T] flat index (row * L + position) of the logits that predict each of
    sample s's continuation tokens; targets, mask, behaviour: [S, T]; advantages, guided,
    entropy_coefs (each sample's entropy bonus weight): [S].
    """

    ids: torch.Tensor
    positions: torch.Tensor
    attention: torch.Tensor
    pred_index: torch.Tensor
    targets: torch.Tensor
    mask: torch.Tensor
    behaviour: torch.Tensor
    advantages: torch.Tensor
    guided: torch.Tensor
    entropy_coefs: torch.Tensor

    def to(self, device: torch.device) -> PackedBatch:
        return PackedBatch(*(getattr(self, f).to(device) for f in self.__dataclass_fields__))

    @staticmethod
    def build(rows: list[tuple[list[int], list[Sample]]], entropy_coef: float = 0.0) -> PackedBatch:
        """Pack ``rows`` (a shared prefix and the samples that continue it); ``entropy_coef`` is the
        bonus weight of a sample that names none of its own."""
        lengths = [len(p) + sum(len(m.ids) - len(p) for m in ms) for p, ms in rows]
        R, L = len(rows), max(lengths)
        samples = [m for _, ms in rows for m in ms]
        T = max(len(m.ids) - len(p) for p, ms in rows for m in ms)
        ids = torch.zeros((R, L), dtype=torch.long)
        positions = torch.zeros((R, L), dtype=torch.long)
        # padding positions attend to themselves only, so no softmax row is empty (NaN)
        attention = torch.eye(L, dtype=torch.bool).repeat(R, 1, 1, 1)
        pred_index = torch.zeros((len(samples), T), dtype=torch.long)
        targets = torch.zeros((len(samples), T), dtype=torch.long)
        mask = torch.zeros((len(samples), T), dtype=torch.float32)
        behaviour = torch.zeros((len(samples), T), dtype=torch.float32)
        s_i = 0
        for r, (prefix, members) in enumerate(rows):
            p = len(prefix)
            ids[r, :p] = torch.tensor(prefix)
            positions[r, :p] = torch.arange(p)
            attention[r, 0, :p, :p] = torch.tril(torch.ones(p, p, dtype=torch.bool))
            start = p
            for m in members:
                n = len(m.ids) - p
                end = start + n
                ids[r, start:end] = torch.tensor(m.ids[p:])
                positions[r, start:end] = torch.arange(p, p + n)
                attention[r, 0, start:end, :p] = True
                attention[r, 0, start:end, start:end] = torch.tril(torch.ones(n, n, dtype=torch.bool))
                # token k of the continuation is predicted by the previous token of the same
                # sequence: the prompt's last token for k = 0, else the continuation's k - 1
                prev = torch.cat([torch.tensor([p - 1]), torch.arange(start, end - 1)])
                pred_index[s_i, :n] = r * L + prev
                targets[s_i, :n] = torch.tensor(m.ids[p:])
                mask[s_i, :n] = torch.tensor(m.mask[p:], dtype=torch.float32)
                behaviour[s_i, :n] = torch.tensor(m.behaviour_logprobs[p:], dtype=torch.float32)
                start = end
                s_i += 1
        advantages = torch.tensor([m.advantage for m in samples], dtype=torch.float32)
        guided = torch.tensor([m.guided for m in samples], dtype=torch.bool)
        coefs = torch.tensor([m.entropy_weight(entropy_coef) for m in samples], dtype=torch.float32)
        return PackedBatch(ids, positions, attention, pred_index, targets, mask, behaviour, advantages, guided, coefs)


class Trainer:
    def __init__(self, model_path: str | Path, cfg: TrainerConfig, algo: AlgorithmConfig, device: str = "cpu") -> None:
        from practicum.models import load_causal_lm

        self.cfg = cfg
        self.algo = algo
        self.device = torch.device(device)
        self.autocast_dtype = resolve_autocast(cfg.autocast_dtype, self.device)
        model = load_causal_lm(model_path, torch.float32, self.device)
        if cfg.gradient_checkpointing:
            model.gradient_checkpointing_enable()
        model.config.use_cache = False
        self.ref_model = None
        if algo.kl_coef > 0:
            self.ref_model = load_causal_lm(model_path, torch.bfloat16, self.device)
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
        self.set_progress(0.0)

    def set_progress(self, progress: float) -> None:
        """Set the learning rate for a run ``progress`` (0 to 1) of the way through: the peak
        ``trainer.lr`` times :func:`~practicum.algorithms.lr_factor` under the config's schedule."""
        c = self.cfg
        self.lr = c.lr * A.lr_factor(progress, c.lr_schedule, c.warmup_fraction, c.decay_fraction, c.min_lr_ratio)
        for group in self.optimizer.param_groups:
            group["lr"] = self.lr

    # --- the update ------------------------------------------------------------------------
    def update(self, samples: list[Sample], temperature: float = 1.0, progress: float | None = None,
               per_domain: bool = False) -> dict[str, float]:
        """One GRPO update (``per_domain``: one optimizer step per domain of the batch, see below).
        ``temperature`` is the rollouts' sampling temperature: the policy being optimised is the
        tempered one, so its log-probs are computed at that temperature, as the engine's behaviour
        log-probs are (with top_p < 1 the engine's are of the nucleus, renormalised, which the
        trainer does not model: the mismatch metrics then include it).
        ``progress``: how far the run is when the step begins (0 to 1), which sets the learning
        rate under ``trainer.lr_schedule``; None keeps the last one set (the schedule's start at first).

        Returns the step's statistics; over the trained tokens: ``mismatch_abs_logp`` (mean
        |log pi_train - log pi_behaviour|), ``mismatch_kl`` (k3 estimate of
        KL(pi_behaviour || pi_train)), ``is_truncated_frac`` (share of tokens whose weight
        pi_train / pi_behaviour exceeds ``algorithm.weight_cap``). A ``guided`` sample is trained as
        the policy's own under every correction (weight 1) and its tokens count with no gap.

        ``per_domain`` (``curriculum.mixing.updates: per_domain``): each domain's samples make an
        optimizer step of their own - their loss normalised over their own tokens, their gradient
        clipped on its own - one domain after another, in an order that rotates by step. A joint
        update clips the sum: when every update is clipped, the domains of a mixed batch share one
        step's length, so each moves a fraction of what a run of that domain alone moves per step.
        The later domains' samples were drawn by the weights before the earlier domains' steps:
        under ``off_policy: none`` they are taken as the current policy's, as a joint update takes
        all of them; ``tis`` and ``decoupled`` weigh that gap as any other. With one domain it is
        the joint update. Stats: ``{domain}/grad_norm`` each domain's norm before clipping,
        ``grad_norm`` their mean, ``loss`` the mean of the domains' losses."""
        t0 = time.perf_counter()
        algo = self.algo
        # a sample whose advantage is 0 has no policy gradient: it is skipped, unless a term without
        # the advantage (the KL penalty, or the entropy bonus when asked) still gives it one
        keep = [s for s in samples if any(s.mask) and (abs(s.advantage) > A.NO_SIGNAL or algo.kl_coef > 0
                                                       or (algo.entropy_all_samples and s.entropy_weight(algo.entropy_coef) > 0))]
        stats: dict[str, float] = {
            "samples": float(len(samples)),
            "samples_trained": float(len(keep)),
            "skipped": float(not keep),
        }
        self.step += 1
        if progress is not None:
            self.set_progress(progress)
        stats["lr"] = self.lr
        if not keep:
            stats["train_seconds"] = time.perf_counter() - t0
            return stats
        norm = A.loss_normaliser([sum(s.mask) for s in keep], algo.aggregation, algo.max_tokens_norm)
        surrogate = A.SURROGATES[algo.off_policy]
        totals = new_totals()
        self.optimizer.zero_grad(set_to_none=True)
        params = [p for p in self.model.parameters() if p.requires_grad]
        by_domain: dict[str, list[Sample]] = {}
        for s in keep:
            by_domain.setdefault(s.domain, []).append(s)
        if per_domain and self.cfg.gradient_surgery != "none":
            raise ValueError("per-domain updates leave no domains in one update for gradient surgery to meet")
        split = per_domain and len(by_domain) > 1
        if self.cfg.gradient_surgery == "pcgrad" and len(by_domain) > 1:
            # one gradient per domain (the batch's normaliser, so they sum to the plain gradient), then PCGrad
            flats = []
            for members in by_domain.values():
                self._accumulate(members, norm, surrogate, temperature, totals)
                flats.append(torch.cat([(p.grad if p.grad is not None else torch.zeros_like(p)).reshape(-1)
                                        for p in params]))
                self.optimizer.zero_grad(set_to_none=True)
            surgery = A.pcgrad(flats, random)
            offset = 0
            for p in params:
                n = p.numel()
                p.grad = surgery.grad[offset:offset + n].view_as(p)
                offset += n
            stats.update(grad_conflicts=surgery.conflicts / surgery.pairs, grad_cosine_min=surgery.min_cosine)
        elif split:  # one optimizer step per domain
            names = sorted(by_domain)
            turn = self.step % len(names)
            norms = []
            for d in names[turn:] + names[:turn]:
                members = by_domain[d]
                own = A.loss_normaliser([sum(s.mask) for s in members], algo.aggregation, algo.max_tokens_norm)
                self._accumulate(members, own, surrogate, temperature, totals)
                norms.append(float(torch.nn.utils.clip_grad_norm_(params, self.cfg.max_grad_norm)))
                stats[f"{d}/grad_norm"] = norms[-1]
                self.optimizer.step()
                self.optimizer.zero_grad(set_to_none=True)
            totals["loss"] /= len(names)
            grad_norm = sum(norms) / len(norms)
        else:
            self._accumulate(keep, norm, surrogate, temperature, totals)
        if not split:
            grad_norm = torch.nn.utils.clip_grad_norm_(params, self.cfg.max_grad_norm)
            self.optimizer.step()
            self.optimizer.zero_grad(set_to_none=True)
        self.version += 1
        tokens = max(totals["tokens"], 1.0)
        stats.update(
            loss=totals["loss"],
            kl=totals["kl"] / tokens,
            entropy=totals["entropy"] / tokens,
            clip_frac=totals["clip_frac"] / tokens,
            mismatch_abs_logp=totals["mismatch_abs_logp"] / tokens,
            mismatch_kl=totals["mismatch_kl"] / tokens,
            is_truncated_frac=totals["is_truncated"] / tokens,
            # the old name of mismatch_abs_logp, still read by tests/test_hf_engine.py and
            # tests/test_embedded_model.py
            logp_mismatch=totals["mismatch_abs_logp"] / tokens,
            tokens_trained=totals["tokens"],
            grad_norm=float(grad_norm),
            train_seconds=time.perf_counter() - t0,
        )
        return stats

    def _accumulate(self, samples: list[Sample], norm: A.Normaliser, surrogate: Callable, temperature: float,
                    totals: dict[str, float]) -> None:
        """Forward and backward over ``samples`` in micro-batches, adding to the parameters' gradients
        and to ``totals``."""
        algo = self.algo
        for mb in self._micro_batches(samples):
            mb = mb.to(self.device)
            tmask = mb.mask
            # the exact entropy (a softmax over the vocabulary, ~2.5x the log-probs' cost) only for the bonus,
            # from the full logits; without it the log-probs are taken a chunk of positions at a time
            bonus = bool((mb.entropy_coefs > 0).any())
            entropy = None
            if bonus:
                logits = self._logits(self.model, mb, temperature)  # [S, T, V]
                logp = A.token_logprobs(logits, mb.targets)  # [S, T]
                entropy = A.token_entropy(logits)  # [S, T]
                del logits
            else:
                logp = self._token_logprobs(self.model, mb, temperature)  # [S, T]
            # the proximal ("old") policy is the current one: one update per batch of rollouts, so
            # no second forward pass; the behaviour policy is the engine's, possibly stale
            prox_logp = logp.detach()
            # a guided sample's behaviour is taken to be the policy itself (weight 1, no mismatch): its
            # engine log-probs are of the helped context, and pi_plain / pi_helped would all but cancel
            # the update on the very tokens the help is there to teach
            behaviour = torch.where(mb.guided[:, None], prox_logp, mb.behaviour)
            per_tok, clipped = surrogate(logp, prox_logp, behaviour, mb.advantages,
                                         algo.clip_low, algo.clip_high, algo.weight_cap)
            if self.ref_model is not None:
                with torch.no_grad():
                    ref_logp = self._token_logprobs(self.ref_model, mb, temperature)
                kl = A.kl_k3(logp, ref_logp)
                per_tok = per_tok + algo.kl_coef * kl
                totals["kl"] += float((kl.detach() * tmask).sum())
            if entropy is not None:
                per_tok = per_tok - mb.entropy_coefs[:, None] * entropy
            # logged: -log pi of the sampled tokens, which the policy drew, so its mean estimates the
            # entropy without bias (on-policy) at no extra cost
            totals["entropy"] += float((-prox_logp * tmask).sum())
            loss = A.aggregate(per_tok, tmask, norm)
            loss.backward()
            n_tok = float(tmask.sum())
            totals["loss"] += float(loss.detach())
            totals["clip_frac"] += float((clipped * tmask).sum())
            totals["tokens"] += n_tok
            # how far the sampler (bf16 numerics, older weights) is from the policy being trained
            gap = A.mismatch(prox_logp, behaviour, tmask, algo.weight_cap)
            totals["mismatch_abs_logp"] += float(gap.abs_logp)
            totals["mismatch_kl"] += float(gap.kl)
            totals["is_truncated"] += float(gap.truncated)

    def _token_logprobs(self, model: torch.nn.Module, mb: PackedBatch, temperature: float = 1.0) -> torch.Tensor:
        """Log-probs [S, T] of the continuation tokens. Under ``trainer.logits_chunk`` only the
        trained ones (mask 1; 0 elsewhere, where every use of them is masked), ``logits_chunk``
        positions' logits at a time (:func:`~practicum.algorithms.chunked_token_logprobs`); with 0,
        or a vocabulary projection that is not a plain bias-free linear layer (an adapter on it),
        from the full logits of :meth:`_logits`."""
        core = self._core(model)
        head = core.lm_head
        if self.cfg.logits_chunk <= 0 or type(head) is not torch.nn.Linear or head.bias is not None:
            return A.token_logprobs(self._logits(model, mb, temperature), mb.targets)
        hidden = self._hidden(core, mb)
        trained = mb.mask > 0  # [S, T]
        picked = hidden.reshape(-1, hidden.shape[-1])[mb.pred_index[trained]]  # [N, H]
        dtype = self.autocast_dtype if self.autocast_dtype is not None else head.weight.dtype
        logp = A.chunked_token_logprobs(picked, head.weight, mb.targets[trained],
                                        temperature if temperature > 0 else 1.0, self.cfg.logits_chunk, dtype)
        return torch.zeros(mb.targets.shape, dtype=logp.dtype, device=logp.device).masked_scatter(trained, logp)

    def _logits(self, model: torch.nn.Module, mb: PackedBatch, temperature: float = 1.0) -> torch.Tensor:
        """Logits [S, T, V] at the positions that predict a continuation token, divided by the
        sampling temperature. The vocabulary projection is applied only there, not at every
        prompt position: it is a fifth of the model's FLOPs and its [positions, V] output
        dominates activation memory."""
        core = self._core(model)
        hidden = self._hidden(core, mb)
        with self._autocast():
            picked = hidden.reshape(-1, hidden.shape[-1])[mb.pred_index]  # [S, T, H]
            logits = core.lm_head(picked)  # [S, T, V]
        if temperature > 0 and temperature != 1.0:
            logits = logits / temperature
        return logits

    @staticmethod
    def _core(model: torch.nn.Module) -> torch.nn.Module:
        """The causal LM under any adapter (its ``model`` and ``lm_head``)."""
        return model.get_base_model() if hasattr(model, "get_base_model") else model

    def _hidden(self, core: torch.nn.Module, mb: PackedBatch) -> torch.Tensor:
        """The last hidden states [R, L, H] of the micro-batch's rows."""
        with self._autocast():
            return core.model(input_ids=mb.ids, attention_mask=mb.attention, position_ids=mb.positions).last_hidden_state

    def _autocast(self):
        if self.autocast_dtype is None:
            return torch.autocast(self.device.type, enabled=False)
        return torch.autocast(self.device.type, dtype=self.autocast_dtype)

    def _micro_batches(self, samples: list[Sample]) -> Iterator[PackedBatch]:
        """Pack samples into micro-batches of at most ``micro_batch_tokens`` tokens.

        Samples that share a prompt (a GRPO group) are packed into one row: the prompt once,
        then each sample's continuation, with a 4D attention mask that lets each continuation
        see the prompt and itself only. The prompt is computed once instead of n times and the
        gradient is exactly that of n separate rows.
        """
        families: dict[tuple[int, ...], list[Sample]] = {}
        for s in samples:
            families.setdefault(tuple(s.ids[: _prefix_len(s)]), []).append(s)
        rows: list[tuple[list[int], list[Sample]]] = []
        budget = self.cfg.micro_batch_tokens
        for prefix, members in families.items():
            chunk: list[Sample] = []
            size = len(prefix)
            for m in members:
                extra = len(m.ids) - len(prefix)
                if chunk and size + extra > budget:
                    rows.append((list(prefix), chunk))
                    chunk, size = [], len(prefix)
                chunk.append(m)
                size += extra
            rows.append((list(prefix), chunk))
        rows.sort(key=lambda r: len(r[0]) + sum(len(m.ids) - len(r[0]) for m in r[1]))
        batch: list[tuple[list[int], list[Sample]]] = []
        width = 0
        for r in rows:
            length = len(r[0]) + sum(len(m.ids) - len(r[0]) for m in r[1])
            if batch and max(width, length) * (len(batch) + 1) > budget:
                yield PackedBatch.build(batch, self.algo.entropy_coef)
                batch, width = [], 0
            batch.append(r)
            width = max(width, length)
        if batch:
            yield PackedBatch.build(batch, self.algo.entropy_coef)

    # --- weights for the engine ----------------------------------------------------------
    @torch.no_grad()
    def export_weights(self) -> dict[str, torch.Tensor]:
        """The policy's weights under the base model's parameter names (LoRA merged)."""
        if self.cfg.mode != "lora":
            return {k: v.detach() for k, v in self.model.state_dict().items()}
        # Merged out of place: peft's merge_adapter/unmerge_adapter add and subtract the delta
        # in place, which drifts the base weights by rounding at every export (a resumed run,
        # whose base comes fresh from disk, would then train differently).
        from peft.tuners.lora import LoraLayer

        deltas = {}
        for name, module in self.model.get_base_model().named_modules():
            if isinstance(module, LoraLayer):
                for adapter in module.active_adapters:
                    if adapter in module.lora_A:
                        d = module.get_delta_weight(adapter).detach()
                        key = f"{name}.base_layer.weight"
                        deltas[key] = deltas[key] + d if key in deltas else d
        out = {}
        for k, v in self.model.get_base_model().state_dict().items():
            if "lora_" in k:
                continue
            w = v.detach()
            out[k.replace(".base_layer.", ".")] = w + deltas[k].to(w.dtype) if k in deltas else w.clone()
        return out

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
        self.lr = float(self.optimizer.param_groups[0]["lr"])  # the schedule's value when it was saved
        random.setstate(st["rng"]["python"])
        np.random.set_state(st["rng"]["numpy"])
        torch.set_rng_state(st["rng"]["torch"])
        state = json.loads((path / "state.json").read_text())
        self.step = int(state["step"])
        self.version = int(state["version"])
        return state
