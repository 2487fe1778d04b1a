"""In-process transformers engine: batched sampling with a KV cache on CPU or GPU.

The engine keeps its own copy of the weights in the generation dtype (bf16 on CPU is about
twice as fast as fp32 for the embedded model), separate from the trainer's fp32 master
weights; :meth:`HFEngine.load_weights` copies new weights in place after each update.
Prompts are left-padded into one batch; the per-token log-probabilities are those of the
distribution actually sampled from (after temperature and top-p).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from pathlib import Path

import torch

from practicum.engines.base import Completion, SamplingParams
from practicum.records import Message


def _sampling_logprobs(logits: torch.Tensor, params: SamplingParams) -> torch.Tensor:
    """Log-probs of the distribution sampled from: temperature, then nucleus (top-p).
    logits [B, V] float32 -> [B, V] (tokens outside the nucleus get -inf)."""
    if params.temperature <= 0:
        return torch.log_softmax(logits, dim=-1)
    logits = logits / params.temperature
    if params.top_p < 1.0:
        sorted_logits, idx = torch.sort(logits, dim=-1, descending=True)
        probs = torch.softmax(sorted_logits, dim=-1)
        # drop a token when the tokens ranked above it already cover top_p of the mass
        drop = (probs.cumsum(-1) - probs) >= params.top_p
        sorted_logits = sorted_logits.masked_fill(drop, float("-inf"))
        logits = torch.full_like(logits, float("-inf")).scatter(-1, idx, sorted_logits)
    return torch.log_softmax(logits, dim=-1)


def _as_dicts(messages: list[Message]) -> list[dict[str, str]]:
    return [{"role": m.role, "content": m.content} for m in messages]


class HFEngine:
    def __init__(
        self,
        path: str | Path,
        dtype: torch.dtype = torch.bfloat16,
        device: str = "cpu",
        max_batch: int = 64,
    ) -> None:
        from transformers import AutoModelForCausalLM, AutoTokenizer

        self.path = Path(path)
        self.device = torch.device(device)
        self.dtype = dtype
        self.max_batch = max_batch
        self.tokenizer = AutoTokenizer.from_pretrained(self.path)
        self.tokenizer.padding_side = "left"
        if self.tokenizer.pad_token_id is None:
            self.tokenizer.pad_token = self.tokenizer.eos_token
        self.model = AutoModelForCausalLM.from_pretrained(self.path, dtype=dtype).to(self.device)
        self.model.eval()
        self.model.requires_grad_(False)
        self.policy_version = 0
        self._lock = asyncio.Lock()  # one generate at a time on one model

    # --- chat rendering -------------------------------------------------------------------
    @property
    def supports_tools(self) -> bool:
        """Whether the model's chat template renders tool schemas itself."""
        return "tools" in (self.tokenizer.chat_template or "")

    def chat_ids(self, messages: list[Message], tools: list[dict] | None = None) -> list[int]:
        text = self.tokenizer.apply_chat_template(_as_dicts(messages), tokenize=False, add_generation_prompt=True,
                                                  **({"tools": tools} if tools else {}))
        return list(self.tokenizer(text, add_special_tokens=False).input_ids)

    def append_ids(self, messages: list[Message], new: list[Message], context_ids: list[int] | None = None,
                   tools: list[dict] | None = None) -> list[int]:
        """Ids that extend a conversation by ``new`` messages and the assistant cue.

        Earlier ids are never re-tokenised: the longer conversation is rendered as text and only
        the part beyond what the context already holds is tokenised. ``context_ids`` (the ids the
        model actually saw and generated) make this exact where the template adds text after a
        reply's end-of-turn token (ChatML's newline after ``<|im_end|>``), and close a reply that
        was cut off at the token limit.
        """
        extra = {"tools": tools} if tools else {}
        after = self.tokenizer.apply_chat_template(
            _as_dicts(messages + new), tokenize=False, add_generation_prompt=True, **extra
        )
        if context_ids is not None:
            held = self.tokenizer.decode(context_ids, skip_special_tokens=False)
            if after.startswith(held):
                return list(self.tokenizer(after[len(held):], add_special_tokens=False).input_ids)
        before = self.tokenizer.apply_chat_template(_as_dicts(messages), tokenize=False, **extra)
        if not after.startswith(before):
            raise ValueError("chat template does not render conversations append-only")
        return list(self.tokenizer(after[len(before):], add_special_tokens=False).input_ids)

    def decode(self, ids: list[int]) -> str:
        return self.tokenizer.decode(ids, skip_special_tokens=True)

    @property
    def stop_token_ids(self) -> list[int]:
        ids = self.model.generation_config.eos_token_id
        ids = [ids] if isinstance(ids, int) else list(ids or [])
        if self.tokenizer.eos_token_id is not None and self.tokenizer.eos_token_id not in ids:
            ids.append(self.tokenizer.eos_token_id)
        return ids

    # --- generation ------------------------------------------------------------------------
    async def generate(self, prompts: list[list[int]], params: SamplingParams) -> list[Completion]:
        async with self._lock:
            # Generation is CPU-bound torch work; run it off the event loop so sandboxes and
            # tools of other episodes keep progressing.
            return await asyncio.to_thread(self.generate_sync, prompts, params)

    @torch.inference_mode()
    def generate_sync(self, prompts: list[list[int]], params: SamplingParams) -> list[Completion]:
        # Sort by length so that each chunk pads little; restore the order at the end.
        order = sorted(range(len(prompts)), key=lambda i: len(prompts[i]))
        results: dict[int, Completion] = {}
        for start in range(0, len(order), self.max_batch):
            idx = order[start:start + self.max_batch]
            for i, c in zip(idx, self._generate_chunk([prompts[i] for i in idx], params, start)):
                results[i] = c
        return [results[i] for i in range(len(prompts))]

    def _generate_chunk(self, prompts: list[list[int]], params: SamplingParams, offset: int) -> list[Completion]:
        """Decode one left-padded batch with a KV cache. Rows that finish leave the batch (their
        cache rows are dropped), so a few long replies do not make every row pay for them: with
        sampled replies of very different lengths this roughly halves decode time."""
        from transformers import DynamicCache

        t0 = time.perf_counter()
        pad = self.tokenizer.pad_token_id
        batch = len(prompts)
        # A GRPO batch repeats each prompt n times: prefill each distinct prompt once and
        # copy its KV-cache rows, which cuts prefill work by the group size.
        uniq: dict[tuple[int, ...], int] = {}
        row_of = [uniq.setdefault(tuple(p), len(uniq)) for p in prompts]
        distinct = [list(p) for p in uniq]
        width = max(len(p) for p in distinct)
        input_ids = torch.full((len(distinct), width), pad, dtype=torch.long)
        attention = torch.zeros((len(distinct), width), dtype=torch.long)
        for row, p in enumerate(distinct):
            input_ids[row, width - len(p):] = torch.tensor(p, dtype=torch.long)
            attention[row, width - len(p):] = 1
        input_ids, attention = input_ids.to(self.device), attention.to(self.device)
        positions = (attention.cumsum(-1) - 1).clamp(min=0)  # [U, W]
        gen = None
        if params.temperature > 0:
            gen = torch.Generator(device=self.device)
            base = params.seed if params.seed is not None else int(torch.randint(0, 2**31 - 1, ()).item())
            gen.manual_seed(base + offset)
        stops = torch.tensor(self.stop_token_ids, device=self.device)
        out_ids: list[list[int]] = [[] for _ in range(batch)]
        out_logp: list[list[float]] = [[] for _ in range(batch)]
        finish = ["length"] * batch
        alive = torch.arange(batch, device=self.device)  # original row of each live row
        cache = DynamicCache()
        logits = self.model(input_ids=input_ids, attention_mask=attention, position_ids=positions,
                            cache=cache, use_cache=True).logits[:, -1, :]
        expand = torch.tensor(row_of, device=self.device)
        if len(distinct) < batch:
            cache.batch_select_indices(expand)
        logits, attention, positions = logits[expand], attention[expand], positions[expand]
        next_pos = positions[:, -1] + 1  # [B_alive]
        for t in range(params.max_new_tokens):
            logp = _sampling_logprobs(logits.float(), params)  # [B_alive, V]
            if gen is None:
                tok = logp.argmax(-1)
            else:
                tok = torch.multinomial(logp.exp(), 1, generator=gen).squeeze(-1)
            tok_logp = logp.gather(-1, tok.unsqueeze(-1)).squeeze(-1)
            done = torch.isin(tok, stops)
            for r, tk, lp, d in zip(alive.tolist(), tok.tolist(), tok_logp.tolist(), done.tolist()):
                out_ids[r].append(tk)
                out_logp[r].append(lp)
                if d:
                    finish[r] = "stop"
                elif params.stop and self._hits_stop(out_ids[r], params.stop):
                    finish[r] = "stop"
                    done[alive.tolist().index(r)] = True
            if t + 1 == params.max_new_tokens or bool(done.all()):
                break
            if bool(done.any()):
                keep = (~done).nonzero().squeeze(-1)
                cache.batch_select_indices(keep)
                alive, tok, attention, next_pos = alive[keep], tok[keep], attention[keep], next_pos[keep]
            attention = torch.cat([attention, torch.ones_like(attention[:, :1])], dim=1)
            logits = self.model(input_ids=tok.unsqueeze(-1), attention_mask=attention,
                                position_ids=next_pos.unsqueeze(-1), cache=cache,
                                use_cache=True).logits[:, -1, :]
            next_pos = next_pos + 1
        seconds = time.perf_counter() - t0
        return [
            Completion(ids=out_ids[r], logprobs=out_logp[r], text=self.decode(out_ids[r]),
                       finish_reason=finish[r], policy_version=self.policy_version, seconds=seconds)  # type: ignore[arg-type]
            for r in range(batch)
        ]

    def _hits_stop(self, ids: list[int], stop: tuple[str, ...]) -> bool:
        tail = self.tokenizer.decode(ids[-8:], skip_special_tokens=True)
        return any(s in tail for s in stop)

    # --- weights ---------------------------------------------------------------------------
    @torch.no_grad()
    def load_weights(self, state: Mapping[str, torch.Tensor], version: int) -> None:
        own = self.model.state_dict()
        for name, value in state.items():
            if name not in own:
                raise KeyError(f"engine has no parameter {name!r}")
            own[name].copy_(value)
        self.policy_version = version
