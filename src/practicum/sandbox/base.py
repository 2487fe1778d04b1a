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
import posixpath
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from practicum.errors import SandboxError

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
    cpu_s: float | None = None  # user + system CPU seconds of its processes (None: the backend does not measure it)

    @property
    def ok(self) -> bool:
        return self.status == "ok" and self.exit_code == 0

    def to_json(self) -> dict:
        return {
            "status": self.status, "exit_code": self.exit_code, "stdout": self.stdout, "stderr": self.stderr,
            "truncated": self.truncated, "duration_s": self.duration_s, "signal": self.signal, "detail": self.detail,
            "cpu_s": self.cpu_s,
        }


DEFAULT_WORKDIR = "/workspace"
# Folders of the sandbox that a session option may not replace or hide (``/tmp`` itself may be
# listed in extra_dirs, for a writable /tmp; nothing under it).
RESERVED_DIRS = ("/usr", "/etc", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/proc", "/dev", "/sys",
                 "/run", "/opt/practicum", "/scratch", "/var", "/boot")


@dataclass(frozen=True)
class Bind:
    """A host folder (or file) shown inside a session at ``inside``; read-only unless ``writable``."""

    host: str
    inside: str
    writable: bool = False


@dataclass(frozen=True)
class Container:
    """Container mode (see :mod:`practicum.sandbox.container`): the session's root filesystem is
    a writable copy-on-write layer over ``layers`` (host folders of image layers, newest first)
    over the machine's own system folders, and programs run as root of the sandbox's user
    namespace. ``upper``: a host folder that keeps the session's writes (an image build); None
    for a private tmpfs that vanishes with the session. ``env``: the image's environment.
    ``keep_processes``: what an execution leaves running in the background (``server &``) keeps
    running until the session closes, as in a Docker container (a terminal task's agent starts a
    server its tests then probe); an execution that times out still has its own session killed.
    False (an image build, whose ``RUN`` lines each end everything they started): nothing an
    execution started outlives it."""

    layers: tuple[str, ...] = ()
    upper: str | None = None
    env: tuple[tuple[str, str], ...] = ()
    keep_processes: bool = False


@dataclass(frozen=True)
class SessionOptions:
    """Where things are inside one session (independent of :class:`Limits`).

    ``workdir`` is the private workspace and the working folder of every execution (a terminal
    task wants ``/app``); ``extra_dirs`` are more private, writable, size-capped folders (say
    ``/tests`` and ``/logs/verifier``) that ``write_file``/``read_file`` reach by absolute path;
    ``binds`` show host paths inside (read-only by default).
    """

    workdir: str = DEFAULT_WORKDIR
    extra_dirs: tuple[str, ...] = ()
    binds: tuple[Bind, ...] = ()
    container: Container | None = None

    @classmethod
    def make(cls, workdir: str = DEFAULT_WORKDIR, extra_dirs: Sequence[str] = (),
             binds: Sequence[Bind] = (), container: Container | None = None) -> SessionOptions:
        """Validated options; raises SandboxError for a folder that cannot be a private folder."""
        if container is not None:  # the whole root is writable: any absolute folder will do
            work = posixpath.normpath(workdir) if isinstance(workdir, str) and workdir.startswith("/") else ""
            if not work or "\0" in work or ".." in workdir.split("/"):
                raise SandboxError(f"workdir: {workdir!r} must be an absolute folder path")
            return cls(work, (), tuple(Bind(str(b.host), posixpath.normpath(b.inside), bool(b.writable)) for b in binds),
                       container)
        work = _inside_dir(workdir, "workdir")
        extra = tuple(dict.fromkeys(_inside_dir(d, "extra_dirs") for d in extra_dirs))
        bound = tuple(Bind(str(b.host), _inside_dir(b.inside, "binds"), bool(b.writable)) for b in binds)
        dirs = [work, *extra, *(b.inside for b in bound)]
        for i, a in enumerate(dirs):
            for b in dirs[i + 1:]:
                if a == b or b.startswith(a + "/") or a.startswith(b + "/"):
                    raise SandboxError(f"session folders {a!r} and {b!r} overlap; give each its own path")
        return cls(work, extra, bound)

    @property
    def roots(self) -> tuple[str, ...]:
        """The folders that write_file/read_file may reach (workdir first; ``/`` in container mode)."""
        if self.container is not None:
            return ("/",)
        return (self.workdir, *self.extra_dirs)

    def locate_safe(self, path: str) -> tuple[str, str]:
        """:meth:`locate`, with the relative part checked as the fork server's safe path walk
        will take it (no ``..``, no NUL). Raises SandboxError."""
        from practicum.sandbox import forkserver

        root, rel = self.locate(path)
        try:
            forkserver.split_relative(rel)
        except forkserver.PathRefused as e:
            raise SandboxError(str(e)) from None
        return root, rel

    def locate(self, path: str) -> tuple[str, str]:
        """``(root, relative path)`` for a file API path: relative to ``workdir``, or absolute
        inside ``workdir`` or an extra folder. Raises SandboxError for anything else."""
        if not isinstance(path, str) or not path or "\0" in path:
            raise SandboxError(f"invalid workspace path {path!r}")
        if self.container is not None:
            full = posixpath.normpath(posixpath.join(self.workdir, path))
            if ".." in path.split("/") or full == "/":
                raise SandboxError(f"invalid path {path!r}")
            return "/", full[1:]
        if not path.startswith("/"):
            return self.workdir, path
        norm = posixpath.normpath(path)
        for root in self.roots:
            if norm.startswith(root + "/") and ".." not in path.split("/"):
                return root, norm[len(root) + 1:]
        raise SandboxError(f"{path!r} is outside the session's folders {list(self.roots)}; "
                           "use a path relative to the workspace")


def utf8(text: bytes | str) -> bytes:
    """Text as the bytes a sandbox is given: UTF-8, with bytes that were decoded with
    ``surrogateescape`` restored; any other lone surrogate (a model's reply can hold one, which
    no UTF-8 can) becomes ``?``, so the program sees a character it did not expect, never a
    host-side error."""
    if isinstance(text, (bytes, bytearray, memoryview)):
        return bytes(text)
    try:
        return text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return text.encode("utf-8", "replace")


def _inside_dir(path: str, what: str) -> str:
    if not isinstance(path, str) or not path.startswith("/") or "\0" in path or ":" in path or "," in path:
        raise SandboxError(f"{what}: {path!r} must be an absolute folder path inside the sandbox (no ':' or ',')")
    norm = posixpath.normpath(path)
    if norm == "/" or ".." in path.split("/"):
        raise SandboxError(f"{what}: {path!r} cannot be a private folder")
    for sys_dir in RESERVED_DIRS:
        if norm == sys_dir or norm.startswith(sys_dir + "/"):
            raise SandboxError(f"{what}: {path!r} is inside the sandbox's own {sys_dir}; choose another folder")
    if norm.startswith("/tmp/"):
        raise SandboxError(f"{what}: {path!r} lies in /tmp; list /tmp itself for a writable /tmp")
    return norm


class SandboxSession(abc.ABC):
    """One private workspace and the executions in it. Use as an async context manager."""

    limits: Limits
    options: SessionOptions = SessionOptions()

    @property
    def alive(self) -> bool:
        """False once the session can run nothing more (closed, or its sandbox died)."""
        return True

    async def reset(self) -> bool:
        """Empty every writable folder of the session, so that it can serve another episode.
        Returns False when this backend cannot (the caller then closes the session instead)."""
        return False

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
    async def session(self, limits: Limits | None = None, *, workdir: str = DEFAULT_WORKDIR,
                      extra_dirs: Sequence[str] = (), binds: Sequence[Bind] = ()) -> SandboxSession:
        """Open a fresh session with an empty private workspace (see :class:`SessionOptions`)."""

    @classmethod
    @abc.abstractmethod
    def available(cls) -> tuple[bool, str]:
        """Whether this backend works on this machine, and why not."""

    async def close(self) -> None:
        """Release what the backend keeps between sessions. The shipped backends keep nothing
        (each session closes itself); it is here so that a backend and a
        :class:`~practicum.sandbox.SandboxPool` are closed alike by whoever owns them."""
        return None
