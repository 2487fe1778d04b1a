"""The Sandbox interface: isolated execution of untrusted code, per-episode sessions.

A :class:`Sandbox` is a backend (how isolation is achieved); a :class:`SandboxSession` is one
episode's private workspace inside it. Everything a program does is reported as an
:class:`ExecResult` record — a timeout, a memory kill or a crash of the program is data, never
an exception. Exceptions are reserved for misuse (a path that escapes the workspace) and for
a backend that cannot work at all (:class:`~practicum.errors.SandboxError`).

The threat model of each backend is stated in its module docstring.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

ExecStatus = Literal["ok", "timeout", "memory", "killed", "error"]


@dataclass(frozen=True)
class Limits:
    """Resource limits of one session (applied to every execution in it)."""

    timeout_s: float = 10.0  # wall time per execution; the whole process tree is killed after it
    cpu_s: float = 10.0  # CPU time per execution (RLIMIT_CPU)
    memory_mb: int = 512  # address space / cgroup memory per execution
    processes: int = 64  # most processes (cgroup pids or RLIMIT_NPROC under an unprivileged uid)
    file_size_mb: int = 64  # largest file a program may write (RLIMIT_FSIZE)
    workspace_mb: int = 256  # size cap of the workspace (tmpfs)
    output_bytes: int = 64 * 1024  # stdout and stderr are each captured up to this many bytes
    network: bool = False  # False: a private network namespace with loopback only


@dataclass(frozen=True)
class ExecResult:
    status: ExecStatus  # ok: ran to completion (any exit code); timeout; memory; killed (by a signal); error (could not start)
    exit_code: int | None  # None when killed by a signal
    stdout: str
    stderr: str
    truncated: bool  # stdout or stderr exceeded Limits.output_bytes
    duration_s: float
    signal: int | None = None
    detail: str = ""  # why, in words, when status is not ok

    @property
    def ok(self) -> bool:
        return self.status == "ok" and self.exit_code == 0

    def to_json(self) -> dict:
        return {
            "status": self.status, "exit_code": self.exit_code, "stdout": self.stdout, "stderr": self.stderr,
            "truncated": self.truncated, "duration_s": self.duration_s, "signal": self.signal, "detail": self.detail,
        }


class SandboxSession(abc.ABC):
    """One private workspace and the executions in it. Use as an async context manager."""

    @abc.abstractmethod
    async def exec(
        self,
        command: list[str] | str,
        stdin: bytes | str | None = None,
        timeout_s: float | None = None,
        env: dict[str, str] | None = None,
    ) -> ExecResult:
        """Run a command (argv list, or a string for ``/bin/sh -c``) in the workspace."""

    @abc.abstractmethod
    async def run_python(self, code: str, stdin: bytes | str | None = None, timeout_s: float | None = None) -> ExecResult:
        """Run Python source in the workspace (through the fork server where the backend has one)."""

    @abc.abstractmethod
    async def write_file(self, path: str, data: bytes | str) -> None:
        """Write a file inside the workspace (relative path; parents created)."""

    @abc.abstractmethod
    async def read_file(self, path: str, max_bytes: int | None = None) -> bytes:
        """Read a file inside the workspace, never following a link out of it."""

    @abc.abstractmethod
    async def close(self) -> None:
        """Kill every process of the session and delete its workspace."""

    async def __aenter__(self) -> SandboxSession:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


class Sandbox(abc.ABC):
    """A backend. ``name`` is what configs and ``practicum doctor`` call it."""

    name: str
    isolated: bool  # False only for the local backend

    @abc.abstractmethod
    async def session(self, limits: Limits | None = None) -> SandboxSession:
        """Open a fresh session with an empty private workspace."""

    @classmethod
    @abc.abstractmethod
    def available(cls) -> tuple[bool, str]:
        """Whether this backend works on this machine, and why not."""


@dataclass
class Workspace:
    """Host-side facts of a session's workspace (for backends and tests)."""

    host_path: Path
    inside_path: str = "/workspace"
    files: dict[str, int] = field(default_factory=dict)
