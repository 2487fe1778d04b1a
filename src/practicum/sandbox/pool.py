"""A pool of warm sandbox sessions: concurrency, and no start-up time on the critical path.

``SandboxPool.session()`` hands out a session that was started ahead of time; closing it hands
it back. A handed-back session is emptied (``SandboxSession.reset``: every writable folder
wiped; no process of it survives an execution anyway) and kept for the next caller; one that
cannot be emptied, or whose sandbox died, is closed, and the pool starts a replacement in the
background. A session found dead when taken is replaced the same way, so callers never get a
dead one. ``run_python``/``exec`` on the pool are one-shot executions in a fresh-state session,
at most ``size`` at a time.

Sessions are grouped by what is fixed when a sandbox starts (memory, processes, workspace size,
network, folders); the per-execution limits (timeouts, CPU, file size, output) of a taken
session are the caller's. Only the pool's own kind is started ahead of time.
"""

from __future__ import annotations

import asyncio
import contextlib
import weakref
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

from practicum.errors import SandboxError
from practicum.sandbox.backends import get_sandbox
from practicum.sandbox.base import DEFAULT_WORKDIR, Bind, ExecResult, Limits, Sandbox, SandboxSession, SessionOptions

_Key = tuple


def _key(limits: Limits, options: SessionOptions) -> _Key:
    return (limits.memory_mb, limits.processes, limits.workspace_mb, limits.network, options)


class PooledSession(SandboxSession):
    """A session lent by a :class:`SandboxPool`; ``close()`` gives it back."""

    def __init__(self, pool: SandboxPool, inner: SandboxSession, key: _Key, limits: Limits) -> None:
        self.pool, self.inner, self.key = pool, inner, key
        self.limits, self.options = limits, inner.options
        inner.limits = limits
        self._released = False

    @property
    def alive(self) -> bool:
        return not self._released and self.inner.alive

    def _check(self) -> None:
        if self._released:
            raise SandboxError("the session was given back to its pool")

    async def exec(self, command: list[str] | str, stdin: bytes | str | None = None,
                   timeout_s: float | None = None, env: dict[str, str] | None = None) -> ExecResult:
        self._check()
        return await self.inner.exec(command, stdin=stdin, timeout_s=timeout_s, env=env)

    async def run_python(self, code: str, stdin: bytes | str | None = None, timeout_s: float | None = None) -> ExecResult:
        self._check()
        return await self.inner.run_python(code, stdin=stdin, timeout_s=timeout_s)

    async def write_file(self, path: str, data: bytes | str) -> None:
        self._check()
        await self.inner.write_file(path, data)

    async def read_file(self, path: str, max_bytes: int | None = None) -> bytes:
        self._check()
        return await self.inner.read_file(path, max_bytes)

    async def reset(self) -> bool:
        self._check()
        return await self.inner.reset()

    async def close(self) -> None:
        if self._released:
            return
        self._released = True
        await self.pool._give_back(self.inner, self.key)

    def __getattr__(self, name: str) -> object:  # backend extras (pid, program_pids, workdir...)
        if name.startswith("__") or name in ("inner", "pool", "key"):
            raise AttributeError(name)
        return getattr(self.inner, name)


class SandboxPool:
    """Warm sessions of one backend (see the module docstring). Use as an async context manager.

    ``sandbox`` is a backend or a name for :func:`get_sandbox` (default: the isolated one);
    ``size`` is how many sessions are kept warm and how many one-shot executions run at once.
    """

    def __init__(self, sandbox: Sandbox | str | None = None, size: int = 4, limits: Limits | None = None, *,
                 workdir: str = DEFAULT_WORKDIR, extra_dirs: Sequence[str] = (), binds: Sequence[Bind] = ()) -> None:
        if size < 1:
            raise SandboxError("a SandboxPool needs size >= 1")
        self.sandbox = get_sandbox(sandbox)
        self.size = size
        self.limits = limits or Limits()
        self.options = SessionOptions.make(workdir, extra_dirs, binds)
        self._key = _key(self.limits, self.options)
        self._idle: dict[_Key, list[SandboxSession]] = {}
        self._starting: set[asyncio.Task] = set()
        self._lent: set[SandboxSession] = set()
        self._lent_default: set[SandboxSession] = set()  # lent sessions of the pool's own kind
        self._sem: asyncio.Semaphore | None = None
        self._closed = False
        self.started = 0  # sessions started by the pool
        self.replaced = 0  # sessions found dead (when taken or given back) and replaced
        self.reused = 0  # sessions handed out again after a reset

    # -- lifecycle --
    async def start(self) -> SandboxPool:
        """Start ``size`` sessions now (otherwise they start as they are first needed)."""
        missing = self.size - len(self._idle.get(self._key, [])) - len(self._starting)
        await asyncio.gather(*(self._spawn() for _ in range(max(0, missing))))
        return self

    async def __aenter__(self) -> SandboxPool:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def close(self) -> None:
        """Close every session of the pool, lent ones included."""
        self._closed = True
        # sessions being started finish starting (a fraction of a second) and close themselves
        await asyncio.gather(*list(self._starting), return_exceptions=True)
        sessions = [s for idle in self._idle.values() for s in idle] + list(self._lent)
        self._idle.clear()
        self._lent.clear()
        self._lent_default.clear()
        await asyncio.gather(*(s.close() for s in sessions), return_exceptions=True)

    @property
    def idle(self) -> int:
        return sum(len(v) for v in self._idle.values())

    # -- sessions --
    async def session(self, limits: Limits | None = None, *, workdir: str | None = None,
                      extra_dirs: Sequence[str] | None = None, binds: Sequence[Bind] | None = None) -> PooledSession:
        """A warm session (fresh state) with ``limits`` (default: the pool's). Close it to give it back."""
        if self._closed:
            raise SandboxError("the pool is closed")
        limits = limits or self.limits
        options = self.options if workdir is None and extra_dirs is None and binds is None else SessionOptions.make(
            workdir or self.options.workdir,
            self.options.extra_dirs if extra_dirs is None else extra_dirs,
            self.options.binds if binds is None else binds)
        key = _key(limits, options)
        inner: SandboxSession | None = None
        idle = self._idle.get(key, [])
        while idle and inner is None:
            candidate = idle.pop()
            if candidate.alive:
                inner = candidate
            else:
                self.replaced += 1
                await candidate.close()
        if inner is None:
            inner = await self._open(limits, options)
        self._lent.add(inner)
        if key == self._key:
            self._lent_default.add(inner)
            self._refill()
        return PooledSession(self, inner, key, limits)

    async def _open(self, limits: Limits, options: SessionOptions) -> SandboxSession:
        s = await self.sandbox.session(limits, workdir=options.workdir, extra_dirs=options.extra_dirs,
                                       binds=options.binds)
        self.started += 1
        return s

    async def _spawn(self) -> None:
        s = await self._open(self.limits, self.options)
        if self._closed or len(self._idle.get(self._key, [])) >= self.size:
            await s.close()
        else:
            self._idle.setdefault(self._key, []).append(s)

    def _refill(self) -> None:
        """Start sessions in the background until ``size`` of the pool's kind are warm or lent
        (a lent session comes back, emptied, when its user closes it)."""
        missing = self.size - len(self._idle.get(self._key, [])) - len(self._starting) - len(self._lent_default)
        for _ in range(max(0, missing)):
            task = asyncio.ensure_future(self._spawn())
            self._starting.add(task)
            task.add_done_callback(self._spawned)

    def _spawned(self, task: asyncio.Task) -> None:
        self._starting.discard(task)
        if not task.cancelled() and task.exception() is not None:
            pass  # the next session() starts one in the foreground and raises what went wrong

    async def _give_back(self, inner: SandboxSession, key: _Key) -> None:
        # counted as lent until emptied, so that no replacement starts meanwhile
        keep = not self._closed and inner.alive and len(self._idle.get(key, [])) < self.size
        keep = keep and await inner.reset()
        self._lent.discard(inner)
        self._lent_default.discard(inner)
        if keep and not self._closed:
            self._idle.setdefault(key, []).append(inner)
            self.reused += 1
            return
        if not inner.alive and not self._closed:
            self.replaced += 1
        await inner.close()
        if not self._closed and key == self._key:
            self._refill()

    # -- one-shot executions --
    def _slots(self) -> asyncio.Semaphore:
        if self._sem is None:
            self._sem = asyncio.Semaphore(self.size)
        return self._sem

    async def run_python(self, code: str, stdin: bytes | str | None = None, timeout_s: float | None = None) -> ExecResult:
        """Run Python source in a fresh-state session of the pool (through its fork server)."""
        async with self._slots():
            s = await self.session()
            try:
                return await s.run_python(code, stdin=stdin, timeout_s=timeout_s)
            finally:
                with contextlib.suppress(Exception):
                    await s.close()

    async def exec(self, command: list[str] | str, stdin: bytes | str | None = None,
                   timeout_s: float | None = None, env: dict[str, str] | None = None) -> ExecResult:
        """Run a command in a fresh-state session of the pool."""
        async with self._slots():
            s = await self.session()
            try:
                return await s.exec(command, stdin=stdin, timeout_s=timeout_s, env=env)
            finally:
                with contextlib.suppress(Exception):
                    await s.close()


class LoopPool:
    """A :class:`~practicum.sandbox.SandboxPool` per running event loop, closed when that loop
    shuts down.

    A pool's sessions are tied to the event loop that started them, and a run may use several
    loops (each ``asyncio.run``). The pool of a loop is created on first use and closed by the
    loop's own shutdown (``asyncio.run`` finalises async generators before it closes the loop:
    a guard generator parked at a ``yield`` closes the pool in its ``finally``).
    """

    def __init__(self, factory: Callable[[], Any]) -> None:
        self.factory = factory
        self._pools: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Any] = weakref.WeakKeyDictionary()
        self._guards: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Any] = weakref.WeakKeyDictionary()

    def pool(self) -> Any:
        loop = asyncio.get_running_loop()
        pool = self._pools.get(loop)
        if pool is None:
            pool = self._pools[loop] = self.factory()
            guard = self._guards[loop] = self._close_at_shutdown(pool)
            loop.create_task(self._park(guard))
        return pool

    @staticmethod
    async def _park(guard: AsyncIterator[None]) -> None:
        await anext(guard)  # runs to the yield: the loop now finalises it at shutdown

    @staticmethod
    async def _close_at_shutdown(pool: Any) -> AsyncIterator[None]:
        try:
            yield
        finally:
            await pool.close()

    async def session(self, limits: Limits | None = None) -> SandboxSession:
        return await self.pool().session(limits)

    async def close(self) -> None:
        """Close this loop's pool now (it is reopened on next use)."""
        loop = asyncio.get_running_loop()
        pool = self._pools.pop(loop, None)
        self._guards.pop(loop, None)
        if pool is not None:
            await pool.close()
