"""How an execution's outcome becomes an :class:`~practicum.sandbox.base.ExecResult`: the
status rules, shared by every backend, and the errors of refused file operations.

A backend describes what it saw as a :class:`RunReport` (the fork server's wire report, or a
local process's wait status) and :func:`exec_result` decides the status, in this order: could
not start (``error``); the memory cgroup killed a process of the execution (``memory``, whatever
the exit status: the victim may be a child, or the program itself); wall-clock or CPU limit
(``timeout``); a ``MemoryError`` under the address-space limit with a non-zero exit (``memory``);
any other signal (``killed``); else ``ok`` with the exit code.
"""

from __future__ import annotations

import signal
from dataclasses import dataclass

from practicum.errors import SandboxError
from practicum.sandbox.base import ExecResult, Limits


@dataclass(frozen=True)
class RunReport:
    """What a backend saw of one execution, before the status rules."""

    exit_code: int | None  # None when killed by a signal (or never started)
    signal: int | None
    timed_out: bool
    duration_s: float
    stdout: bytes
    stderr: bytes
    truncated: bool  # stdout or stderr exceeded the cap
    memory_error: bool = False  # stderr's last line starts with MemoryError
    exec_error: str = ""  # why the program could not start
    oom: bool = False  # the session's memory cgroup killed a process during this execution
    cpu_s: float | None = None  # user + system CPU seconds of the execution's processes (None: not measured)

    @classmethod
    def from_wire(cls, head: dict, blob: bytes, oom: bool) -> RunReport:
        """From the fork server's report header and its stdout+stderr blob."""
        n = head["stdout_len"]
        return cls(exit_code=head["exit_code"], signal=head["signal"], timed_out=head["timed_out"],
                   duration_s=head["duration"], stdout=blob[:n], stderr=blob[n:], truncated=head["truncated"],
                   memory_error=head["memory_error"], exec_error=head.get("exec_error") or "", oom=oom,
                   cpu_s=head.get("cpu"))


def exec_result(r: RunReport, limits: Limits, timeout: float) -> ExecResult:
    """The record of one execution (the status rules of the module docstring)."""
    common = dict(exit_code=r.exit_code, stdout=r.stdout.decode(errors="replace"),
                  stderr=r.stderr.decode(errors="replace"), truncated=r.truncated, duration_s=r.duration_s,
                  signal=r.signal, cpu_s=r.cpu_s)
    if r.exec_error:
        return ExecResult(status="error", detail=f"could not start: {r.exec_error}", **common)  # type: ignore[arg-type]
    if r.oom:
        return ExecResult(status="memory", detail=f"the memory limit ({limits.memory_mb} MiB, with the session's "
                          "files and buffers) was reached; the kernel killed a process", **common)  # type: ignore[arg-type]
    if r.timed_out:
        return ExecResult(status="timeout", detail=f"wall-clock limit of {timeout:g} s reached; its process tree was killed", **common)  # type: ignore[arg-type]
    if r.signal == signal.SIGXCPU:
        return ExecResult(status="timeout", detail=f"CPU time limit of {limits.cpu_s:g} s reached", **common)  # type: ignore[arg-type]
    if r.memory_error and r.exit_code not in (0, None):
        return ExecResult(status="memory", detail=f"MemoryError under the {limits.memory_mb} MiB address-space limit", **common)  # type: ignore[arg-type]
    if r.signal is not None:
        name = signal.Signals(r.signal).name if r.signal in signal.Signals._value2member_map_ else str(r.signal)
        why = " (file size limit)" if r.signal == signal.SIGXFSZ else ""
        return ExecResult(status="killed", detail=f"killed by {name}{why}", **common)  # type: ignore[arg-type]
    return ExecResult(status="ok", **common)  # type: ignore[arg-type]


def file_error(head: dict) -> Exception:
    """The exception for a refused file operation: FileNotFoundError, IsADirectoryError, OSError
    or SandboxError."""
    kind, msg = head.get("kind"), head.get("message", "file operation refused")
    if kind == "not_found":
        return FileNotFoundError(msg)
    if kind == "is_dir":
        return IsADirectoryError(msg)
    if kind == "os":
        return OSError(head.get("errno") or 0, msg)
    return SandboxError(msg)
