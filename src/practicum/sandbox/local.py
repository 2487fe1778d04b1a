"""The local backend: limits only, NO isolation. A test seam and a last resort.

Threat model: none. A program run here runs as the calling user (often root), sees the host's
files, network, processes and environment-free but otherwise unchanged machine, and can do
anything that user can. What it does get: a private temporary workspace folder, a clean
environment, no inherited descriptors, rlimits per execution (address space, CPU seconds, file
size, descriptors, no core files; processes only for a non-root user), a wall-clock timeout
after which its process group is killed, and capped output. A program that leaves its process
group (``setsid`` in a double fork) can outlive its run; one that writes outside the workspace
succeeds. Use it only for code you trust, or where namespaces do not exist; it warns on every
construction and :func:`~practicum.sandbox.get_sandbox` never picks it unless asked by name.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import resource
import shutil
import signal
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Sequence

from practicum.errors import SandboxError
from practicum.sandbox import forkserver
from practicum.sandbox.base import (
    DEFAULT_WORKDIR,
    Bind,
    ExecResult,
    Limits,
    Sandbox,
    SandboxSession,
    SessionOptions,
    utf8,
)
from practicum.sandbox.hostproc import close_transport
from practicum.sandbox.meter import charge
from practicum.sandbox.results import RunReport, exec_result

NOT_ISOLATED = ("the 'local' sandbox is NOT isolated: programs run as this user with full access to the "
                "machine's files, network and processes (limits only); use it only for trusted code")


class NotIsolatedWarning(UserWarning):
    """Emitted whenever a sandbox that does not isolate is created."""


def _rlimits(limits: Limits) -> Callable[[], None]:
    """The per-execution rlimits (each capped by the current hard limit), as a function for the
    child to call before exec. Everything is computed here, in the parent: the child only makes
    system calls (no import, no lock that another thread of the host might hold at fork time)."""
    pairs = []
    for which, soft, hard in forkserver.rlimits(limits.__dict__):
        if which == resource.RLIMIT_NPROC and os.geteuid() == 0:
            continue  # not enforced for root, and it would count every root process of the machine
        _, cur = resource.getrlimit(which)
        if cur != resource.RLIM_INFINITY:
            soft, hard = min(soft, cur), min(hard, cur)
        pairs.append((which, (soft, hard)))
    setrlimit = resource.setrlimit

    def apply() -> None:
        for which, value in pairs:
            setrlimit(which, value)

    return apply


def _kill_group(pgid: int) -> None:
    """SIGKILL the process group that one execution leads (never ours, never 0 or 1)."""
    if pgid <= 1 or pgid == os.getpgrp() or pgid == os.getpid():
        raise SandboxError(f"refusing to kill process group {pgid}")
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


class LocalSandbox(Sandbox):
    """Limits without isolation (see the module docstring). Warns each time it is created."""

    name = "local"
    isolated = False

    def __init__(self, python: str | None = None, warn: bool = True) -> None:
        self.python = python or sys.executable
        if warn:
            warnings.warn(NOT_ISOLATED, NotIsolatedWarning, stacklevel=2)

    async def session(self, limits: Limits | None = None, *, workdir: str = DEFAULT_WORKDIR,
                      extra_dirs: Sequence[str] = (), binds: Sequence[Bind] = ()) -> LocalSession:
        if binds:
            raise SandboxError("the local backend cannot bind host folders (it has no private view of the files)")
        return LocalSession(self, limits or Limits(), SessionOptions.make(workdir, extra_dirs))

    @classmethod
    def available(cls) -> tuple[bool, str]:
        if os.name != "posix":
            return False, "needs a POSIX system (rlimits, process groups)"
        return True, "limits only, NOT isolated: opt in with get_sandbox('local')"


class LocalSession(SandboxSession):
    """A temporary host folder stands for each of the session's folders (``host_dirs``)."""

    def __init__(self, sandbox: LocalSandbox, limits: Limits, options: SessionOptions) -> None:
        self.sandbox, self.limits, self.options = sandbox, limits, options
        self.base = tempfile.mkdtemp(prefix="practicum-local-")
        self.host_dirs = {root: os.path.join(self.base, f"d{i}") for i, root in enumerate(options.roots)}
        for d in self.host_dirs.values():
            os.mkdir(d, 0o755)
        self.workspace = self.host_dirs[options.workdir]
        self._tmp = os.path.join(self.base, "tmp")
        os.mkdir(self._tmp, 0o700)
        self._closed = False
        self._groups: set[int] = set()

    @property
    def alive(self) -> bool:
        return not self._closed

    def _env(self, extra: dict[str, str] | None) -> dict[str, str]:
        bindir = os.path.dirname(os.path.abspath(self.sandbox.python))
        env = {"PATH": f"{bindir}:/usr/local/bin:/usr/bin:/bin", "HOME": self._tmp, "TMPDIR": self._tmp,
               "LANG": "C.UTF-8", "PYTHONDONTWRITEBYTECODE": "1", "PYTHONNOUSERSITE": "1", "PWD": self.workspace}
        env.update({str(k): str(v) for k, v in (extra or {}).items()})
        return env

    async def exec(self, command: list[str] | str, stdin: bytes | str | None = None,
                   timeout_s: float | None = None, env: dict[str, str] | None = None) -> ExecResult:
        if self._closed:
            raise SandboxError("the session is closed")
        argv = ["/bin/sh", "-c", command] if isinstance(command, str) else [str(a) for a in command]
        if not argv:
            raise SandboxError("empty command")
        limits = self.limits
        timeout = float(timeout_s if timeout_s is not None else limits.timeout_s)
        data = utf8(stdin or b"")
        started = time.monotonic()
        try:
            proc = await asyncio.create_subprocess_exec(
                *argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
                cwd=self.workspace, env=self._env(env), start_new_session=True, close_fds=True,
                preexec_fn=_rlimits(limits))
        except OSError as e:
            return ExecResult(status="error", exit_code=None, stdout="", stderr="", truncated=False,
                              duration_s=time.monotonic() - started, detail=f"could not start: {argv[0]}: {e.strerror}")
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        self._groups.add(proc.pid)  # start_new_session: its pid is its process group
        caps = [forkserver.Capture(limits.output_bytes), forkserver.Capture(limits.output_bytes)]

        async def pump(stream: asyncio.StreamReader, cap: forkserver.Capture) -> None:
            while chunk := await stream.read(1 << 16):
                cap.add(chunk)

        async def feed() -> None:
            with contextlib.suppress(BrokenPipeError, ConnectionError):
                if data:
                    proc.stdin.write(data)  # type: ignore[union-attr]
                    await proc.stdin.drain()  # type: ignore[union-attr]
            with contextlib.suppress(Exception):
                proc.stdin.close()  # type: ignore[union-attr]

        tasks = [asyncio.ensure_future(x) for x in (pump(proc.stdout, caps[0]), pump(proc.stderr, caps[1]), feed())]
        timed_out = False
        try:
            await asyncio.wait_for(proc.wait(), timeout)
        except TimeoutError:
            timed_out = True
        duration = time.monotonic() - started
        _kill_group(proc.pid)  # the program's own process has ended, or ran out of time: end its group
        self._groups.discard(proc.pid)
        await proc.wait()
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(asyncio.gather(*tasks, return_exceptions=True), 2.0)
        for t in tasks:
            t.cancel()
        close_transport(proc)
        code = proc.returncode
        report = RunReport(exit_code=code if code is not None and code >= 0 else None,
                           signal=-code if code is not None and code < 0 else None,
                           timed_out=timed_out, duration_s=duration, stdout=bytes(caps[0].head),
                           stderr=bytes(caps[1].head),
                           truncated=caps[0].total > limits.output_bytes or caps[1].total > limits.output_bytes,
                           memory_error=caps[1].memory_error())
        result = exec_result(report, limits, timeout)
        charge(result)  # counted as a run without CPU seconds: asyncio reaps the process, its rusage is not ours to read
        return result

    async def run_python(self, code: str, stdin: bytes | str | None = None, timeout_s: float | None = None) -> ExecResult:
        code = utf8(code).decode("utf-8", "surrogateescape")  # a lone surrogate cannot be an argument
        return await self.exec([self.sandbox.python, "-s", "-c", code], stdin=stdin, timeout_s=timeout_s)

    def _locate(self, path: str) -> tuple[str, str]:
        root, rel = self.options.locate_safe(path)
        return self.host_dirs[root], rel

    async def write_file(self, path: str, data: bytes | str) -> None:
        if self._closed:
            raise SandboxError("the session is closed")
        root, rel = self._locate(path)
        blob = utf8(data)
        try:
            forkserver.write_in(root, rel, blob)
        except forkserver.PathRefused as e:
            raise SandboxError(str(e)) from None

    async def read_file(self, path: str, max_bytes: int | None = None) -> bytes:
        if self._closed:
            raise SandboxError("the session is closed")
        root, rel = self._locate(path)
        try:
            return forkserver.read_in(root, rel, max_bytes)
        except forkserver.PathRefused as e:
            if e.kind == "not_found":
                raise FileNotFoundError(str(e)) from None
            if e.kind == "is_dir":
                raise IsADirectoryError(str(e)) from None
            raise SandboxError(str(e)) from None

    async def reset(self) -> bool:
        if self._closed:
            return False
        try:
            for d in [*self.host_dirs.values(), self._tmp]:
                forkserver.wipe(d)
        except OSError:
            return False
        return True

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for pgid in list(self._groups):
            _kill_group(pgid)
        await asyncio.to_thread(shutil.rmtree, self.base, True)
