"""Isolated execution of untrusted code. See docs/sandbox.md and each backend's threat model.

    from practicum.sandbox import get_sandbox, SandboxPool, Limits

    sandbox = get_sandbox()                      # the isolated backend, or SandboxError saying why not
    async with await sandbox.session(Limits(timeout_s=5)) as s:
        result = await s.run_python("print(6 * 7)")   # ExecResult(status='ok', stdout='42\\n', ...)

    async with SandboxPool(size=4) as pool:      # warm sessions for concurrency
        async with await pool.session() as s: ...
"""

from practicum.errors import SandboxError
from practicum.sandbox.backends import get_sandbox, report
from practicum.sandbox.base import (
    DEFAULT_WORKDIR,
    Bind,
    ExecResult,
    ExecStatus,
    Limits,
    Sandbox,
    SandboxSession,
    SessionOptions,
)
from practicum.sandbox.hidden import hide
from practicum.sandbox.pool import LoopPool, PooledSession, SandboxPool

__all__ = [
    "DEFAULT_WORKDIR", "Bind", "ExecResult", "ExecStatus", "Limits", "LoopPool", "PooledSession", "Sandbox", "SandboxError",
    "SandboxPool", "SandboxSession", "SessionOptions", "get_sandbox", "hide", "report",
]
