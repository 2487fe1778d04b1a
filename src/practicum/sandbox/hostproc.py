"""Host-side process helpers shared by the backends: killing one sandbox process, reading a
process's real uid, closing an exited subprocess's pipes, keeping the tail of a stream.

Nothing here signals more than one process at a time, and nothing signals this process."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal

from practicum.errors import SandboxError


def kill_sandbox_pid(pid: int) -> None:
    """SIGKILL one host process of a sandbox (an nsjail we started, or a member of a session's
    own cgroup). Refuses every pid that could mean more than one process, or this process."""
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 1 or pid == os.getpid():
        raise SandboxError(f"refusing to kill pid {pid!r}")
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, signal.SIGKILL)


def real_uid(pid: int) -> int | None:
    """The real uid of host process ``pid``; None when it is gone or a zombie (dead, waiting
    for the host's init to reap it)."""
    try:
        with open(f"/proc/{pid}/status", "rb") as f:
            for line in f:
                if line.startswith(b"State:") and line.split()[1] in (b"Z", b"X"):
                    return None
                if line.startswith(b"Uid:"):
                    return int(line.split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return None


def close_transport(proc: asyncio.subprocess.Process) -> None:
    """Close the pipes of an exited process now, on its own loop (left to the garbage
    collector, they are closed after the loop is gone and asyncio complains)."""
    transport = getattr(proc, "_transport", None)
    if transport is not None:
        with contextlib.suppress(Exception):
            transport.close()


async def read_tail(stream: asyncio.StreamReader | None, tail: bytearray, keep: int = 8192) -> None:
    """Keep the last ``keep`` bytes of ``stream`` in ``tail``. A plain function, not a method:
    the task must not hold a session, so that a session dropped without close() is collected
    and its finalizer kills the sandbox."""
    while stream is not None and (chunk := await stream.read(4096)):
        tail += chunk
        del tail[:-keep]
