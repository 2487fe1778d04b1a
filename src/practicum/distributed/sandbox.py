"""Sandbox sessions held by Ray actors on CPU nodes.

A :class:`SandboxWorker` actor keeps warm :class:`~practicum.sandbox.SandboxPool` s on its node
(one per kind of pool a domain asks for: limits, size, backend) and lends their sessions by id.
The driver side, :class:`RemoteSessions`, is the pool factory that domains receive in their
:class:`~practicum.domains.plugin.BuildContext` (``ctx.sessions``): a domain asks for a pool and
gets a :class:`RemotePool` whose sessions (:class:`RemoteSession`) forward every call - exec,
run_python, write_file, read_file, reset, close - to the worker that holds them. Nothing in a
domain or verifier changes; the sandbox's isolation, limits and reset happen on the worker's
node exactly as they would locally.

Sessions are spread over the workers by the number each has lent. A worker that dies fails the
calls of its sessions with :class:`~practicum.sandbox.SandboxError` (the environment records an
environment failure and the orchestrator retries the episode) and is replaced at the next
session it would have been given.
"""

from __future__ import annotations

import itertools
import os
from typing import Any

from practicum.distributed.config import DistributedConfig
from practicum.distributed.rollout import actor_options, ensure_ray
from practicum.sandbox import hidden
from practicum.sandbox.base import ExecResult, SandboxError, SandboxSession
from practicum.sandbox.meter import charge


class SandboxWorker:
    """One sandbox worker (made a Ray actor by :class:`RemoteSessions`)."""

    def __init__(self) -> None:
        self.pools: dict[tuple, Any] = {}
        self.sessions: dict[int, Any] = {}
        self._ids = itertools.count(1)
        self.opened = 0
        self.calls = 0

    async def open(self, pool_key: tuple, limits: Any, hidden: tuple[str, ...] = ()) -> tuple[int, bool]:
        from practicum.sandbox import SandboxPool, get_sandbox, hide

        hide(*hidden)  # the task data the driver hid (practicum.sandbox.hidden), before a pool starts
        pool_limits, size, backend = pool_key
        pool = self.pools.get(pool_key)
        if pool is None:
            pool = self.pools[pool_key] = SandboxPool(get_sandbox(backend), size=size, limits=pool_limits)
        session = await pool.session(limits)
        sid = next(self._ids)
        self.sessions[sid] = session
        self.opened += 1
        return sid, session.alive

    async def call(self, sid: int, method: str, args: tuple, kwargs: dict) -> tuple[Any, bool]:
        session = self.sessions.get(sid)
        if session is None:
            raise SandboxError(f"no session {sid} on this sandbox worker (closed, or the worker was replaced)")
        self.calls += 1
        out = await getattr(session, method)(*args, **kwargs)
        return out, session.alive

    async def close_session(self, sid: int) -> None:
        session = self.sessions.pop(sid, None)
        if session is not None:
            await session.close()

    async def health(self) -> dict[str, Any]:
        return {"pid": os.getpid(), "open": len(self.sessions), "opened": self.opened, "calls": self.calls}

    async def shutdown(self) -> None:
        for sid in list(self.sessions):
            await self.close_session(sid)
        for pool in self.pools.values():
            await pool.close()
        self.pools.clear()


class RemoteSessions:
    """The pool factory of Ray mode: ``sessions(limits=None, size=4, backend=None)``."""

    def __init__(self, cfg: DistributedConfig, default_backend: str = "auto") -> None:
        self.cfg, self.default_backend = cfg, default_backend
        self.ray = ensure_ray(cfg)
        self.workers: list[Any] = []
        self.lent: dict[int, int] = {}  # worker index -> sessions lent
        self.replaced = 0
        self.final_health: list[dict[str, Any]] = []
        for _ in range(cfg.sandbox_workers):
            self._spawn()

    def _spawn(self, at: int | None = None) -> None:
        cls = self.ray.remote(SandboxWorker).options(**actor_options(self.cfg.sandbox, None))
        handle = cls.remote()
        if at is None:
            self.workers.append(handle)
            self.lent[len(self.workers) - 1] = 0
        else:
            self.workers[at] = handle
            self.lent[at] = 0

    def __call__(self, limits: Any = None, size: int = 4, backend: str | None = None) -> RemotePool:
        return RemotePool(self, limits, size, backend or self.default_backend)

    def pick(self) -> int:
        return min(self.lent, key=lambda i: self.lent[i])

    async def health(self) -> list[dict[str, Any]]:
        return [await w.health.remote() for w in self.workers]

    def close(self) -> None:
        """Keep each worker's last health report (``final_health``), then stop the workers."""
        for w in self.workers:
            try:
                self.final_health.append(self.ray.get(w.health.remote(), timeout=30))
            except Exception:  # noqa: BLE001 - dead already
                pass
            try:
                self.ray.get(w.shutdown.remote(), timeout=30)
            except Exception:  # noqa: BLE001 - dead already
                pass
            try:
                self.ray.kill(w, no_restart=True)
            except Exception:  # noqa: BLE001
                pass
        self.workers = []


class RemotePool:
    """What a domain holds as its sandbox pool in Ray mode (the interface of SandboxPool it uses)."""

    def __init__(self, owner: RemoteSessions, limits: Any, size: int, backend: str) -> None:
        from practicum.sandbox.base import Limits

        self.owner, self.size, self.backend = owner, size, backend
        self.limits = limits or Limits()

    async def session(self, limits: Any = None) -> RemoteSession:
        from ray.exceptions import RayActorError

        owner = self.owner
        i = owner.pick()
        try:
            sid, alive = await owner.workers[i].open.remote((self.limits, self.size, self.backend), limits or self.limits,
                                                            hidden.registered())
        except RayActorError as e:
            owner._spawn(at=i)
            owner.replaced += 1
            raise SandboxError(f"sandbox worker {i} died ({type(e).__name__}); it was replaced") from e
        owner.lent[i] += 1
        return RemoteSession(owner, i, owner.workers[i], sid, alive, limits or self.limits)

    async def run_python(self, code: str, stdin: bytes | str | None = None, timeout_s: float | None = None) -> ExecResult:
        s = await self.session()
        try:
            return await s.run_python(code, stdin=stdin, timeout_s=timeout_s)
        finally:
            await s.close()

    async def exec(self, command: list[str] | str, stdin: bytes | str | None = None,
                   timeout_s: float | None = None, env: dict[str, str] | None = None) -> ExecResult:
        s = await self.session()
        try:
            return await s.exec(command, stdin=stdin, timeout_s=timeout_s, env=env)
        finally:
            await s.close()

    async def close(self) -> None:
        return None  # the workers own the sessions; RemoteSessions.close() stops them


class RemoteSession(SandboxSession):
    """A session lent by a sandbox worker; every call runs there."""

    def __init__(self, owner: RemoteSessions, index: int, worker: Any, sid: int, alive: bool, limits: Any) -> None:
        self.owner, self.index, self.worker, self.sid = owner, index, worker, sid
        self._alive, self._closed = alive, False
        self.limits = limits

    @property
    def alive(self) -> bool:
        return self._alive and not self._closed

    async def _call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        from ray.exceptions import RayActorError

        if self._closed:
            raise SandboxError("the session was given back to its pool")
        try:
            out, self._alive = await self.worker.call.remote(self.sid, method, args, kwargs)
        except RayActorError as e:
            self._alive = False
            raise SandboxError(f"the sandbox worker holding this session died ({type(e).__name__})") from e
        return out

    async def exec(self, command: list[str] | str, stdin: bytes | str | None = None,
                   timeout_s: float | None = None, env: dict[str, str] | None = None) -> ExecResult:
        result = await self._call("exec", command, stdin=stdin, timeout_s=timeout_s, env=env)
        charge(result)  # the worker ran it outside any episode's meter: charged here, in the episode's call
        return result

    async def run_python(self, code: str, stdin: bytes | str | None = None, timeout_s: float | None = None) -> ExecResult:
        result = await self._call("run_python", code, stdin=stdin, timeout_s=timeout_s)
        charge(result)
        return result

    async def write_file(self, path: str, data: bytes | str) -> None:
        await self._call("write_file", path, data)

    async def read_file(self, path: str, max_bytes: int | None = None) -> bytes:
        return await self._call("read_file", path, max_bytes)

    async def reset(self) -> bool:
        return bool(await self._call("reset"))

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self.owner.lent[self.index] = max(0, self.owner.lent.get(self.index, 1) - 1)
        try:
            await self.worker.close_session.remote(self.sid)
        except Exception:  # noqa: BLE001 - the worker died: its sessions died with it
            pass
