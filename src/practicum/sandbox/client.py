"""The isolated backend's session: the host end of one sandbox's fork server.

:class:`NsjailSession` starts one sandbox (the command line from :class:`~practicum.sandbox.jail.Jail`),
speaks the fork server's framed protocol over its stdin/stdout (one request at a time), turns
reports into records (:mod:`practicum.sandbox.results`) and kills and cleans up the sandbox when
it closes, dies, stops answering or is dropped. The threat model is in
:mod:`practicum.sandbox.namespaced`; the server's own contract in :mod:`practicum.sandbox.forkserver`.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import os
import secrets
import time
import weakref
from pathlib import Path
from typing import TYPE_CHECKING

from practicum.errors import SandboxError
from practicum.sandbox import forkserver
from practicum.sandbox.base import ExecResult, Limits, SandboxSession, SessionOptions, utf8
from practicum.sandbox.cgroups import SessionCgroups, cgroups_v1
from practicum.sandbox.hostproc import close_transport, kill_sandbox_pid, read_tail, real_uid
from practicum.sandbox.jail import HOST_ENV
from practicum.sandbox.meter import charge
from practicum.sandbox.results import RunReport, exec_result, file_error

if TYPE_CHECKING:
    from practicum.sandbox.namespaced import NsjailSandbox

GRACE_S = 15.0  # how long past an execution's timeout the host waits for the server before killing the session
MAX_HEADER = 1 << 20  # the largest report header the host accepts from a sandbox


def _finalize(proc: asyncio.subprocess.Process, cgroups: SessionCgroups | None) -> None:
    """Last resort when a session is dropped without close(): kill its sandbox. Only while the
    process has not been reaped (so its pid cannot have been reused by another process)."""
    if proc.returncode is None:
        kill_sandbox_pid(proc.pid)
    if cgroups is not None:
        cgroups.remove(wait_s=0.5)




def _inner_pid(pid: int) -> int | None:
    """The pid of host process ``pid`` in its innermost PID namespace."""
    try:
        with open(f"/proc/{pid}/status", "rb") as f:
            for line in f:
                if line.startswith(b"NSpid:"):
                    return int(line.split()[-1])
    except (OSError, ValueError, IndexError):
        return None
    return None


class NsjailSession(SandboxSession):
    """One sandbox (one nsjail, one fork server, one private workspace). See the module docstring."""

    def __init__(self, sandbox: NsjailSandbox, limits: Limits, options: SessionOptions | None = None) -> None:
        self.sandbox, self.limits = sandbox, limits
        self.options = options or SessionOptions()
        self._proc: asyncio.subprocess.Process | None = None
        self._lock = asyncio.Lock()
        self._dead: str | None = None
        self._closed = False
        self._cgroups: SessionCgroups | None = None
        self._oom_seen = 0
        self._stderr_tail = bytearray()  # the last 8 KiB of nsjail's own messages
        self._stderr_task: asyncio.Task | None = None
        self._finalizer: weakref.finalize | None = None
        self._server_pid: int | None = None
        self.server_host_uid = self.exec_host_uid = -1
        self._zygote: int | None = None  # pid of the server's zygote inside the sandbox's PID namespace

    # -- lifecycle --
    async def start(self, timeout_s: float = 30.0) -> None:
        uid_base = 0x100000 + 2 * secrets.randbelow(1 << 29)  # two fresh host uids in [2^20, 2^31)
        self.server_host_uid, self.exec_host_uid = uid_base, uid_base + 1
        if cgroups_v1()[0]:
            self._cgroups = SessionCgroups(f"{os.getpid()}-{secrets.token_hex(4)}")
            self._cgroups.create()
        try:
            argv = self.sandbox.jail.server_argv(self.options, cgroup_memory=self._cgroups is not None)
            cmd = self.sandbox.jail.command(self.limits, uid_base, self._cgroups, argv, self.options)
            self._proc = await asyncio.create_subprocess_exec(
                *cmd, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE, env=HOST_ENV)
        except (OSError, SandboxError) as e:
            self._closed = True
            await asyncio.to_thread(self._cleanup_cgroups)
            raise SandboxError(f"cannot start nsjail: {e}") from e
        self._finalizer = weakref.finalize(self, _finalize, self._proc, self._cgroups)
        self._stderr_task = asyncio.ensure_future(read_tail(self._proc.stderr, self._stderr_tail))
        try:
            frame = await asyncio.wait_for(self._recv(), timeout_s)
        except (TimeoutError, asyncio.IncompleteReadError, ConnectionError, ValueError) as e:
            await asyncio.sleep(0.05)
            why = self._stderr_tail.decode(errors="replace").strip() or type(e).__name__
            await self.close()
            raise SandboxError(f"the sandbox did not start: {why}") from e
        except BaseException:  # cancelled while starting: leave nothing running
            self._kill("cancelled while starting")
            await asyncio.shield(self.close())
            raise
        if not frame[0].get("ready"):
            await self.close()
            raise SandboxError(f"the sandbox did not start: unexpected greeting {frame[0]!r}")
        self._zygote = frame[0].get("zygote")
        self._server_pid = self.server_pid()

    @property
    def alive(self) -> bool:
        """False once the sandbox has died (its server was killed) or the session was closed."""
        return not self._closed and self._dead is None and self._proc is not None and self._proc.returncode is None

    @property
    def workdir(self) -> str:
        return self.options.workdir

    @property
    def pid(self) -> int | None:
        """Host pid of the nsjail process (for diagnostics and tests)."""
        return self._proc.pid if self._proc else None

    def server_pid(self) -> int | None:
        """Host pid of the fork server (PID 1 inside the sandbox)."""
        if self._proc is None:
            return None
        try:
            kids = Path(f"/proc/{self._proc.pid}/task/{self._proc.pid}/children").read_text().split()
        except OSError:
            return None
        return int(kids[0]) if kids else None

    def program_pids(self) -> set[int]:
        """Host pids of the programs of this session still alive: every host process whose real
        uid is the session's execution uid (unique to the session); in container mode, whose uids
        are shared by all container sessions, every process in the session's PID namespace but
        its fork server. Empty between executions."""
        if self.options.container is not None:
            server = self.server_pid()
            try:
                ns = os.readlink(f"/proc/{server}/ns/pid")
            except (OSError, TypeError):
                return set()
            found = set()
            for e in os.scandir("/proc"):
                if e.name.isdigit() and int(e.name) != server:
                    with contextlib.suppress(OSError):
                        if (os.readlink(f"/proc/{e.name}/ns/pid") == ns and real_uid(int(e.name)) is not None
                                and _inner_pid(int(e.name)) != self._zygote):
                            found.add(int(e.name))
            return found
        if self.exec_host_uid < 0:
            return set()
        return {int(e.name) for e in os.scandir("/proc") if e.name.isdigit() and real_uid(int(e.name)) == self.exec_host_uid}

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        proc = self._proc
        if proc is not None and proc.returncode is None:
            with contextlib.suppress(Exception):
                assert proc.stdin is not None
                proc.stdin.close()  # the server exits on EOF; the PID namespace dies with it
            try:
                await asyncio.wait_for(proc.wait(), 2.0)
            except TimeoutError:
                kill_sandbox_pid(proc.pid)
                await proc.wait()
        if self._stderr_task is not None:
            with contextlib.suppress(asyncio.TimeoutError, asyncio.CancelledError):
                await asyncio.wait_for(self._stderr_task, 1.0)
        if proc is not None:
            close_transport(proc)
        await asyncio.to_thread(self._cleanup_cgroups)
        if self._finalizer is not None:
            self._finalizer.detach()

    def _cleanup_cgroups(self) -> None:
        if self._cgroups is not None:
            self._cgroups.remove()

    def _kill(self, why: str) -> None:
        """Mark the session dead and kill its nsjail and fork server (the rest of the PID
        namespace dies with the server). Never awaits, so it also works while the caller is
        being cancelled; close() reaps and removes the cgroups."""
        self._dead = why
        if self._server_pid is not None and real_uid(self._server_pid) == self.server_host_uid:
            kill_sandbox_pid(self._server_pid)  # still our server (the uid is unique to this session)
        if self._proc is not None and self._proc.returncode is None:
            kill_sandbox_pid(self._proc.pid)

    # -- protocol --
    async def _recv(self) -> tuple[dict, bytes]:
        assert self._proc is not None and self._proc.stdout is not None
        head = await self._proc.stdout.readexactly(8)
        jlen, blen = forkserver._HEADER.unpack(head)
        if jlen > MAX_HEADER or blen > forkserver.MAX_FRAME:
            raise ValueError(f"the sandbox sent a frame too large ({jlen}, {blen})")
        data = await self._proc.stdout.readexactly(jlen)
        blob = await self._proc.stdout.readexactly(blen) if blen else b""
        return json.loads(data), blob

    async def _call(self, header: dict, blob: bytes, wait_s: float) -> tuple[dict, bytes]:
        """Send one request and wait for its answer. Raises ConnectionError if the sandbox died."""
        if self._closed:
            raise SandboxError("the session is closed")
        if not self.alive:
            self._kill(self._dead or "the sandbox has exited")
            raise ConnectionError(self._dead)
        assert self._proc is not None and self._proc.stdin is not None
        try:
            self._proc.stdin.write(forkserver.encode_frame(header, blob))
            await self._proc.stdin.drain()
            return await asyncio.wait_for(self._recv(), wait_s)
        except TimeoutError:
            self._kill("the fork server stopped answering; the session was killed")
            raise ConnectionError(self._dead) from None
        except (asyncio.IncompleteReadError, ConnectionError, BrokenPipeError, ValueError) as e:
            self._kill(f"the sandbox died ({type(e).__name__})")
            raise ConnectionError(self._dead) from None
        except asyncio.CancelledError:
            # the answer may still arrive and would be read as the next request's: end the session
            self._kill("an execution was cancelled mid-request; the session was killed")
            raise

    # -- the SandboxSession interface --
    async def exec(self, command: list[str] | str, stdin: bytes | str | None = None,
                   timeout_s: float | None = None, env: dict[str, str] | None = None) -> ExecResult:
        argv = ["/bin/sh", "-c", command] if isinstance(command, str) else [str(a) for a in command]
        if not argv:
            raise SandboxError("empty command")
        env = {str(k): str(v) for k, v in (env or {}).items()}
        return await self._run({"mode": "exec", "argv": argv, "env": env}, b"", stdin, timeout_s)

    async def run_python(self, code: str, stdin: bytes | str | None = None, timeout_s: float | None = None) -> ExecResult:
        return await self._run({"mode": "python", "env": {}}, utf8(code),
                               stdin, timeout_s)

    async def _run(self, req: dict, code: bytes, stdin: bytes | str | None, timeout_s: float | None) -> ExecResult:
        timeout = float(timeout_s if timeout_s is not None else self.limits.timeout_s)
        data = utf8(stdin or b"")
        # the source travels in the blob, not the header: the server forwards it to the new
        # process and wipes its buffer (a JSON string could not be wiped)
        req = {"op": "exec", **req, "code_len": len(code), "timeout": timeout, "limits": dataclasses.asdict(self.limits)}
        started = time.monotonic()
        async with self._lock:
            try:
                head, blob = await self._call(req, code + data, timeout + GRACE_S)
            except ConnectionError as e:
                oom = self._cgroups is not None and self._cgroups.oom_kills() > self._oom_seen
                lost = ExecResult(status="memory" if oom else "error", exit_code=None, stdout="", stderr="",
                                  truncated=False, duration_s=time.monotonic() - started,
                                  detail=(f"the session was killed by its memory limit: {e}" if oom else str(e)))
                charge(lost)  # a run whose CPU time died with the session: counted, unmeasured
                return lost
            oom = False
            if self._cgroups is not None:
                kills = self._cgroups.oom_kills()
                oom, self._oom_seen = kills > self._oom_seen, kills
            self._zygote = head.get("zygote", self._zygote)
        result = exec_result(RunReport.from_wire(head, blob, oom), self.limits, timeout)
        charge(result)
        return result

    async def write_file(self, path: str, data: bytes | str) -> None:
        root, rel = self._locate(path)
        blob = utf8(data)
        await self._file({"op": "write", "root": root, "path": rel}, blob)

    async def read_file(self, path: str, max_bytes: int | None = None) -> bytes:
        root, rel = self._locate(path)
        return await self._file({"op": "read", "root": root, "path": rel, "max_bytes": max_bytes}, b"")

    async def reset(self) -> bool:
        if not self.alive:
            return False
        try:
            await self._file({"op": "reset"}, b"")
        except (SandboxError, OSError):
            return False
        return True

    async def _file(self, req: dict, blob: bytes) -> bytes:
        async with self._lock:
            try:
                head, data = await self._call(req, blob, 60.0)
            except ConnectionError as e:
                raise SandboxError(f"sandbox session unusable: {e}") from None
        if not head.get("ok"):
            raise file_error(head)
        return data

    def _locate(self, path: str) -> tuple[str, str]:
        return self.options.locate_safe(path)


