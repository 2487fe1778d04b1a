"""Batching at the engine boundary: concurrent episodes, batched by the engine or here.

An engine that batches by itself (a :class:`~practicum.engines.base.ContinuousEngine`, such as
:class:`~practicum.engines.hf.HFEngine`) gets every request straight away through ``submit``:
it joins the running decode batch at the next step and comes back as soon as it ends, with its
own seed. Weights are published through the engine's own ``publish`` (between decode steps).

For other engines (:class:`~practicum.engines.scripted.ScriptedEngine`), batching happens here,
between calls: each episode coroutine asks for its own next turn (``await engine.generate([ids],
params)``); :class:`BatchingEngine` queues the requests and, whenever the engine is free, hands
every request waiting at that moment to one ``generate`` call of the engine underneath (an
engine that decodes a call as one batch would share the prefill of identical prompts - a
group's first turn). Each request's completion is returned to its caller as soon as its batch ends, so
an episode whose environment is fast goes on while slower ones are still executing tools.

Requests whose sampling settings differ only by ``seed`` are batched together; the batch is
sampled with the seed of its first request (the orchestrator seeds each group by its draw
index, so a synchronous run, whose batches hold a whole step in draw order, is reproducible).
Requests with other settings wait for a batch of their own.

Weights are published between batches (:meth:`BatchingEngine.publish`), never during one. An
exception from the engine underneath fails every request of that batch with
:class:`~practicum.errors.EngineFailure` (the episode records it; the orchestrator retries).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping

import torch

from practicum.engines.base import Completion, ContinuousEngine, Engine, EngineWrapper, SamplingParams
from practicum.errors import EngineFailure


class BatchingEngine(EngineWrapper):
    """Wraps an :class:`~practicum.engines.base.Engine`; has the same interface."""

    def __init__(self, engine: Engine) -> None:
        self.engine = engine
        self._pending: list[tuple[list[int], SamplingParams, asyncio.Future]] = []
        self._wake: asyncio.Event | None = None
        self._worker: asyncio.Task | None = None
        self._lock: asyncio.Lock | None = None
        self.batches = 0  # generate calls made (for metrics and tests); 0 for a continuous engine
        self.requests = 0
        self.tokens = 0  # completion tokens returned (the loop's generation throughput)
        self.continuous = isinstance(engine, ContinuousEngine)

    # --- the Engine interface -----------------------------------------------------------------


    async def generate(self, prompts: list[list[int]], params: SamplingParams) -> list[Completion]:
        if self.continuous:
            self.requests += len(prompts)
            engine: ContinuousEngine = self.engine  # type: ignore[assignment]
            try:
                if len(prompts) == 1:
                    out = [await engine.submit(prompts[0], params)]
                else:
                    out = await engine.generate(prompts, params)
                self.tokens += sum(len(c.ids) for c in out)
                return out
            except asyncio.CancelledError:
                raise
            except Exception as e:  # noqa: BLE001 - the engine boundary: any engine error fails the request
                raise EngineFailure(f"{type(e).__name__}: {e}") from e
        self._ensure_worker()
        assert self._wake is not None
        loop = asyncio.get_running_loop()
        futures = []
        for p in prompts:
            fut: asyncio.Future = loop.create_future()
            self._pending.append((p, params, fut))
            futures.append(fut)
        self.requests += len(prompts)
        self._wake.set()
        return list(await asyncio.gather(*futures))

    def load_weights(self, state: Mapping[str, torch.Tensor], version: int) -> None:
        self.engine.load_weights(state, version)

    async def publish(self, state: Mapping[str, torch.Tensor], version: int) -> None:
        """Load new weights between two batches (two decode steps for a continuous engine)."""
        if self.continuous:
            await self.engine.publish(state, version)  # type: ignore[attr-defined]
            return
        self._ensure_worker()
        assert self._lock is not None
        async with self._lock:
            self.engine.load_weights(state, version)

    async def close(self) -> None:
        if self._worker is not None:
            self._worker.cancel()
            await asyncio.gather(self._worker, return_exceptions=True)
            self._worker = None
        for _, _, fut in self._pending:
            if not fut.done():
                fut.set_exception(EngineFailure("the engine was closed"))
        self._pending.clear()

    # --- the worker ------------------------------------------------------------------------------
    def _ensure_worker(self) -> None:
        if self._worker is None or self._worker.done():
            self._wake, self._lock = asyncio.Event(), asyncio.Lock()
            self._worker = asyncio.ensure_future(self._run())

    async def _run(self) -> None:
        assert self._wake is not None and self._lock is not None
        while True:
            await self._wake.wait()
            self._wake.clear()
            await asyncio.sleep(0)  # let coroutines woken by the last batch queue their next turn
            while self._pending:
                key = _batch_key(self._pending[0][1])
                batch = [r for r in self._pending if _batch_key(r[1]) == key]
                self._pending = [r for r in self._pending if _batch_key(r[1]) != key]
                batch = [r for r in batch if not r[2].cancelled()]
                if not batch:
                    continue
                params = batch[0][1]  # the first request's seed draws for the batch
                async with self._lock:
                    self.batches += 1
                    try:
                        out = await self.engine.generate([r[0] for r in batch], params)
                    except asyncio.CancelledError:
                        raise
                    except Exception as e:  # noqa: BLE001 - the engine boundary: any engine error fails this batch
                        for _, _, fut in batch:
                            if not fut.done():
                                fut.set_exception(EngineFailure(f"{type(e).__name__}: {e}"))
                        continue
                self.tokens += sum(len(c.ids) for c in out)
                for (_, _, fut), completion in zip(batch, out):
                    if not fut.done():
                        fut.set_result(completion)


def _batch_key(p: SamplingParams) -> tuple:
    return (p.max_new_tokens, p.temperature, p.top_p, p.stop)
