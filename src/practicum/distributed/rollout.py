"""Rollout workers as Ray actors behind one engine.

:class:`RayEngine` is a :class:`~practicum.engines.base.ContinuousEngine` for the loop: each
request goes to the least-loaded *ready* worker, which is an :class:`RolloutWorker` actor holding
an :class:`~practicum.engines.hf.HFEngine` (continuous batching inside the worker).

**Weights.** :meth:`RayEngine.publish` puts the state dict into Ray's object store once (or takes
the reference a trainer actor already put there) and hands the reference to every live worker,
which copies the weights in between two decode steps. A worker is *ready* only while it holds
the engine's current version: after a publish, new requests wait for workers that have loaded
it (requests already running finish under the weights they started with, as in the in-process
engine). A replacement worker loads the current weights before it is marked ready, and records
the version it held at its first request (tested).

**Health.** A background task asks every worker for its health every ``health_interval``
seconds; one that fails to answer within ``health_timeout``, or whose actor died, is killed and
replaced. A request in flight on a worker that dies fails with
:class:`~practicum.errors.EngineFailure`: the episode records it and the orchestrator retries it
as a new attempt, so nothing is lost and ``practicum runs audit`` balances. :meth:`add_workers`
grows the pool of a running job.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from practicum.distributed.config import DistributedConfig, Placement
from practicum.engines.base import Completion, SamplingParams
from practicum.errors import EngineFailure


def ensure_ray(cfg: DistributedConfig) -> Any:
    """Ray, initialised: joined to ``cfg.address``, or a local instance with enough logical CPUs
    for every actor the config asks for (logical CPUs are a scheduling budget, not cores)."""
    cpus_needed = (cfg.rollout.num_cpus * cfg.rollout_workers + cfg.trainer.num_cpus
                   + cfg.sandbox.num_cpus * cfg.sandbox_workers + 1)  # +1: room for a replacement
    try:
        import ray
    except ImportError as e:  # an optional dependency
        raise EngineFailure("distributed.backend: ray needs Ray: pip install 'practicum[ray]'") from e
    if not ray.is_initialized():
        if cfg.address is not None:
            ray.init(address=cfg.address, log_to_driver=False)
        else:
            ray.init(num_cpus=max(int(cpus_needed + 0.999), os.cpu_count() or 1), include_dashboard=False,
                     log_to_driver=False)
    return ray


def actor_options(p: Placement, name: str | None) -> dict[str, Any]:
    opts: dict[str, Any] = {"num_cpus": p.num_cpus, "num_gpus": p.num_gpus, "max_restarts": 0}
    if name is not None:
        opts["name"] = name
    if p.resources:
        opts["resources"] = dict(p.resources)
    return opts


def worker_threads(p: Placement) -> int:
    return p.threads or max(1, int(p.num_cpus))


class RolloutWorker:
    """One rollout worker (made a Ray actor by :class:`RayEngine`): an HFEngine in its own process."""

    def __init__(self, path: str, dtype: str, device: str, threads: int, kind: str = "hf",
                 options: dict[str, Any] | None = None, hf: dict[str, Any] | None = None) -> None:
        torch.set_num_threads(threads)
        self.engine: Any
        if kind == "vllm":
            from practicum.engines.batching import BatchingEngine
            from practicum.engines.vllm import VLLMEngine

            self.engine = BatchingEngine(VLLMEngine(path, getattr(torch, dtype), options=options))
        else:
            from practicum.engines.hf import HFEngine

            self.engine = HFEngine(path, dtype=getattr(torch, dtype), device=device, **(hf or {}))
        self.first_request_version: int | None = None  # the version it held when its first request came
        self.requests = 0

    async def generate(self, prompts: list[list[int]], params: SamplingParams) -> list[Completion]:
        if self.first_request_version is None:
            self.first_request_version = self.engine.policy_version
        self.requests += len(prompts)
        if len(prompts) == 1 and hasattr(self.engine, "submit"):
            return [await self.engine.submit(prompts[0], params)]
        return await self.engine.generate(prompts, params)

    async def load_weights(self, state: Mapping[str, torch.Tensor], version: int) -> int:
        await self.engine.publish(state, version)
        return self.engine.policy_version

    async def health(self) -> dict[str, Any]:
        return {"pid": os.getpid(), "version": self.engine.policy_version, "requests": self.requests,
                "first_request_version": self.first_request_version, "steps": getattr(self.engine, "steps", 0)}

    async def close(self) -> None:
        await self.engine.close()


@dataclass(eq=False)
class _Worker:
    name: str
    handle: Any
    version: int = -1  # the weights it holds (-1: not known yet)
    inflight: int = 0
    alive: bool = True
    started: float = field(default_factory=time.monotonic)


class RayEngine:
    """Rollout workers as one engine (see the module)."""

    continuous = True

    def __init__(self, model_path: str | Path, dtype: torch.dtype, cfg: DistributedConfig, device: str = "cpu",
                 kind: str = "hf", options: dict[str, Any] | None = None, hf: Mapping[str, Any] | None = None) -> None:
        """``options``: vllm.LLM's extra arguments (``kind: vllm``); ``hf``: HFEngine's sizes
        (``ModelSection.hf_options()``: max_batch, prefix_cache_mb, kv_room, kv_row_room)."""
        from transformers import AutoTokenizer, GenerationConfig

        from practicum.engines.render import ChatRenderer

        self.cfg = cfg
        self.path = str(model_path)
        self._args = (self.path, str(dtype).removeprefix("torch."), device, worker_threads(cfg.rollout), kind,
                      dict(options or {}), dict(hf or {}))
        try:
            eos = GenerationConfig.from_pretrained(self.path).eos_token_id
        except OSError:
            eos = None
        self.renderer = ChatRenderer(AutoTokenizer.from_pretrained(self.path), eos)
        self.ray = ensure_ray(cfg)
        self.policy_version = 0
        self._weights: Any = None  # object ref of the current weights (None: the checkpoint's own)
        self.workers: list[_Worker] = []
        self.replaced = 0  # workers found dead or hung and replaced
        self.final_health: dict[str, dict[str, Any]] = {}  # each worker's last report, kept by close()
        self.errors: list[str] = []  # replacements that failed (the next health check tries again)
        self.tokens = 0
        self._serial = 0
        self._ready: asyncio.Event | None = None  # made on the running loop
        self._health: asyncio.Task | None = None
        self._closing = False
        starting = [self._spawn() for _ in range(cfg.rollout_workers)]
        self.ray.get([w.handle.health.remote() for w in starting], timeout=cfg.start_timeout)
        for w in starting:
            w.version = 0
        self.workers.extend(starting)

    # --- workers ----------------------------------------------------------------------------------
    def _spawn(self) -> _Worker:
        self._serial += 1
        name = f"practicum-rollout-{os.getpid()}-{self._serial}"
        cls = self.ray.remote(RolloutWorker).options(**actor_options(self.cfg.rollout, name))
        return _Worker(name, cls.remote(*self._args))

    async def add_workers(self, n: int) -> list[_Worker]:
        """Start ``n`` more workers on a running job; each gets traffic once it holds the current weights."""
        new = [self._spawn() for _ in range(n)]
        await asyncio.gather(*(self._bring_up(w) for w in new))
        return new

    async def _bring_up(self, w: _Worker) -> None:
        """Wait for a new worker's model, give it the current weights, then let traffic in."""
        await asyncio.wait_for(w.handle.health.remote(), self.cfg.start_timeout)
        version = self.policy_version
        if self._weights is not None:
            await asyncio.wait_for(w.handle.load_weights.remote(self._weights, version), self.cfg.start_timeout)
        w.version = version if self._weights is not None else 0
        if w not in self.workers:
            self.workers.append(w)
        self._wake()

    async def _replace(self, w: _Worker, why: str) -> None:
        if not w.alive:
            return
        w.alive = False
        self.replaced += 1
        self.workers = [x for x in self.workers if x is not w]
        try:
            self.ray.kill(w.handle, no_restart=True)
        except Exception:  # noqa: BLE001 - already gone
            pass
        if self._closing:
            return
        new = self._spawn()
        try:
            await self._bring_up(new)
        except Exception as e:  # noqa: BLE001 - the next health check tries again
            self.ray.kill(new.handle, no_restart=True)
            self.replaced -= 1
            w.alive = True  # counted again as missing
            raise EngineFailure(f"could not replace rollout worker {w.name} ({why}): {e}") from e

    def _wake(self) -> None:
        if self._ready is not None:
            self._ready.set()

    def _ready_workers(self) -> list[_Worker]:
        return [w for w in self.workers if w.alive and w.version == self.policy_version]

    async def _pick(self) -> _Worker:
        self._ensure_health()
        deadline = time.monotonic() + self.cfg.start_timeout
        while True:
            ready = self._ready_workers()
            if ready:
                return min(ready, key=lambda w: w.inflight)
            if time.monotonic() > deadline:
                raise EngineFailure(f"no rollout worker holds policy version {self.policy_version}")
            assert self._ready is not None
            self._ready.clear()
            try:
                await asyncio.wait_for(self._ready.wait(), timeout=1.0)
            except TimeoutError:
                pass

    # --- the Engine interface ---------------------------------------------------------------------
    async def submit(self, ids: list[int], params: SamplingParams) -> Completion:
        (c,) = await self.generate([ids], params)
        return c

    async def generate(self, prompts: list[list[int]], params: SamplingParams) -> list[Completion]:
        """One call goes to one worker (a group's prompts share its prefill there)."""
        from ray.exceptions import RayActorError

        w = await self._pick()
        w.inflight += len(prompts)
        try:
            out = await w.handle.generate.remote(prompts, params)
        except RayActorError as e:
            asyncio.ensure_future(self._replace_quietly(w, f"died: {type(e).__name__}"))
            raise EngineFailure(f"rollout worker {w.name} died during the request ({type(e).__name__})") from e
        finally:
            w.inflight -= len(prompts)
        self.tokens += sum(len(c.ids) for c in out)
        return list(out)

    async def _replace_quietly(self, w: _Worker, why: str) -> None:
        try:
            await self._replace(w, why)
        except EngineFailure as e:
            self.errors.append(str(e))

    async def publish(self, state: Mapping[str, torch.Tensor] | Any, version: int) -> None:
        """Weights to every live worker through the object store; only workers that hold them get
        new requests. ``state``: a state dict, or an object reference to one."""
        ref = state if isinstance(state, self.ray.ObjectRef) else self.ray.put(dict(state))
        self._weights, self.policy_version = ref, version
        live = [w for w in self.workers if w.alive]

        async def one(w: _Worker) -> None:
            try:
                w.version = await asyncio.wait_for(w.handle.load_weights.remote(ref, version), self.cfg.health_timeout)
            except Exception as e:  # noqa: BLE001 - a worker that cannot load the weights is replaced
                await self._replace_quietly(w, f"load_weights failed: {type(e).__name__}")
            self._wake()

        await asyncio.gather(*(one(w) for w in live))

    def load_weights(self, state: Mapping[str, torch.Tensor] | Any, version: int) -> None:
        """:meth:`publish` from synchronous code (a resume loading a checkpoint)."""
        ref = state if isinstance(state, self.ray.ObjectRef) else self.ray.put(dict(state))
        self._weights, self.policy_version = ref, version
        live = [w for w in self.workers if w.alive]
        versions = self.ray.get([w.handle.load_weights.remote(ref, version) for w in live], timeout=self.cfg.start_timeout)
        for w, v in zip(live, versions):
            w.version = v

    # --- health -----------------------------------------------------------------------------------
    def _ensure_health(self) -> None:
        if self._ready is None:
            self._ready = asyncio.Event()
        if self._health is None or self._health.done():
            self._health = asyncio.ensure_future(self._health_loop())

    async def _health_loop(self) -> None:
        while not self._closing:
            await asyncio.sleep(self.cfg.health_interval)
            await self.check_health()

    async def check_health(self) -> dict[str, dict[str, Any]]:
        """Ask every worker; replace the ones that do not answer in time. Returns their answers."""
        out: dict[str, dict[str, Any]] = {}

        async def one(w: _Worker) -> None:
            try:
                out[w.name] = await asyncio.wait_for(w.handle.health.remote(), self.cfg.health_timeout)
            except Exception as e:  # noqa: BLE001 - dead, or hung past the timeout
                await self._replace_quietly(w, f"health check failed: {type(e).__name__}")

        await asyncio.gather(*(one(w) for w in list(self.workers) if w.alive))
        return out

    async def close(self) -> None:
        """Stop the health checks, keep each worker's last health report (``final_health``) and
        stop the workers."""
        self._closing = True
        if self._health is not None:
            self._health.cancel()
            await asyncio.gather(self._health, return_exceptions=True)
        if self.workers:
            self.final_health = await self.check_health()
        for w in self.workers:
            try:
                self.ray.kill(w.handle, no_restart=True)
            except Exception:  # noqa: BLE001
                pass
        self.workers = []
