"""In-process transformers engine: continuous batching with a KV cache on CPU or GPU.

The engine keeps its own copy of the weights in the generation dtype (bf16 on CPU is about
twice as fast as fp32 for the embedded model), separate from the trainer's fp32 master
weights; :meth:`HFEngine.load_weights` copies new weights in place after each update. Chat
rendering is the engine's ``renderer``, a :class:`~practicum.engines.render.ChatRenderer` over
the checkpoint's tokenizer.

**Continuous batching.** :meth:`HFEngine.submit` (one request) and :meth:`HFEngine.generate`
(n requests submitted together) hand requests to one decode thread that owns the running
batch. Between two decode steps it admits waiting requests (at most ``max_batch`` rows decode
at once): it prefills them - each distinct prompt once, its KV-cache rows copied for repeats
(a group's first turn) - and merges their cache rows into the running ``DynamicCache``,
left-padding whichever side is shorter along the sequence axis, with the attention mask
extended to match; positions stay per row. A request leaves the batch, and its caller gets its
:class:`Completion`, as soon as it ends (its stop token, stop string or ``max_new_tokens``),
and padding columns no remaining row needs are dropped.

**Admission inside a decode step.** While a batch is running, newcomers are not prefilled in a
forward pass of their own: their prompts ride in the next decode step's forward pass, packed
after the running rows' tokens into one sequence, so every linear layer runs once over all of
them (on a CPU most of a small model's step is reading its weights, whatever the number of
tokens), and attention is computed per part through transformers' attention interface
(:class:`_FoldedStep`). Measured on 2 cores, 16 concurrent requests: an admission folded in
costs ~40 ms more than a plain step, against ~110 ms for a prefill of its own. Models with
sliding-window or other non-full attention layers keep the separate prefill.

**The decode thread is the engine's only long-lived torch thread**: the model is loaded in a
thread that then ends (:func:`~practicum.hardware.in_own_thread` says why it matters), and the
rest of the process's torch work can run on it between two decode steps (:meth:`HFEngine.run_job`:
a training run's trainer on CPU).

**Sampling.** Each request samples with its own settings (temperature, top-p, stop strings,
length) and its own ``torch.Generator``, by inverse CDF over the distribution it samples from:
its tokens depend only on its seed and its logits, not on what else is in the batch. Its seed
is derived from ``params.seed``, its prompt ids and n, the number of earlier requests with the
same seed and prompt (the index within the call for :meth:`generate`; a count kept by the
engine for :meth:`submit`), so the episodes of a group that share a seed still sample
differently. Without ``params.seed`` the seed is drawn from torch's global RNG (so
``torch.manual_seed`` makes a run reproducible). Log-probs are those of the distribution
actually sampled from (after temperature and top-p). Whether a request ran alone or joined
others changes its logits only by floating-point rounding (batch shape, padding length).

**Shared beginnings.** Prompts admitted together that begin alike (system prompt, tool schemas,
worked examples: at least ``MIN_SHARED_PREFIX`` tokens) prefill that beginning once; its cache
rows are copied and each prompt's own part follows, left-padded after it.

Prompts admitted together that begin alike in *families* (a mix of domains: one system prompt,
then each domain's own worked examples) are prefilled family by family, each family's beginning
once, and the families' rows merged, where that computes fewer tokens than one left-padded
prefill of every distinct prompt (:func:`_prefill_clusters`).

**The KV cache grows in place.** transformers' ``DynamicLayer`` appends a decode step's keys and
values with ``torch.cat``, a copy of the layer's whole cache per token; the engine's layers
(:func:`_roomy_layer`) keep ``kv_room`` spare columns and write into them, one copy per
``kv_room`` tokens.

**Prefix cache across turns.** A multi-turn episode's next request is its previous context, the
reply and an observation: without a cache every turn prefills the whole conversation again
(with tools and worked examples in the prompt, most of a turn's compute). When a row ends, its
KV-cache rows (the prompt and every generated token but the last, whose keys were never
computed) are kept under its token ids, up to ``prefix_cache_mb``, when its request says the
conversation may go on (``SamplingParams.keep_prefix``: the rollout sets it on every turn but
an episode's last); a new request whose ids
extend a kept entry takes it (the entry leaves the cache) and prefills only the new tokens. The
kept entries are dropped whenever weights change, so a later turn never reuses keys computed
by an older policy. Entries are evicted oldest first.

**Shared beginnings across requests.** Requests that arrive at different times but begin alike
(every chat request with the same system prompt and tool schemas; each new question of a
benchmark with the same worked examples) reuse one computed beginning: every fresh prefill
keeps its prompt's KV-cache rows in whole blocks of ``BLOCK`` tokens (all but the last token),
indexed by a chained digest of each block, up to ``beginning_cache_mb``, oldest evicted first; a
new request looks up its longest stored run of blocks and prefills only the rest. Like the
prefix cache it is emptied whenever weights change, and the stored rows are never written to
(the forward pass concatenates onto them, leaving them as they were).

**Weights** are published between decode steps, never during one: :meth:`load_weights` from
another thread waits for the step in progress to end. A request decoding across an update
keeps its KV cache and continues under the new weights; its per-token log-probs are still
those it was sampled from, and ``policy_version`` is the version it started under
(``extra["policy_version_last"]`` the one it ended under).

:meth:`generate_sync` is the previous batch-at-a-time path (one left-padded batch per call,
one generator for the batch), kept as the reference that tests and benchmarks compare with.
"""

from __future__ import annotations

import asyncio
import atexit
import hashlib
import struct
import threading
import time
import weakref
from array import array
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import torch

from practicum.engines.base import Completion, SamplingParams
from practicum.engines.render import ChatRenderer
from practicum.hardware import in_own_thread

T = TypeVar("T")


def _sampling_logprobs(logits: torch.Tensor, params: SamplingParams) -> torch.Tensor:
    """Log-probs of the distribution sampled from: temperature, then nucleus (top-p).
    logits [B, V] float32 -> [B, V] (tokens outside the nucleus get -inf)."""
    if params.temperature <= 0:
        return torch.log_softmax(logits, dim=-1)
    return torch.log_softmax(_nucleus(logits / params.temperature, torch.tensor([params.top_p]))
                             if params.top_p < 1.0 else logits / params.temperature, dim=-1)


def _nucleus(logits: torch.Tensor, top_p: torch.Tensor) -> torch.Tensor:
    """logits [B, V], top_p [B] -> logits with the tokens outside each row's nucleus at -inf."""
    sorted_logits, idx = torch.sort(logits, dim=-1, descending=True)
    probs = torch.softmax(sorted_logits, dim=-1)
    # drop a token when the tokens ranked above it already cover top_p of the mass
    drop = (probs.cumsum(-1) - probs) >= top_p.to(probs.device).unsqueeze(-1)
    sorted_logits = sorted_logits.masked_fill(drop, float("-inf"))
    return torch.full_like(logits, float("-inf")).scatter(-1, idx, sorted_logits)


def _row_logprobs(logits: torch.Tensor, temperature: torch.Tensor, top_p: torch.Tensor) -> torch.Tensor:
    """Per-row :func:`_sampling_logprobs`: logits [B, V] float32, temperature [B], top_p [B]
    -> [B, V]. Every operation is row-wise, so a row's result does not depend on the others."""
    out = torch.empty_like(logits)
    greedy = temperature <= 0
    if bool(greedy.any()):
        out[greedy] = torch.log_softmax(logits[greedy], dim=-1)
    sampled = ~greedy
    if bool(sampled.any()):
        x = logits[sampled] / temperature[sampled].to(logits.device).unsqueeze(-1)
        p = top_p[sampled]
        nuc = p < 1.0
        if bool(nuc.any()):
            x[nuc] = _nucleus(x[nuc], p[nuc])
        out[sampled] = torch.log_softmax(x, dim=-1)
    return out


def _prompt_digest(ids: list[int]) -> bytes:
    return hashlib.blake2b(array("q", ids).tobytes(), digest_size=16).digest()


def _request_seed(seed: int, digest: bytes, n: int) -> int:
    """The generator seed of the n-th request with this seed and prompt (63 bits)."""
    h = hashlib.blake2b(struct.pack("<qq", seed % 2**63, n) + digest, digest_size=8).digest()
    return int.from_bytes(h, "little") >> 1


@dataclass(eq=False)
class _Request:
    ids: list[int]
    params: SamplingParams
    seed: int | None  # the request's own generator seed; None when greedy
    deliver: Callable[[Completion | BaseException], None]
    submitted: float
    started: float = 0.0
    version: int = 0
    out_ids: list[int] = field(default_factory=list)
    out_logp: list[float] = field(default_factory=list)
    gen: torch.Generator | None = None
    cancelled: bool = False  # set by the caller's coroutine; the row leaves at the next step
    on_token: Callable[[int], None] | None = None  # called from the decode thread with each sampled token (stream)


MIN_SHARED_PREFIX = 16  # shorter common beginnings are not worth a separate prefill
BLOCK = 8  # tokens per block of the beginnings cache


@dataclass(eq=False)
class _Beginning:
    kv: list[tuple[torch.Tensor, torch.Tensor]]  # per layer, keys and values [1, H, n, D], n a multiple of BLOCK
    digests: list[bytes]  # digest of its first k blocks, k = 1..n/BLOCK
    nbytes: int


def _block_digests(ids: list[int], blocks: int) -> list[bytes]:
    """Chained digests of the first 1..``blocks`` whole blocks of ``ids``: the k-th names the
    first k blocks, so equal digests mean equal beginnings."""
    out, d = [], b""
    for k in range(blocks):
        d = hashlib.blake2b(d + array("q", ids[k * BLOCK:(k + 1) * BLOCK]).tobytes(), digest_size=16).digest()
        out.append(d)
    return out


class _Beginnings:
    """KV-cache rows of prompt beginnings, in whole blocks, shared by later requests that begin
    alike (oldest evicted first, within ``budget`` bytes)."""

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self.held = 0
        self._index: dict[bytes, _Beginning] = {}  # digest of the first k blocks -> an entry that has them
        self._entries: OrderedDict[int, _Beginning] = OrderedDict()  # id -> entry, oldest first

    def lookup(self, ids: list[int]) -> tuple[int, list[tuple[torch.Tensor, torch.Tensor]]] | None:
        """The longest stored beginning of ``ids`` that leaves at least one token of it: (its
        length, per-layer keys and values [1, H, length, D], views of the stored rows)."""
        found, n = None, 0
        for k, d in enumerate(_block_digests(ids, (len(ids) - 1) // BLOCK), start=1):
            entry = self._index.get(d)
            if entry is None:
                break
            found, n = entry, k * BLOCK
        if found is None:
            return None
        self._entries.move_to_end(id(found))
        return n, [(k[:, :, :n], v[:, :, :n]) for k, v in found.kv]

    def covers(self, ids: list[int], n: int) -> bool:
        return n >= BLOCK and _block_digests(ids, n // BLOCK)[-1] in self._index

    def store(self, ids: list[int], kv: list[tuple[torch.Tensor, torch.Tensor]]) -> None:
        """Keep ``kv`` (per layer [1, H, n, D], n a multiple of BLOCK), the rows of ``ids[:n]``."""
        n = kv[0][0].shape[2]
        nbytes = sum(k.numel() * k.element_size() * 2 for k, _ in kv)
        if n < BLOCK or nbytes > self.budget:
            return
        entry = _Beginning(kv, _block_digests(ids, n // BLOCK), nbytes)
        for d in entry.digests:
            self._index[d] = entry
        self._entries[id(entry)] = entry
        self.held += nbytes
        while self.held > self.budget:
            _, old = self._entries.popitem(last=False)
            self.held -= old.nbytes
            for d in old.digests:
                if self._index.get(d) is old:
                    del self._index[d]

    def clear(self) -> None:
        self._index.clear()
        self._entries.clear()
        self.held = 0


@dataclass
class _Prefix:
    """A finished row's KV cache, kept for the request that continues its conversation."""

    ids: tuple[int, ...]
    kv: list[tuple[torch.Tensor, torch.Tensor]]  # per layer, keys and values [1, H, len(ids), D]
    nbytes: int


@dataclass
class _Batch:
    """The running decode batch. The cache holds every token of every row so far; ``logits``
    are each row's next-token logits."""

    rows: list[_Request]
    cache: object  # transformers DynamicCache: per layer keys/values [B, H, L, D]
    logits: torch.Tensor  # [B, V]
    attention: torch.Tensor  # [B, L], left-padded
    next_pos: torch.Tensor  # [B], position of each row's next token


_FOLDED = "practicum_folded"  # the attention implementation of a folded step (HFEngine._fold)


class _FoldedStep:
    """The cache and attention of one folded step: the packed sequence is the running rows'
    next tokens (one each), then each new prompt's tokens. Given to the model as its cache,
    :meth:`update` appends each part's keys and values to its own cache; the attention
    function registered as ``practicum_folded`` (:func:`_folded_attention`) then attends each
    part with its own keys."""

    def __init__(self, cache: object, mask: torch.Tensor) -> None:
        self.cache = cache  # the running rows' DynamicCache [B, H, L, D]
        self.mask = mask  # [B, 1, 1, L + 1] bool: the running rows' own columns
        self.parts: list[tuple[int, int, int, object]] = []  # (offset in the sequence, tokens, cached before, cache)
        self.layers: dict[int, tuple] = {}
        self.is_compileable = False

    def update(self, key_states: torch.Tensor, value_states: torch.Tensor, layer_idx: int, *args, **kwargs):
        b = self.parts[0][0] if self.parts else key_states.shape[2]
        k_run = key_states[0, :, :b].transpose(0, 1).unsqueeze(2)  # [B, Hkv, 1, D]
        v_run = value_states[0, :, :b].transpose(0, 1).unsqueeze(2)
        run = self.cache.update(k_run, v_run, layer_idx)  # type: ignore[attr-defined]
        new = [cache.update(key_states[:, :, o:o + n], value_states[:, :, o:o + n], layer_idx)  # type: ignore[attr-defined]
               for o, n, _, cache in self.parts]
        self.layers[layer_idx] = (run, new)
        return key_states, value_states

    def attend(self, module: object, query: torch.Tensor, scaling: float | None) -> torch.Tensor:
        """query [1, H, T, D] -> [1, T, H, D], as transformers' attention functions return it."""
        (k_run, v_run), new = self.layers.pop(module.layer_idx)  # type: ignore[attr-defined]
        q = query[0]  # [H, T, D]
        b = k_run.shape[0]
        out = []
        if b:
            o = torch.nn.functional.scaled_dot_product_attention(
                q[:, :b].transpose(0, 1).unsqueeze(2), k_run, v_run, attn_mask=self.mask, scale=scaling,
                enable_gqa=True)  # [B, H, 1, D]
            out.append(o.squeeze(2))
        for (o_, n, p, _), (k, v) in zip(self.parts, new):
            causal = torch.ones((n, p + n), dtype=torch.bool, device=query.device).tril(p)
            o = torch.nn.functional.scaled_dot_product_attention(
                q[:, o_:o_ + n].unsqueeze(0), k, v, attn_mask=causal, scale=scaling, enable_gqa=True)  # [1, H, n, D]
            out.append(o[0].transpose(0, 1))
        return torch.cat(out, 0).unsqueeze(0)


def _folded_attention(module, query, key, value, attention_mask, scaling=None, dropout=0.0, folded=None, **kwargs):
    return folded.attend(module, query, scaling), None


def _register_folded_attention() -> bool:
    """Register the folded step's attention with transformers; False where this version
    cannot take it (the engine then prefills newcomers in a forward pass of their own)."""
    try:
        from transformers import AttentionInterface

        AttentionInterface.register(_FOLDED, _folded_attention)
        return True
    except Exception:  # noqa: BLE001 - an older or newer transformers: fall back, do not fail
        return False


ROOM = 64  # columns of spare room a cache layer grows by (see _roomy_layer)
ROW_ROOM = 16  # rows of spare room a cache layer grows by when rows join (see _roomy_layer)
_ROOMY: type | None = None


def _roomy_layer() -> type:
    """transformers' ``DynamicLayer`` appends each decode step's keys and values with ``torch.cat``,
    which copies the layer's whole cache every token: for 64 rows of a 263-token prompt on the
    embedded model, ~240 ms a step on 2 cores against ~60 ms of attention. This subclass keeps
    its keys and values in buffers with spare room and writes into them:

    * columns: :data:`ROOM` spare columns after the filled part, so a layer is copied once per
      ``ROOM`` tokens; padding columns no row needs any more are dropped by moving the start
      (:meth:`trim_left`), not by copying;
    * rows: a row that ends is overwritten by a row from the end of the batch
      (``batch_select_indices`` with distinct indices moves only the rows whose place changes);
      rows that join are written after the others (:meth:`join`), into ``row_room`` spare rows
      (:data:`ROW_ROOM` by default), so admitting a request copies its rows, not the batch's.

    ``keys``/``values`` read the filled part (a view); assigning them replaces the storage."""
    global _ROOMY
    if _ROOMY is not None:
        return _ROOMY
    from transformers.cache_utils import DynamicLayer

    class RoomyLayer(DynamicLayer):
        def __init__(self, room: int = ROOM, row_room: int = ROW_ROOM) -> None:
            super().__init__()
            self.room, self.row_room = room, row_room

        _kbuf: torch.Tensor | None = None  # [rows with room, H, columns with room, D]
        _vbuf: torch.Tensor | None = None
        _rows = 0  # live rows: the first _rows of the buffers
        _s = 0  # first filled column
        _nk = _nv = 0  # end of the filled columns of each (equal, but set one after the other)

        @staticmethod
        def _filled(t) -> int:
            return 0 if t is None or t.dim() < 3 else t.shape[2]

        @property
        def keys(self):  # type: ignore[override]
            return None if self._kbuf is None else self._kbuf[:self._rows, :, self._s:self._nk]

        @keys.setter
        def keys(self, t):
            self._kbuf, self._nk, self._s = t, self._filled(t), 0
            self._rows = 0 if t is None or t.dim() < 3 else t.shape[0]

        @property
        def values(self):  # type: ignore[override]
            return None if self._vbuf is None else self._vbuf[:self._rows, :, self._s:self._nv]

        @values.setter
        def values(self, t):
            self._vbuf, self._nv, self._s = t, self._filled(t), 0

        def _grow(self, rows: int, cols: int, lead: int = 0) -> None:
            """New buffers of ``rows`` x ``cols``; the live part is copied to column ``lead``."""
            w = self._nk - self._s
            k, v = self._kbuf, self._vbuf
            kbuf = k.new_empty((rows, k.shape[1], cols, k.shape[3]))
            vbuf = v.new_empty((rows, v.shape[1], cols, v.shape[3]))
            kbuf[:self._rows, :, lead:lead + w] = k[:self._rows, :, self._s:self._nk]
            vbuf[:self._rows, :, lead:lead + w] = v[:self._rows, :, self._s:self._nv]
            if lead:
                kbuf[:self._rows, :, :lead] = 0
                vbuf[:self._rows, :, :lead] = 0
            self._kbuf, self._vbuf, self._s, self._nk, self._nv = kbuf, vbuf, 0, lead + w, lead + w

        def update(self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs):
            if not self.is_initialized or self._filled(self._kbuf) == 0:
                self.lazy_initialization(key_states, value_states)
                self.keys, self.values = key_states[:, :, :0], value_states[:, :, :0]
            n, new = self._nk, key_states.shape[2]
            if n + new > min(self._kbuf.shape[2], self._vbuf.shape[2]):
                self._grow(self._kbuf.shape[0], n - self._s + new + self.room)
                n = self._nk
            self._kbuf[:self._rows, :, n:n + new] = key_states
            self._vbuf[:self._rows, :, n:n + new] = value_states
            self._nk = self._nv = n + new
            return self.keys, self.values

        def batch_select_indices(self, indices: torch.Tensor) -> None:
            if self._nk == 0:
                return
            m = len(indices)
            if m <= self._rows and len(set(indices.tolist())) == m:
                # distinct rows: move only those whose place changes (a row read before it is written over)
                moved = (indices != torch.arange(m, device=indices.device)).nonzero().squeeze(-1)
                if len(moved):
                    src = indices[moved]
                    self._kbuf[moved, :, self._s:self._nk] = self._kbuf[src, :, self._s:self._nk]
                    self._vbuf[moved, :, self._s:self._nv] = self._vbuf[src, :, self._s:self._nv]
                self._rows = m
                return
            # rows repeated (a prompt's rows copied for its samples): gather, the room along
            self._kbuf, self._vbuf = self._kbuf[indices], self._vbuf[indices]
            self._rows = m

        def trim_left(self, n: int) -> None:
            """Drop the first ``n`` filled columns (padding no row needs any more): no copy."""
            self._s += n

        def join(self, keys: torch.Tensor, values: torch.Tensor) -> None:
            """Append rows (keys/values [B', H, L', D]) after the live ones; the narrower side is
            left-padded with zero columns, as the batch's attention mask pads it."""
            rows, add = self._rows, keys.shape[0]
            w, lb = self._nk - self._s, keys.shape[2]
            if lb > w and self._s >= lb - w:  # room on the left from earlier trims
                self._s -= lb - w
                self._kbuf[:rows, :, self._s:self._s + lb - w] = 0
                self._vbuf[:rows, :, self._s:self._s + lb - w] = 0
                w = lb
            if lb > w or rows + add > self._kbuf.shape[0]:
                width = max(w, lb)
                self._grow(max(self._kbuf.shape[0], rows + add + self.row_room),
                           max(self._kbuf.shape[2] - self._s, width + self.room), width - w)
                w = width
            e = self._nk
            self._kbuf[rows:rows + add, :, e - lb:e] = keys
            self._vbuf[rows:rows + add, :, e - lb:e] = values
            self._kbuf[rows:rows + add, :, self._s:e - lb] = 0
            self._vbuf[rows:rows + add, :, self._s:e - lb] = 0
            self._rows = rows + add

    _ROOMY = RoomyLayer
    return _ROOMY


def _new_cache(data: Sequence[tuple[torch.Tensor, torch.Tensor]] | None = None, room: int = ROOM,
               row_room: int = ROW_ROOM) -> object:
    """A ``DynamicCache`` filled with ``data`` (per layer, keys and values [B, H, L, D]: copied, so
    stored rows are never written to): of :func:`_roomy_layer` layers with ``room`` spare columns
    and ``row_room`` spare rows, or of transformers' own ``DynamicLayer`` (a copy of the layer per
    token) where ``room`` is 0."""
    import functools

    from transformers import DynamicCache

    if not room:
        return DynamicCache(ddp_cache_data=data) if data else DynamicCache()
    cache = DynamicCache()
    cache.layer_class_to_replicate = functools.partial(_roomy_layer(), room, row_room)
    for i, (k, v) in enumerate(data or ()):
        cache.update(k, v, i)
    return cache


def _pad_left(t: torch.Tensor, n: int, dim: int) -> torch.Tensor:
    if n == 0:
        return t
    shape = list(t.shape)
    shape[dim] = n
    return torch.cat([t.new_zeros(shape), t], dim=dim)


@dataclass
class _Job:
    """A call for the decode thread (:meth:`HFEngine.run_job`)."""

    fn: Callable[[], object]
    done: bool = False
    result: object = None
    error: BaseException | None = None


class HFEngine:
    """The :class:`~practicum.engines.base.Engine` (a continuous one) of a transformers checkpoint
    folder, in this process."""

    def __init__(
        self,
        path: str | Path,
        dtype: torch.dtype = torch.bfloat16,
        device: str = "cpu",
        max_batch: int = 64,
        prefix_cache_mb: float = 1024,
        quantize: str | None = None,
        beginning_cache_mb: float = 256,
        kv_room: int = ROOM,
        kv_row_room: int = ROW_ROOM,
    ) -> None:
        """``quantize="int8"``: dynamic int8 weights for every linear layer (CPU; a serving tier:
        the weights can no longer be updated). ``beginning_cache_mb``: memory for the shared
        beginnings of prompts (0: off). ``kv_room`` / ``kv_row_room``: spare columns and rows a
        cache layer grows by (:func:`_roomy_layer`; ``kv_room`` 0: transformers' own layers)."""
        if kv_room < 0 or kv_row_room < 0:
            raise ValueError(f"kv_room and kv_row_room must be >= 0, got {kv_room} and {kv_row_room}")
        from transformers import AutoTokenizer

        from practicum.models import load_causal_lm

        self.path = Path(path)
        self.device = torch.device(device)
        self.dtype = dtype
        self.max_batch = max_batch  # most rows decoding at once; the rest wait
        self.quantize: str | None = None
        self._compute = threading.Lock()  # one forward pass (or weight copy) at a time

        def load() -> None:  # the decode thread is this engine's only long-lived torch thread
            self.model = load_causal_lm(self.path, dtype, self.device)
            self.model.eval()
            self.model.requires_grad_(False)
            if quantize is not None:
                self.quantize_weights(quantize)

        in_own_thread(load, name="hf-engine-load")
        tokenizer = AutoTokenizer.from_pretrained(self.path)
        self.renderer = ChatRenderer(tokenizer, self.model.generation_config.eos_token_id)
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else tokenizer.eos_token_id
        self.policy_version = 0
        self.continuous = True  # batches concurrent requests itself (see BatchingEngine)
        self.steps = 0  # decode steps run by the continuous path (for tests and benchmarks)
        self.admissions = 0  # prefills that joined a batch
        self._lock = asyncio.Lock()  # generate_sync callers through the old async path
        self._cond = threading.Condition()  # guards the queue, the weight hand-off and the thread
        self._waiting: list[_Request] = []
        self._weights: tuple[Mapping[str, torch.Tensor], int] | None = None
        self._weights_error: BaseException | None = None
        self._thread: threading.Thread | None = None
        self._jobs: list[_Job] = []  # other torch work to run on the decode thread (run_job)
        self._closing = False
        self._counts: OrderedDict[tuple[int, bytes], int] = OrderedDict()  # submit's n per (seed, prompt)
        self.prefix_cache_bytes = int(prefix_cache_mb * 2**20)  # 0: no prefix cache
        self._prefixes: OrderedDict[tuple[int, ...], _Prefix] = OrderedDict()  # oldest first
        self._prefix_held = 0
        self.share_prefix = True  # prefill the common beginning of prompts admitted together once
        self.cluster_prefill = True  # ... family by family, when they begin alike in families (_prefill_clusters)
        self.kv_room = kv_room  # spare cache columns a layer grows by (_roomy_layer); 0: transformers' DynamicLayer
        self.kv_row_room = kv_row_room  # spare cache rows it grows by when rows join
        self.shared_prefix_tokens = 0  # prefill tokens saved that way (for tests and benchmarks)
        self.prefix_hits = 0  # requests that reused a kept prefix (for tests and benchmarks)
        self.prefix_tokens_reused = 0
        self._beginnings = _Beginnings(int(beginning_cache_mb * 2**20))
        # admit newcomers inside a decode step's forward pass (_fold): for models whose every
        # layer is full attention through transformers' attention interface
        self.fold_prefill = True
        self.folded = 0  # admissions folded into a decode step (for tests and benchmarks)
        config = self.model.config
        self._foldable = (getattr(config, "_attn_implementation", None) in ("sdpa", "eager")
                          and not getattr(config, "sliding_window", None)
                          and set(getattr(config, "layer_types", None) or ["full_attention"]) == {"full_attention"}
                          and _register_folded_attention())
        self.beginning_hits = 0  # fresh prefills that started from a stored beginning
        self.beginning_tokens_reused = 0
        self._staged: dict[asyncio.AbstractEventLoop, list[_Request]] = {}  # made in this pass of a loop

    # --- continuous batching: the callers' side ---------------------------------------------
    async def submit(self, ids: list[int], params: SamplingParams) -> Completion:
        """Sample one completion for ``ids``; it joins the running batch at the next step and
        returns as soon as it ends. Its seed's n counts earlier submits of the same seed and
        prompt (the engine remembers the last 65,536 of them)."""
        (completion,) = await self._run([ids], params, first=self._nth(ids, params))
        return completion

    def _nth(self, ids: list[int], params: SamplingParams) -> int:
        """How many earlier single requests had this seed and prompt (their samples must differ)."""
        if params.seed is None or params.temperature <= 0:
            return 0
        key = (params.seed, _prompt_digest(ids))
        with self._cond:
            n = self._counts.pop(key, 0)
            self._counts[key] = n + 1
            if len(self._counts) > 65536:
                self._counts.popitem(last=False)
        return n

    async def generate(self, prompts: list[list[int]], params: SamplingParams) -> list[Completion]:
        """Sample one completion per prompt: n requests submitted together (the i-th repeat of a
        prompt in the call has n = i), each returned to this call when all have ended."""
        return await self._run(prompts, params, first=0)

    async def stream(self, ids: list[int], params: SamplingParams) -> AsyncIterator[int | Completion]:
        """:meth:`submit`, yielding each token id as the decode thread samples it and then the
        :class:`Completion`. Leaving the iteration early (a client that went away) cancels the
        request: its row leaves the batch at the next step instead of decoding on for nobody."""
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[int | Completion | BaseException] = asyncio.Queue()

        def on_token(t: int) -> None:
            try:
                loop.call_soon_threadsafe(queue.put_nowait, t)
            except RuntimeError:  # the loop has closed: nobody is reading
                pass

        task = asyncio.ensure_future(self._run([ids], params, first=self._nth(ids, params), on_token=on_token))
        task.add_done_callback(lambda t: queue.put_nowait(t.exception() or t.result()[0]) if not t.cancelled() else None)
        try:
            while True:
                item = await queue.get()
                if isinstance(item, BaseException):
                    raise item
                yield item
                if isinstance(item, Completion):
                    return
        finally:
            if not task.done():
                task.cancel()  # marks the request cancelled (see _run)

    async def _run(self, prompts: list[list[int]], params: SamplingParams, first: int,
                   on_token: Callable[[int], None] | None = None) -> list[Completion]:
        loop = asyncio.get_running_loop()
        base = params.seed
        if base is None and params.temperature > 0:
            base = int(torch.randint(0, 2**62, ()).item())  # torch's global RNG, like the rest of torch
        seen: dict[bytes, int] = {}
        futures, requests = [], []
        now = time.perf_counter()
        for ids in prompts:
            seed = None
            if base is not None:
                d = _prompt_digest(ids)
                n = seen.get(d, first)
                seen[d] = n + 1
                seed = _request_seed(base, d, n)
            fut: asyncio.Future = loop.create_future()
            requests.append(_Request(list(ids), params, seed, _deliverer(loop, fut), now, on_token=on_token))
            futures.append(fut)
        if self._closing:
            raise RuntimeError("the engine is closed")
        # Requests made in one pass of the event loop (a group's episodes starting together)
        # reach the decode thread together, so their identical prompts share one prefill.
        staged = self._staged.setdefault(loop, [])
        if not staged:
            loop.call_soon(self._flush, loop)
        staged.extend(requests)
        try:
            return list(await asyncio.gather(*futures))
        except asyncio.CancelledError:
            for r in requests:
                r.cancelled = True
            raise

    def _flush(self, loop: asyncio.AbstractEventLoop) -> None:
        requests = self._staged.pop(loop, [])
        with self._cond:
            if self._closing:
                for r in requests:
                    r.deliver(RuntimeError("the engine is closed"))
                return
            self._waiting.extend(requests)
            self._ensure_thread()
            self._cond.notify_all()

    def _ensure_thread(self) -> None:
        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(target=self._serve, name="hf-engine-decode", daemon=True)
            self._thread.start()
            _LIVE.add(self)

    async def close(self) -> None:
        """Stop the decode thread; requests still waiting or decoding fail."""
        await asyncio.to_thread(self.shutdown)

    def shutdown(self) -> None:
        """:meth:`close` without an event loop (at interpreter exit)."""
        with self._cond:
            self._closing = True
            self._cond.notify_all()
            thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join()

    def run_job(self, fn: Callable[[], T]) -> T:
        """Run ``fn`` on the decode thread between two decode steps and return its result (or
        raise its error); decoding waits meanwhile. For the rest of a process's torch work on
        CPU - a trainer's update, loading its model - so that the decode thread stays the
        process's only thread with a libgomp pool (:func:`~practicum.hardware.in_own_thread`
        says what a second one costs). Called from the decode thread itself, it just calls."""
        if threading.current_thread() is self._thread:
            return fn()
        job = _Job(fn)
        with self._cond:
            if self._closing:
                raise RuntimeError("the engine is closed")
            self._jobs.append(job)
            self._ensure_thread()
            self._cond.notify_all()
            while not job.done:
                self._cond.wait()
        if job.error is not None:
            raise job.error
        return job.result  # type: ignore[return-value]

    # --- continuous batching: the decode thread ----------------------------------------------
    def _serve(self) -> None:
        batch: _Batch | None = None
        while True:
            jobs: list[_Job] = []
            with self._cond:
                while True:
                    self._apply_pending_weights()
                    if self._closing:
                        self._fail_all(batch, RuntimeError("the engine was closed"))
                        for job in self._jobs:
                            job.error, job.done = RuntimeError("the engine was closed"), True
                        self._jobs = []
                        self._cond.notify_all()
                        return
                    self._waiting = [r for r in self._waiting if not r.cancelled]
                    if self._jobs or self._waiting or batch is not None:
                        break
                    self._cond.wait()
                jobs, self._jobs = self._jobs, []
                if not jobs:
                    room = self.max_batch - (len(batch.rows) if batch is not None else 0)
                    newcomers, self._waiting = self._waiting[:room], self._waiting[room:]
            if jobs:  # outside the condition: callers keep submitting while a job runs
                for job in jobs:
                    try:
                        job.result = job.fn()
                    except BaseException as e:  # noqa: BLE001 - handed back to run_job's caller
                        job.error = e
                    with self._cond:
                        job.done = True
                        self._cond.notify_all()
                continue
            try:
                with self._compute, torch.inference_mode():
                    if newcomers and batch is not None and self.fold_prefill and self._foldable:
                        batch = self._step(batch, newcomers)  # one forward: decode rows and newcomers' prompts
                        newcomers = []
                        continue
                    if newcomers:
                        joined = self._prefill(newcomers)
                        batch = joined if batch is None else self._merge(batch, joined)
                        newcomers = []
                    assert batch is not None
                    batch = self._step(batch)
            except Exception as e:  # noqa: BLE001 - fails the requests in flight, not the thread
                self._fail_all(batch, e, newcomers)
                batch = None

    def _fail_all(self, batch: _Batch | None, error: BaseException, extra: list[_Request] = ()) -> None:  # type: ignore[assignment]
        for r in [*(batch.rows if batch is not None else []), *extra]:
            r.deliver(error)
        if self._closing:
            for r in self._waiting:
                r.deliver(error)
            self._waiting = []

    def _start(self, requests: list[_Request]) -> None:
        """Admission: the start time, the policy version and each sampled request's generator."""
        now = time.perf_counter()
        for r in requests:
            r.started, r.version = now, self.policy_version
            if r.seed is not None:
                r.gen = torch.Generator(device=self.device)
                r.gen.manual_seed(r.seed)

    def _prefill(self, requests: list[_Request]) -> _Batch:
        """Prefill newcomers: a request that continues a kept prefix prefills only its new
        tokens; the others together, each distinct prompt once, cache rows copied for repeats."""
        self._start(requests)
        fresh: list[_Request] = []
        joined: _Batch | None = None
        for r in requests:
            kept = self._take_prefix(r.ids)
            if kept is None:
                fresh.append(r)
                continue
            one = self._prefill_from(r, kept)
            joined = one if joined is None else self._merge(joined, one)
        if fresh:
            # prompts of several families (each domain its own worked examples) prefill family by
            # family, each its own beginning once, when that computes fewer tokens than one padded prefill
            clusters = (_prefill_clusters([r.ids for r in fresh]) if self.share_prefix and self.cluster_prefill
                        else [list(range(len(fresh)))])
            for members in clusters:
                batch = self._prefill_fresh([fresh[i] for i in members])
                joined = batch if joined is None else self._merge(joined, batch)
        self.admissions += 1
        assert joined is not None
        return joined

    def _prefill_fresh(self, requests: list[_Request]) -> _Batch:

        distinct, row_of, input_ids, attention, positions = _left_padded(
            [r.ids for r in requests], self.pad_id, self.device)
        n = len(distinct)
        # what every prompt begins with (leaving each at least one token of its own)
        common = _shared_prefix(distinct) if n > 1 else len(distinct[0]) - 1
        stored = self._beginnings.lookup(distinct[0][:common + 1]) if self._beginnings.budget else None
        p = stored[0] if stored is not None else 0  # tokens of that beginning already computed
        head = common if n > 1 and self.share_prefix and common >= MIN_SHARED_PREFIX else p
        if head > 0:
            # The beginning (a stored one, then the rest of what the prompts have in common:
            # system prompt, tool schemas, worked examples) is computed once on one row and its
            # cache rows copied; then each prompt's own part follows, left-padded after it
            # (masked columns in the middle, positions per row).
            cache = _new_cache(stored[1] if stored is not None else None, self.kv_room, self.kv_row_room)
            if head > p:
                self.model(input_ids=torch.tensor([distinct[0][p:head]], device=self.device),
                           attention_mask=torch.ones((1, head), dtype=torch.long, device=self.device),
                           position_ids=torch.arange(p, head, device=self.device).unsqueeze(0), cache=cache,
                           use_cache=True, logits_to_keep=1)
            if n > 1:
                cache.batch_select_indices(torch.zeros(n, dtype=torch.long, device=self.device))
            _, _, rest, rest_att, rest_pos = _left_padded([q[head:] for q in distinct], self.pad_id, self.device,
                                                          dedupe=False)
            attention = torch.cat([torch.ones((n, head), dtype=torch.long, device=self.device), rest_att], 1)
            positions = rest_pos + head
            logits = self.model(input_ids=rest, attention_mask=attention, position_ids=positions,
                                cache=cache, use_cache=True, logits_to_keep=1).logits[:, -1, :]
            if head > p:
                self.shared_prefix_tokens += (head - p) * (n - 1)
            if p:
                self.beginning_hits += 1
                self.beginning_tokens_reused += p * n
        else:
            cache = _new_cache(room=self.kv_room, row_room=self.kv_row_room)
            logits = self.model(input_ids=input_ids, attention_mask=attention, position_ids=positions,
                                cache=cache, use_cache=True, logits_to_keep=1).logits[:, -1, :]
        for layer in cache.layers:
            if getattr(layer, "is_sliding", False) or type(layer).__name__ not in ("DynamicLayer", "RoomyLayer"):
                raise NotImplementedError(f"continuous batching needs plain DynamicLayer caches, not {type(layer).__name__}")
        if self._beginnings.budget:
            self._store_beginnings(distinct, cache, attention)
        expand = torch.tensor(row_of, device=self.device)
        if len(distinct) < len(requests):
            cache.batch_select_indices(expand)
        return _Batch(list(requests), cache, logits[expand], attention[expand], positions[expand][:, -1] + 1)

    def _store_beginnings(self, prompts: list[list[int]], cache: object, attention: torch.Tensor) -> None:
        """Keep each prompt's whole blocks (all but its last token) for later requests, unless
        already kept."""
        for row, ids in enumerate(prompts):
            n = (len(ids) - 1) // BLOCK * BLOCK
            if n < BLOCK or self._beginnings.covers(ids, n):
                continue
            cols = attention[row].nonzero().squeeze(-1)[:n]  # the row's own columns, in order
            self._beginnings.store(ids, [(layer.keys[row:row + 1, :, cols, :], layer.values[row:row + 1, :, cols, :])
                                         for layer in cache.layers])  # type: ignore[attr-defined]

    # --- the prefix cache --------------------------------------------------------------------
    def _prefill_from(self, r: _Request, kept: _Prefix) -> _Batch:
        """One request's batch from a kept prefix: only the tokens after it go through the model."""

        n = len(kept.ids)
        cache = _new_cache(kept.kv, self.kv_room, self.kv_row_room)
        suffix = torch.tensor([r.ids[n:]], dtype=torch.long, device=self.device)
        attention = torch.ones((1, len(r.ids)), dtype=torch.long, device=self.device)
        positions = torch.arange(n, len(r.ids), device=self.device).unsqueeze(0)
        logits = self.model(input_ids=suffix, attention_mask=attention, position_ids=positions,
                            cache=cache, use_cache=True, logits_to_keep=1).logits[:, -1, :]
        self.prefix_hits += 1
        self.prefix_tokens_reused += n
        return _Batch([r], cache, logits, attention, torch.tensor([len(r.ids)], device=self.device))

    def _take_prefix(self, ids: list[int]) -> _Prefix | None:
        """The longest kept entry that ``ids`` strictly extend, removed from the cache."""
        best = None
        for key in self._prefixes:
            if len(key) < len(ids) and (best is None or len(key) > len(best)) and tuple(ids[:len(key)]) == key:
                best = key
        if best is None:
            return None
        kept = self._prefixes.pop(best)
        self._prefix_held -= kept.nbytes
        return kept

    def _keep_prefix(self, r: _Request, row: int, batch: _Batch) -> None:
        """Keep the KV-cache rows of ``r`` (row ``row`` of ``batch``), which just ended."""
        ids = tuple(r.ids) + tuple(r.out_ids[:-1])  # the last token's keys were never computed
        n = len(ids)
        cols = batch.attention[row].nonzero().squeeze(-1)  # the row's own columns, in order (padding
        if len(cols) != n:  # lies at the left, and after a shared prefix); not the layout assumed: keep nothing
            return
        kv = [(layer.keys[row:row + 1, :, cols, :], layer.values[row:row + 1, :, cols, :])  # indexing copies
              for layer in batch.cache.layers]  # type: ignore[attr-defined]
        nbytes = sum(k.numel() * k.element_size() * 2 for k, _ in kv)
        if nbytes > self.prefix_cache_bytes:
            return
        old = self._prefixes.pop(ids, None)
        if old is not None:
            self._prefix_held -= old.nbytes
        self._prefixes[ids] = _Prefix(ids, kv, nbytes)
        self._prefix_held += nbytes
        while self._prefix_held > self.prefix_cache_bytes:
            _, evicted = self._prefixes.popitem(last=False)
            self._prefix_held -= evicted.nbytes

    def _drop_prefixes(self) -> None:
        self._prefixes.clear()
        self._prefix_held = 0
        self._beginnings.clear()

    @staticmethod
    def _merge(a: _Batch, b: _Batch) -> _Batch:
        """One batch of a's rows then b's: the shorter side is left-padded along the sequence
        axis (zeros in the cache, masked out), so every row keeps its own positions."""
        la, lb = a.attention.shape[1], b.attention.shape[1]
        width = max(la, lb)
        for x, y in zip(a.cache.layers, b.cache.layers):  # type: ignore[attr-defined]
            if hasattr(x, "join"):  # a's buffers have room: only b's rows are copied
                x.join(y.keys, y.values)
                continue
            x.keys = torch.cat([_pad_left(x.keys, width - la, 2), _pad_left(y.keys, width - lb, 2)], 0)
            x.values = torch.cat([_pad_left(x.values, width - la, 2), _pad_left(y.values, width - lb, 2)], 0)
        attention = torch.cat([_pad_left(a.attention, width - la, 1), _pad_left(b.attention, width - lb, 1)], 0)
        return _Batch(a.rows + b.rows, a.cache, torch.cat([a.logits, b.logits], 0), attention,
                      torch.cat([a.next_pos, b.next_pos], 0))

    def _step(self, batch: _Batch, newcomers: Sequence[_Request] = ()) -> _Batch | None:
        """Sample one token for every row, return the rows that ended, and run the forward
        pass of the rest - with ``newcomers``' prompts in the same forward pass (see
        :meth:`_fold`). Returns the batch left, or None."""
        rows = batch.rows
        temperature = torch.tensor([r.params.temperature for r in rows])
        top_p = torch.tensor([r.params.top_p for r in rows])
        logp = _row_logprobs(batch.logits.float(), temperature, top_p)  # [B, V]
        tok = logp.argmax(-1)
        sampled = [i for i, r in enumerate(rows) if r.gen is not None]
        if sampled:
            # inverse CDF with one uniform per row from the row's own generator
            idx = torch.tensor(sampled, device=logp.device)
            cdf = logp[idx].double().exp().cumsum(-1)  # [S, V]
            u = torch.stack([torch.rand((), dtype=torch.float64, generator=rows[i].gen, device=self.device)
                             for i in sampled])
            pick = torch.searchsorted(cdf, (u * cdf[:, -1]).unsqueeze(-1), right=True).squeeze(-1)
            tok[idx] = pick.clamp(max=logp.shape[-1] - 1)
        tok_logp = logp.gather(-1, tok.unsqueeze(-1)).squeeze(-1)
        self.steps += 1
        stops = set(self.renderer.stop_ids)
        keep: list[int] = []
        now = time.perf_counter()
        for i, (r, t, lp) in enumerate(zip(rows, tok.tolist(), tok_logp.tolist())):
            r.out_ids.append(t)
            r.out_logp.append(lp)
            if r.on_token is not None:
                r.on_token(t)
            ended = "stop" if t in stops or (r.params.stop and self._hits_stop(r.out_ids, r.params.stop)) else (
                "length" if len(r.out_ids) >= r.params.max_new_tokens else None)
            if ended is not None:
                if self.prefix_cache_bytes and r.params.keep_prefix:
                    self._keep_prefix(r, i, batch)
                self._finish(r, ended, now)
            elif not r.cancelled:
                keep.append(i)
        if not keep:
            return self._prefill(list(newcomers)) if newcomers else None
        cache = batch.cache
        attention, next_pos, tok = batch.attention, batch.next_pos, tok
        if len(keep) < len(rows):
            keep = _fill_holes(keep)  # rows from the end move into the places of rows that ended
            k = torch.tensor(keep, device=self.device)
            cache.batch_select_indices(k)  # type: ignore[attr-defined]
            attention, next_pos, tok = attention[k], next_pos[k], tok[k]
            first = int(attention.any(0).nonzero()[0])  # padding columns no row needs any more
            if first > 0:
                for layer in cache.layers:  # type: ignore[attr-defined]
                    if hasattr(layer, "trim_left"):
                        layer.trim_left(first)
                    else:
                        layer.keys, layer.values = layer.keys[:, :, first:], layer.values[:, :, first:]
                attention = attention[:, first:]
        attention = torch.cat([attention, torch.ones_like(attention[:, :1])], dim=1)
        kept_rows = [rows[i] for i in keep]
        if newcomers:
            return self._fold(_Batch(kept_rows, cache, batch.logits, attention, next_pos), tok, list(newcomers))
        logits = self.model(input_ids=tok.unsqueeze(-1), attention_mask=attention,
                            position_ids=next_pos.unsqueeze(-1), cache=cache, use_cache=True).logits[:, -1, :]
        return _Batch(kept_rows, cache, logits, attention, next_pos + 1)

    def _fold(self, batch: _Batch, tok: torch.Tensor, newcomers: list[_Request]) -> _Batch:
        """One forward pass for the running rows' next tokens (``tok``; ``batch.attention``
        already has their new column) and the newcomers' prompts, packed into one sequence:
        every linear layer runs once over all of those tokens, so admitting a request does not
        cost a forward pass of its own (on a CPU most of a decode step's time is reading the
        weights, whatever the number of tokens). Attention is done per part
        (:class:`_FoldedStep`): the running rows against the batch cache, each distinct new
        prompt causally against its own - after its kept conversation (the prefix cache) or a
        stored beginning, whose tokens are not computed again. The newcomers' rows then join
        the batch."""

        self._start(newcomers)
        groups: dict[tuple[int, ...], list[_Request]] = {}  # identical prompts are computed once
        for r in newcomers:
            groups.setdefault(tuple(r.ids), []).append(r)
        parts: list[tuple[list[_Request], object, int]] = []  # requests, their cache, tokens already in it
        for key, reqs in groups.items():
            ids = list(key)
            kept = self._take_prefix(ids)
            if kept is not None:
                parts.append((reqs, _new_cache(kept.kv, self.kv_room, self.kv_row_room), len(kept.ids)))
                self.prefix_hits += 1
                self.prefix_tokens_reused += len(kept.ids)
                continue
            stored = self._beginnings.lookup(ids) if self._beginnings.budget else None
            if stored is not None:
                self.beginning_hits += 1
                self.beginning_tokens_reused += stored[0] * len(reqs)
            parts.append((reqs, _new_cache(stored[1] if stored else None, self.kv_room, self.kv_row_room),
                          stored[0] if stored else 0))
        b = len(batch.rows)
        ids = [tok]
        pos = [batch.next_pos]
        step = _FoldedStep(batch.cache, batch.attention.bool()[:, None, None, :])
        last = list(range(b))  # the packed positions whose logits are needed
        offset = b
        for reqs, cache, p in parts:
            rest = reqs[0].ids[p:]
            ids.append(torch.tensor(rest, dtype=torch.long, device=self.device))
            pos.append(torch.arange(p, len(reqs[0].ids), device=self.device))
            step.parts.append((offset, len(rest), p, cache))
            offset += len(rest)
            last.append(offset - 1)
        impl = self.model.config._attn_implementation
        self.model.config._attn_implementation = _FOLDED
        try:
            logits = self.model(input_ids=torch.cat(ids).unsqueeze(0), position_ids=torch.cat(pos).unsqueeze(0),
                                cache=step, use_cache=True, folded=step,
                                logits_to_keep=torch.tensor(last, device=self.device)).logits[0]
        finally:
            self.model.config._attn_implementation = impl
        out = _Batch(batch.rows, batch.cache, logits[:b], batch.attention, batch.next_pos + 1)
        for j, (reqs, cache, _) in enumerate(parts):
            n = len(reqs[0].ids)
            if self._beginnings.budget:
                self._store_beginnings([reqs[0].ids], cache, torch.ones((1, n), dtype=torch.long, device=self.device))
            if len(reqs) > 1:
                cache.batch_select_indices(torch.zeros(len(reqs), dtype=torch.long, device=self.device))
            one = _Batch(list(reqs), cache, logits[b + j].expand(len(reqs), -1),
                         torch.ones((len(reqs), n), dtype=torch.long, device=self.device),
                         torch.full((len(reqs),), n, dtype=torch.long, device=self.device))
            out = self._merge(out, one)
        self.admissions += 1
        self.folded += 1
        return out

    def _finish(self, r: _Request, reason: str, now: float) -> None:
        r.deliver(Completion(ids=r.out_ids, logprobs=r.out_logp, text=self.renderer.decode(r.out_ids),
                             finish_reason=reason, policy_version=r.version,  # type: ignore[arg-type]
                             seconds=now - r.submitted,
                             extra={"queue_seconds": r.started - r.submitted,
                                    "policy_version_last": float(self.policy_version)}))

    # --- the batch-at-a-time path --------------------------------------------------------------
    async def generate_batch(self, prompts: list[list[int]], params: SamplingParams) -> list[Completion]:
        """The previous path: one call decodes its prompts as one batch, under a lock."""
        async with self._lock:
            return await asyncio.to_thread(self.generate_sync, prompts, params)

    @torch.inference_mode()
    def generate_sync(self, prompts: list[list[int]], params: SamplingParams) -> list[Completion]:
        # Sort by length so that each chunk pads little; restore the order at the end.
        order = sorted(range(len(prompts)), key=lambda i: len(prompts[i]))
        results: dict[int, Completion] = {}
        with self._compute:
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
        pad = self.pad_id
        batch = len(prompts)
        # A GRPO batch repeats each prompt n times: prefill each distinct prompt once and
        # copy its KV-cache rows, which cuts prefill work by the group size.
        distinct, row_of, input_ids, attention, positions = _left_padded(
            [p for p in prompts], pad, self.device)
        gen = None
        if params.temperature > 0:
            gen = torch.Generator(device=self.device)
            base = params.seed if params.seed is not None else int(torch.randint(0, 2**31 - 1, ()).item())
            gen.manual_seed(base + offset)
        stops = torch.tensor(self.renderer.stop_ids, device=self.device)
        out_ids: list[list[int]] = [[] for _ in range(batch)]
        out_logp: list[list[float]] = [[] for _ in range(batch)]
        finish = ["length"] * batch
        alive = torch.arange(batch, device=self.device)  # original row of each live row
        cache = DynamicCache()
        logits = self.model(input_ids=input_ids, attention_mask=attention, position_ids=positions,
                            cache=cache, use_cache=True, logits_to_keep=1).logits[:, -1, :]
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
            Completion(ids=out_ids[r], logprobs=out_logp[r], text=self.renderer.decode(out_ids[r]),
                       finish_reason=finish[r], policy_version=self.policy_version, seconds=seconds)  # type: ignore[arg-type]
            for r in range(batch)
        ]

    def _hits_stop(self, ids: list[int], stop: tuple[str, ...]) -> bool:
        tail = self.renderer.decode(ids[-8:])
        return any(s in tail for s in stop)

    # --- weights ---------------------------------------------------------------------------
    def quantize_weights(self, kind: str) -> None:
        """Quantize the weights held now for serving: ``int8``, dynamic int8 linear layers
        (CPU). Call it after any :meth:`load_weights`; afterwards the weights cannot change."""
        if kind != "int8" or self.device.type != "cpu":
            raise ValueError(f"quantize={kind!r}: only 'int8' on CPU (dynamic int8 linear layers)")
        with self._compute:
            self.model = torch.ao.quantization.quantize_dynamic(self.model, {torch.nn.Linear}, dtype=torch.qint8)
        self.quantize = kind

    def load_weights(self, state: Mapping[str, torch.Tensor], version: int) -> None:
        """Copy new weights in place and set the policy version, between two decode steps:
        while the decode thread runs, this hands the weights to it and waits until it has
        copied them (at the end of its current step)."""
        if self.quantize is not None:
            raise ValueError(f"this engine's weights are quantized ({self.quantize}): it serves, it cannot be updated")
        with self._cond:
            if self._thread is None or not self._thread.is_alive() or self._thread is threading.current_thread():
                with self._compute:
                    self._copy_weights(state, version)
                return
            while self._weights is not None:  # another publisher's weights go first
                self._cond.wait()
            self._weights, self._weights_error = (state, version), None
            self._cond.notify_all()
            while self._weights is not None:
                self._cond.wait()
            if self._weights_error is not None:
                raise self._weights_error

    async def publish(self, state: Mapping[str, torch.Tensor], version: int) -> None:
        """:meth:`load_weights` without blocking the event loop while a step finishes."""
        await asyncio.to_thread(self.load_weights, state, version)

    def _apply_pending_weights(self) -> None:  # decode thread, holding self._cond, between steps
        if self._weights is None:
            return
        state, version = self._weights
        try:
            with self._compute:
                self._copy_weights(state, version)
        except Exception as e:  # noqa: BLE001 - handed back to the publisher, which raises it
            self._weights_error = e
        self._weights = None
        self._cond.notify_all()

    @torch.no_grad()
    def _copy_weights(self, state: Mapping[str, torch.Tensor], version: int) -> None:
        self._drop_prefixes()  # keys computed by the old weights must not serve the new policy
        own = self.model.state_dict()
        for name, value in state.items():
            if name not in own:
                raise KeyError(f"engine has no parameter {name!r}")
            own[name].copy_(value)
        self.policy_version = version


_LIVE: weakref.WeakSet[HFEngine] = weakref.WeakSet()


@atexit.register
def _close_live_engines() -> None:
    # A decode thread still alive when the interpreter finalises makes torch abort the process
    # ("terminate called without an active exception"); stop them first.
    for engine in list(_LIVE):
        engine.shutdown()


def _deliverer(loop: asyncio.AbstractEventLoop, fut: asyncio.Future) -> Callable[[Completion | BaseException], None]:
    """A thread-safe way to resolve ``fut`` on its own event loop (once)."""

    def settle(x: Completion | BaseException) -> None:
        if fut.done():
            return
        if isinstance(x, BaseException):
            fut.set_exception(x)
        else:
            fut.set_result(x)

    def deliver(x: Completion | BaseException) -> None:
        try:
            loop.call_soon_threadsafe(settle, x)
        except RuntimeError:  # the caller's event loop has closed: nobody is waiting
            pass

    return deliver


def _fill_holes(keep: list[int]) -> list[int]:
    """The order of the rows left after some ended (``keep``, ascending): each row that stays
    within the first ``len(keep)`` places keeps its place, and the places of rows that ended
    take the rows beyond, so that a cache with room moves as few rows as ended."""
    n = len(keep)
    stay = {i for i in keep if i < n}
    tail = iter(i for i in keep if i >= n)
    return [i if i in stay else next(tail) for i in range(n)]


def _shared_prefix(prompts: list[list[int]]) -> int:
    """Length of the longest common beginning of ``prompts``, leaving each at least one token."""
    if len(prompts) < 2:
        return 0
    first, n = prompts[0], min(len(p) for p in prompts) - 1
    for p in prompts[1:]:
        k = 0
        while k < n and p[k] == first[k]:
            k += 1
        n = k
    return max(n, 0)


PASS_COST = 32  # a forward pass's own cost, in prompt tokens: a split must save more than this


def _prefill_clusters(prompts: list[list[int]]) -> list[list[int]]:
    """Indices of ``prompts`` in groups that prefill apart (:meth:`HFEngine._prefill_fresh` each,
    then merged): prompts that all begin with one system prompt but then show different worked
    examples (a mix of domains) would otherwise prefill each distinct prompt whole, left-padded to
    the longest. The distinct prompts, sorted, are split at their weakest common beginning while
    the two halves' prefill tokens - their common beginning once, then each prompt's rest padded to
    the longest rest - plus :data:`PASS_COST` are fewer than the whole's."""
    uniq: dict[tuple[int, ...], list[int]] = {}
    for i, p in enumerate(prompts):
        uniq.setdefault(tuple(p), []).append(i)
    keys = sorted(uniq)
    # lcp[k]: the common beginning of keys[k] and keys[k + 1]; a sorted run's is the least of its neighbours'
    lcp = []
    for a, b in zip(keys, keys[1:]):
        n = min(len(a), len(b))
        k = 0
        while k < n and a[k] == b[k]:
            k += 1
        lcp.append(k)

    def cost(lo: int, hi: int) -> int:  # keys[lo:hi]
        n = hi - lo
        longest = max(len(keys[k]) for k in range(lo, hi))
        head = min(min(lcp[lo:hi - 1]), min(len(keys[k]) for k in range(lo, hi)) - 1) if n > 1 else 0
        if head < MIN_SHARED_PREFIX:
            head = 0
        return head + n * (longest - head)

    def split(lo: int, hi: int) -> list[tuple[int, int]]:
        if hi - lo < 2:
            return [(lo, hi)]
        cut = min(range(lo, hi - 1), key=lambda k: lcp[k]) + 1
        if cost(lo, cut) + cost(cut, hi) + PASS_COST >= cost(lo, hi):
            return [(lo, hi)]
        return split(lo, cut) + split(cut, hi)

    return [[i for k in range(lo, hi) for i in uniq[keys[k]]] for lo, hi in split(0, len(keys))]


def _left_padded(prompts: list[list[int]], pad: int, device: torch.device, dedupe: bool = True):
    """Each distinct prompt once, left-padded: ``(distinct, row_of, input_ids [U, W],
    attention [U, W], positions [U, W])``; ``row_of[i]`` is prompt i's row. A GRPO group
    repeats one prompt n times: it is prefilled once and its cache rows copied."""
    uniq: dict[tuple[int, ...], int] = {}
    if dedupe:
        row_of = [uniq.setdefault(tuple(p), len(uniq)) for p in prompts]
        distinct = [list(p) for p in uniq]
    else:
        row_of, distinct = list(range(len(prompts))), [list(p) for p in prompts]
    width = max(len(p) for p in distinct)
    input_ids = torch.full((len(distinct), width), pad, dtype=torch.long)
    attention = torch.zeros((len(distinct), width), dtype=torch.long)
    for row, p in enumerate(distinct):
        input_ids[row, width - len(p):] = torch.tensor(p, dtype=torch.long)
        attention[row, width - len(p):] = 1
    input_ids, attention = input_ids.to(device), attention.to(device)
    positions = (attention.cumsum(-1) - 1).clamp(min=0)
    return distinct, row_of, input_ids, attention, positions
