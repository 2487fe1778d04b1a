"""The fork server: a long-lived Python process inside one sandbox session.

Contract. The host starts this file as PID 1 of a fresh sandbox (see ``namespaced.py``) and
talks to it over its stdin/stdout with length-prefixed frames (:func:`send_frame`,
:func:`recv_frame`). One request at a time; each is answered before the next is read:

* ``exec``   fork a child that runs an argv (``execvpe``) or Python source (``exec`` of the
  compiled code in a fresh ``__main__``, without starting an interpreter: ~1-2 ms instead of
  11-15 ms), feed it stdin, capture stdout/stderr up to a cap, and report how it ended.
* ``write`` / ``read``  file operations in the workspace (or another of the session's private
  folders), never following a link.
* ``reset``  empty every writable folder of the session (workspace, extra folders, the
  scratch folder, /dev/shm), so that the session can serve another episode.
* ``ping``   liveness.

Why it is safe to fork untrusted code from here. Each child, before running anything it was
given: makes descriptors 0-2 its own pipes and closes every other descriptor (so it cannot read
the request channel or answer for the server); calls ``setsid``; drops to a *different*
unprivileged uid/gid than the server (so it can neither signal nor ptrace the server, nor read
its ``/proc/1/*``; its capabilities vanish with the uid change); and applies the per-execution
rlimits (address space, CPU seconds, file size, processes, descriptors, no core files). When the
child exits or its wall-clock deadline passes, the server sends SIGKILL to every other process
in the sandbox's PID namespace (it keeps CAP_KILL for this) and reaps them all: nothing an
execution started, a double-forked daemon included, outlives it. A container-mode session that
keeps processes (``keep_processes``: a terminal task, where Docker keeps what the agent left
running) kills only a timed-out execution's own session; the rest runs until the session ends.

What a child *can* see: a copy of the server's memory at fork time. The server therefore never
holds anything secret, and nothing a child does changes the server (it cannot write to the
server's memory, descriptors or files: other uid, no ptrace). Executions in one session share
the workspace, the scratch folder, and the hash seed of the server (``hash(str)`` is the same in every
execution of a session); ``reset`` empties the writable folders, so a session reused for
another episode (``SandboxPool``) starts from the same state as a fresh one.

The server kills only inside its own PID namespace: every mass kill first checks that it is
PID 1 there and that ``/proc`` is that namespace's (``_assert_namespace_init``), so this file
run anywhere else - on the host, in a test - refuses instead of signalling foreign processes.

This file is also imported by the host (for the framing helpers and the safe path walk used by
the local backend), so it must stay standard-library only and import nothing from practicum.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import signal
import socket
import stat
import struct
import sys
import time

_HEADER = struct.Struct("!II")  # json length, blob length
MAX_FRAME = 1 << 30


# --- framing (host and server) ------------------------------------------------------------------
def encode_frame(header: dict, blob: bytes = b"") -> bytes:
    data = json.dumps(header, separators=(",", ":")).encode()
    return _HEADER.pack(len(data), len(blob)) + data + blob


def frame_buffer(header: dict, blob: bytes | bytearray | memoryview) -> bytearray:
    """A whole frame in a bytearray, which the caller can wipe once it is sent."""
    data = json.dumps(header, separators=(",", ":")).encode()
    return bytearray(_HEADER.pack(len(data), len(blob))) + data + blob


def send_frame(fd: int, header: dict, blob: bytes = b"") -> None:
    view = memoryview(encode_frame(header, blob))
    while view:
        n = os.write(fd, view)
        view = view[n:]


def _read_exact(fd: int, n: int) -> bytearray | None:
    buf = bytearray(n)
    view, got = memoryview(buf), 0
    while got < n:
        k = os.readv(fd, [view[got:got + (1 << 20)]])
        if not k:
            return None
        got += k
    return buf


def recv_frame(fd: int, mutable: bool = False) -> tuple[dict, bytes | bytearray] | None:
    """One frame; ``mutable``: the blob as a bytearray (which the caller may wipe)."""
    head = _read_exact(fd, _HEADER.size)
    if head is None:
        return None
    jlen, blen = _HEADER.unpack(head)
    if jlen > MAX_FRAME or blen > MAX_FRAME:
        raise ValueError("frame too large")
    data = _read_exact(fd, jlen) if jlen else bytearray()
    blob = _read_exact(fd, blen) if blen else bytearray()
    if data is None or blob is None:
        return None
    return json.loads(data), (blob if mutable else bytes(blob))


# --- safe paths (host and server) ---------------------------------------------------------------
class PathRefused(Exception):
    """A path that is not a plain relative path inside the workspace, or that crosses a link."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind  # invalid | link | not_regular | not_found | is_dir


def split_relative(path: str) -> list[str]:
    """The components of a workspace-relative path; refuses absolute paths, '..' and NUL."""
    if not isinstance(path, str) or not path or "\0" in path:
        raise PathRefused("invalid", f"invalid workspace path {path!r}")
    if path.startswith("/"):
        raise PathRefused("invalid", f"{path!r} is absolute; workspace paths are relative to the workspace")
    parts = [p for p in path.split("/") if p not in ("", ".")]
    if not parts or any(p == ".." for p in parts):
        raise PathRefused("invalid", f"{path!r} leaves the workspace or names no file")
    return parts


_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC


def _open_dir(name: str, dir_fd: int, create: bool, shown: str) -> int:
    try:
        return os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
    except FileNotFoundError:
        if not create:
            raise PathRefused("not_found", f"{shown}: no such file in the workspace") from None
        os.mkdir(name, 0o755, dir_fd=dir_fd)
        return os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
    except OSError as e:
        if e.errno in (errno.ELOOP, errno.ENOTDIR):
            raise PathRefused("link", f"{shown}: a component is a link or not a folder; links are never followed") from None
        raise


def open_in(root: str, path: str, write: bool) -> int:
    """Open ``root/path`` without following any link, on every component. Returns a descriptor.

    For reading the file must be a regular file (a FIFO or device would block or leak); for
    writing, missing parent folders are created and the file is truncated.
    """
    parts = split_relative(path)
    fd = os.open(root, _DIR_FLAGS)
    try:
        for part in parts[:-1]:
            nxt = _open_dir(part, fd, write, path)
            os.close(fd)
            fd = nxt
        flags = os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK
        flags |= (os.O_WRONLY | os.O_CREAT | os.O_TRUNC) if write else os.O_RDONLY
        try:
            f = os.open(parts[-1], flags, 0o644, dir_fd=fd)
        except FileNotFoundError:
            raise PathRefused("not_found", f"{path}: no such file in the workspace") from None
        except IsADirectoryError:
            raise PathRefused("is_dir", f"{path}: is a folder") from None
        except OSError as e:
            if e.errno in (errno.ELOOP, errno.ENOTDIR, errno.ENXIO):
                raise PathRefused("link", f"{path}: is a link, crosses one, or is a special file; links are never followed") from None
            raise
        st = os.fstat(f)
        if not stat.S_ISREG(st.st_mode):
            os.close(f)
            if stat.S_ISDIR(st.st_mode):
                raise PathRefused("is_dir", f"{path}: is a folder")
            raise PathRefused("not_regular", f"{path}: not a regular file")
        os.set_blocking(f, True)
        return f
    finally:
        os.close(fd)


def read_in(root: str, path: str, max_bytes: int | None) -> bytes:
    f = open_in(root, path, write=False)
    try:
        chunks, left = [], max_bytes if max_bytes is not None else -1
        while left != 0:
            chunk = os.read(f, 1 << 20 if left < 0 else min(left, 1 << 20))
            if not chunk:
                break
            chunks.append(chunk)
            if left > 0:
                left -= len(chunk)
        return b"".join(chunks)
    finally:
        os.close(f)


def write_in(root: str, path: str, data: bytes) -> None:
    f = open_in(root, path, write=True)
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(f, view):]
    finally:
        os.close(f)


def wipe(root: str) -> None:
    """Delete everything inside the folder ``root`` (not the folder itself), never following a
    link. Folders a program made unreadable are opened up first (we are their owner)."""
    fd = os.open(root, _DIR_FLAGS)
    try:
        _wipe_fd(fd)
    finally:
        os.close(fd)


def _wipe_fd(fd: int) -> None:
    for name in os.listdir(fd):
        st = os.stat(name, dir_fd=fd, follow_symlinks=False)
        if not stat.S_ISDIR(st.st_mode):
            os.unlink(name, dir_fd=fd)
            continue
        if st.st_mode & 0o700 != 0o700:
            os.chmod(name, 0o700, dir_fd=fd)  # a folder (never a link, per the lstat above)
        sub = os.open(name, _DIR_FLAGS, dir_fd=fd)
        try:
            _wipe_fd(sub)
        finally:
            os.close(sub)
        os.rmdir(name, dir_fd=fd)


# --- the server ---------------------------------------------------------------------------------
class Capture:
    """Keeps the first ``cap`` bytes of a stream and a short tail; counts the rest."""

    def __init__(self, cap: int) -> None:
        self.cap, self.head, self.tail, self.total = cap, bytearray(), b"", 0

    def add(self, data: bytes) -> None:
        self.total += len(data)
        room = self.cap - len(self.head)
        if room > 0:
            self.head += data[:room]
        self.tail = (self.tail + data)[-512:]

    def memory_error(self) -> bool:
        """Whether the stream's last line starts with ``MemoryError`` (Python's out-of-memory report)."""
        return self.tail.rstrip().rsplit(b"\n", 1)[-1].startswith(b"MemoryError")


OPEN_FILES = 256  # an execution's open descriptors (soft and hard), unless its session gives another


def rlimits(lim: dict, address_space: bool = True, open_files: int = OPEN_FILES) -> list[tuple[int, int, int]]:
    """The per-execution rlimits ``(resource, soft, hard)`` for a ``Limits`` as a dict; without
    the address-space limit where a memory cgroup holds the memory (``address_space`` False);
    ``open_files`` descriptors (container mode gives Docker's soft limit, 1024)."""
    import resource

    mb = 1 << 20
    cpu = max(1, int(-(-lim["cpu_s"] // 1)))
    return [
        *([(resource.RLIMIT_AS, lim["memory_mb"] * mb, lim["memory_mb"] * mb)] if address_space else []),
        (resource.RLIMIT_CPU, cpu, cpu + 1),  # SIGXCPU at the soft limit, SIGKILL one second later
        (resource.RLIMIT_FSIZE, lim["file_size_mb"] * mb, lim["file_size_mb"] * mb),
        (resource.RLIMIT_NPROC, lim["processes"], lim["processes"]),
        (resource.RLIMIT_NOFILE, open_files, open_files),
        (resource.RLIMIT_CORE, 0, 0),
    ]


class Zygote:
    """The server's handle on its zygote: a separate interpreter, started by ``execve`` (so its
    memory holds nothing of the server's), that imports the preloaded modules once and then only
    forks. It never receives a request: the server sends it the descriptors of one execution
    (over a socketpair), it forks, and the new process reads its request from its own pipe.
    Every execution is thus forked from a process that has never held another execution's data."""

    def __init__(self, config: dict) -> None:
        self.config = config
        self.pid: int | None = None
        self.sock: socket.socket | None = None
        self.ready = False

    def start(self) -> None:
        parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        pid = os.fork()
        if pid == 0:
            try:  # nothing of the server's but the socket and stderr survives the exec
                null = os.open("/dev/null", os.O_RDWR)
                os.dup2(null, 0)
                os.dup2(null, 1)
                fd = child.fileno()
                os.dup2(fd, 3)
                os.closerange(4, 1 << 16)
                os.execv(sys.executable, [sys.executable, "-s", "-B", os.path.abspath(__file__), ZYGOTE_FLAG,
                                          json.dumps(self.config)])
            finally:
                os._exit(126)
        child.close()
        self.pid, self.sock, self.ready = pid, parent, False

    def wait_ready(self) -> None:
        """Wait until it has imported the preloaded modules (raises OSError if it died)."""
        if not self.ready and self.sock is not None:
            if self.sock.recv(16) != b"ready":
                raise ConnectionError("the zygote did not start")
            self.ready = True

    def stop(self) -> None:
        if self.sock is not None:
            self.sock.close()
        if self.pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, signal.SIGKILL)
            with contextlib.suppress(ChildProcessError):
                os.waitpid(self.pid, 0)
        self.pid = self.sock = None

    def spawn(self, fds: list[int]) -> int:
        """A new process that will read its request from ``fds[0]``; its pid (a child of the
        server: the zygote double-forks, so it is re-parented to PID 1). -1 if fork failed."""
        for _attempt in range(2):
            if self.sock is None:
                self.start()
            assert self.sock is not None
            try:
                self.wait_ready()
                socket.send_fds(self.sock, [b"spawn"], fds)
                answer = self.sock.recv(16)
                if len(answer) == 4:
                    return struct.unpack("!i", answer)[0]
            except OSError:
                pass
            self.stop()  # it died (or was killed by a program): a fresh one is clean by construction
        return -1


ZYGOTE_FLAG = "--zygote"


def zygote_main(config: dict) -> None:
    """The zygote's loop (see :class:`Zygote`). Descriptor 3 is its socket to the server."""
    _die_with_parent()
    if config.get("nondumpable"):
        _set_nondumpable()
    for name in config.get("preload", []):
        try:
            __import__(name)
        except ImportError:
            pass
    sock = socket.socket(fileno=3)
    sock.send(b"ready")
    while True:
        try:
            msg, fds, _flags, _addr = socket.recv_fds(sock, 16, 8)
        except OSError:
            os._exit(0)
        if not msg:
            os._exit(0)
        r, w = os.pipe()
        try:
            mid = os.fork()
        except OSError:
            mid = -1
        if mid == 0:
            try:
                pid = os.fork()
                if pid == 0:
                    os.close(r)
                    os.close(w)
                    sock.close()
                    Child(config).run(fds)
                os.write(w, struct.pack("!i", pid))
            finally:
                os._exit(0)
        os.close(w)
        for fd in fds:
            os.close(fd)
        answer = _read_until_eof(r) if mid > 0 else b""
        os.close(r)
        if mid > 0:
            os.waitpid(mid, 0)  # once it is gone, the new process is a child of PID 1
        sock.send(answer if len(answer) == 4 else struct.pack("!i", -1))


class Child:
    """One execution's process, forked from the zygote (never returns)."""

    def __init__(self, config: dict) -> None:
        self.uid, self.gid = config["exec_uid"], config["exec_gid"]
        self.workspace = config["workspace"]
        self.env = config["env"]
        # False where the session's memory cgroup is the memory limit (container mode): programs that
        # reserve address space they never touch (V8, Chromium, the JVM, Go) then run, as under Docker
        self.address_space = config.get("address_space_limit", True)
        self.open_files = int(config.get("open_files", OPEN_FILES))

    def run(self, fds: list[int]) -> None:
        """``fds``: request pipe, stdin, stdout, stderr, error pipe. The request (header and
        Python source) comes over the request pipe, from the server, after the fork."""
        req_fd, in_r, out_w, err_w, errpipe = fds
        try:
            os.set_inheritable(errpipe, False)  # closed by a successful exec: its EOF means "started"
            frame = recv_frame(req_fd)
            if frame is None:
                os._exit(126)
            req, code = frame
            os.close(req_fd)
        except BaseException:  # noqa: BLE001 - a child must never return into the zygote loop
            os._exit(126)
        self._setup(req, (in_r, out_w, err_w), errpipe)
        env = dict(self.env)
        env.update(req.get("env") or {})
        if req["mode"] == "exec":
            try:
                for sig in (signal.SIGPIPE, signal.SIGXFSZ, signal.SIGINT):
                    signal.signal(sig, signal.SIG_DFL)
                argv = req["argv"]
                os.execvpe(argv[0], argv, env)
            except BaseException as e:  # noqa: BLE001
                with contextlib.suppress(Exception):
                    msg = f"{req['argv'][0]}: {e.strerror}" if isinstance(e, OSError) else repr(e)
                    os.write(errpipe, msg.encode())
            os._exit(127)
        try:
            os.close(errpipe)
            self._python(code.decode("utf-8", errors="surrogateescape"), env)
        finally:
            os._exit(1)

    def _setup(self, req: dict, fds: tuple[int, int, int], errpipe: int) -> None:
        """Descriptors 0-2 its own pipes, nothing else open; a session of its own; the first
        victim of the memory cgroup's OOM killer; the execution uid (unless programs run as the
        server's uid, as in container mode: ``exec_uid`` 0); the per-execution rlimits.
        ``errpipe`` (close-on-exec) carries a failure to the server; its EOF means the program
        has started."""
        try:
            for target, fd in enumerate(fds):
                os.dup2(fd, target)
            os.closerange(3, errpipe)
            os.closerange(errpipe + 1, 1 << 16)
            os.setsid()
            with contextlib.suppress(OSError), open("/proc/self/oom_score_adj", "w") as f:
                f.write("1000")  # pinned memory (memfd, pipes, tmpfs) must not make the server the victim
            os.setgroups([self.gid])
            os.setresgid(self.gid, self.gid, self.gid)
            os.setresuid(self.uid, self.uid, self.uid)  # drops every capability of the server (exec_uid != 0)
            import resource

            for which, soft, hard in rlimits(req["limits"], self.address_space, self.open_files):
                _, cur_hard = resource.getrlimit(which)  # never above what the sandbox was given
                if cur_hard != resource.RLIM_INFINITY:
                    soft, hard = min(soft, cur_hard), min(hard, cur_hard)
                resource.setrlimit(which, (soft, hard))
            os.chdir(self.workspace)
            os.umask(0o022)
        except BaseException as e:  # noqa: BLE001 - a child must never return into the zygote loop
            with contextlib.suppress(Exception):
                os.write(errpipe, f"sandbox set-up failed: {e!r}".encode())
            os._exit(126)

    def _python(self, code: str, env: dict) -> None:
        import atexit
        import builtins
        import linecache
        import traceback
        import types

        os.environ.clear()
        os.environ.update(env)
        signal.signal(signal.SIGINT, signal.default_int_handler)
        sys.stdin = sys.__stdin__ = open(0, encoding="utf-8", closefd=False)  # type: ignore[misc]  # noqa: SIM115
        sys.stdout = sys.__stdout__ = open(1, "w", encoding="utf-8", closefd=False)  # type: ignore[misc]  # noqa: SIM115
        sys.stderr = sys.__stderr__ = open(2, "w", encoding="utf-8", errors="backslashreplace",  # type: ignore[misc]  # noqa: SIM115
                                           closefd=False, buffering=1)
        sys.argv = ["-c"]
        sys.path[0] = ""
        main = types.ModuleType("__main__")
        main.__dict__["__builtins__"] = builtins
        sys.modules["__main__"] = main
        linecache.cache["<string>"] = (len(code), None, code.splitlines(True), "<string>")
        status = 0
        try:
            exec(compile(code, "<string>", "exec"), main.__dict__)
        except SystemExit as e:
            if e.code is None:
                status = 0
            elif isinstance(e.code, int):
                status = e.code & 0xFF
            else:
                print(e.code, file=sys.stderr)
                status = 1
        except BaseException:  # noqa: BLE001 - report like the interpreter does
            traceback.print_exc()
            status = 1
        try:
            threading = sys.modules.get("threading")
            if threading is not None:
                threading._shutdown()  # type: ignore[attr-defined]  # wait for non-daemon threads
            atexit._run_exitfuncs()
        except BaseException:  # noqa: BLE001
            traceback.print_exc()
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        os._exit(status)


def _wipe(buf: bytearray | None) -> None:
    """Overwrite a buffer that held a request's or a program's bytes (best effort: the server's
    memory is never inherited by a program, see :class:`Zygote`; this keeps it short-lived)."""
    if buf:
        buf[:] = bytes(len(buf))


class Server:
    def __init__(self, config: dict) -> None:
        self.uid, self.gid = config["exec_uid"], config["exec_gid"]
        self.workspace = config["workspace"]
        self.roots = list(config.get("roots") or [self.workspace])  # what the file operations may reach
        self.scratch = list(config.get("scratch") or [])  # further writable folders, emptied by reset
        self.inp, self.out = 0, 1
        self._last_status: int | None = None
        self.keep = bool(config.get("keep_processes"))  # container mode: background processes outlive their execution
        self.zygote = Zygote(config)

    # -- server side --
    def exec(self, req: dict, blob: bytearray) -> tuple[dict, bytearray]:
        import select

        cap = req["limits"]["output_bytes"]
        timeout = float(req["timeout"])
        code_len = int(req.get("code_len") or 0)
        in_r, in_w = os.pipe2(os.O_CLOEXEC)
        out_r, out_w = os.pipe2(os.O_CLOEXEC)
        err_r, err_w = os.pipe2(os.O_CLOEXEC)
        ep_r, ep_w = os.pipe2(os.O_CLOEXEC)  # the child reports a failed set-up or exec here
        req_r, req_w = os.pipe2(os.O_CLOEXEC)  # the child's request, sent after it was forked
        start = time.monotonic()
        # CPU time of the execution: every process of it ends as a reaped child of this server
        # (PID 1 of the namespace) or of one of them, so RUSAGE_CHILDREN grows by exactly theirs
        cpu0 = _children_cpu()
        pid = self.zygote.spawn([req_r, in_r, out_w, err_w, ep_w])
        for fd in (req_r, in_r, out_w, err_w, ep_w):
            os.close(fd)
        if pid < 0:
            for fd in (in_w, out_r, err_r, ep_r, req_w):
                os.close(fd)
            return {"exit_code": None, "signal": None, "timed_out": False, "duration": time.monotonic() - start,
                    "exec_error": "the sandbox could not fork", "truncated": False, "stdout_len": 0,
                    "memory_error": False, "zygote": self.zygote.pid}, bytearray()
        pidfd = os.pidfd_open(pid)
        child_req = {k: req[k] for k in ("mode", "argv", "env", "limits") if k in req}
        frame = frame_buffer(child_req, memoryview(blob)[:code_len])
        try:
            view = memoryview(frame)
            while view:
                view = view[os.write(req_w, view):]
        except OSError:
            pass  # it died before reading (killed from outside): reported below
        finally:
            _wipe(frame)
            os.close(req_w)
        exec_error = _read_until_eof(ep_r)
        os.close(ep_r)

        caps = {out_r: Capture(cap), err_r: Capture(cap)}
        poller = select.poll()
        for fd in caps:
            poller.register(fd, select.POLLIN)
        poller.register(pidfd, select.POLLIN)
        pending = memoryview(blob)[code_len:]
        if pending:
            os.set_blocking(in_w, False)
            poller.register(in_w, select.POLLOUT)
        else:
            os.close(in_w)
            in_w = -1
        deadline = start + timeout
        timed_out = exited = False
        while not exited:
            left = deadline - time.monotonic()
            if left <= 0:
                timed_out = True
                break
            for fd, _ev in poller.poll(left * 1000):
                if fd == pidfd:
                    exited = True
                elif fd == in_w:
                    try:
                        pending = pending[os.write(in_w, pending[: 1 << 16]):]
                    except (BrokenPipeError, BlockingIOError) as e:
                        if isinstance(e, BlockingIOError):
                            continue
                        pending = memoryview(b"")
                    if not pending:
                        poller.unregister(in_w)
                        os.close(in_w)
                        in_w = -1
                else:
                    data = os.read(fd, 1 << 16)
                    if data:
                        caps[fd].add(data)
                    else:
                        poller.unregister(fd)
        duration = time.monotonic() - start
        # The program's own process has ended (or ran out of time): end everything it started -
        # or, keeping processes (container mode), only what a timed-out execution's session holds.
        if not self.keep:
            self._kill_all_but_status(pid)
        else:
            if timed_out:
                self._kill_session(pid)
            self._collect(pid)
        status = self._last_status
        os.close(pidfd)
        if in_w >= 0:
            os.close(in_w)
        _drain(caps)
        out, err = caps[out_r], caps[err_r]
        code = os.waitstatus_to_exitcode(status) if status is not None else None
        head = {
            "exit_code": code if code is not None and code >= 0 else None,
            "signal": -code if code is not None and code < 0 else None,
            "timed_out": timed_out,
            "duration": duration,
            "cpu": _children_cpu() - cpu0,
            "exec_error": exec_error.decode(errors="replace"),
            "truncated": out.total > cap or err.total > cap,
            "stdout_len": len(out.head),
            "memory_error": err.memory_error(),
            "zygote": self.zygote.pid,
        }
        body = out.head + err.head
        _wipe(out.head)
        _wipe(err.head)
        return head, body

    def _kill_all_but_status(self, pid: int) -> None:
        """SIGKILL every process of this sandbox but the server and its zygote, reap them all,
        and keep the wait status of ``pid`` (the execution's own process) in ``self._last_status``.

        Only ever done as PID 1 of a private PID namespace whose ``/proc`` is that namespace's:
        the pids listed there are then exactly the sandbox's processes. Never ``kill(-1)``.
        """
        self._last_status = None
        _assert_namespace_init()
        spare = {os.getpid(), self.zygote.pid}
        while True:
            self._reap(pid)
            others = [int(n) for n in os.listdir("/proc") if n.isdigit() and int(n) > 1 and int(n) not in spare]
            if not others:
                return
            for victim in others:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(victim, signal.SIGKILL)
            if not self._reap(pid):  # none of them has become our zombie yet: they are dying
                time.sleep(0.0002)

    def _kill_session(self, sid: int) -> None:
        """SIGKILL every process of session ``sid`` (an execution is its session's leader), until
        none is left. As PID 1 of a private PID namespace only, as :meth:`_kill_all_but_status`."""
        _assert_namespace_init()
        while True:
            members = []
            for n in os.listdir("/proc"):
                if n.isdigit() and int(n) > 1:
                    try:
                        with open(f"/proc/{n}/stat") as f:
                            fields = f.read().rsplit(")", 1)[1].split()
                    except (OSError, IndexError):
                        continue
                    if int(fields[3]) == sid and fields[0] not in ("Z", "X"):  # fields[3]: the session
                        members.append(int(n))
            if not members:
                return
            for victim in members:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(victim, signal.SIGKILL)
            self._reap(sid)
            time.sleep(0.0002)

    def _collect(self, pid: int) -> None:
        """Wait for the status of ``pid`` (dead: its pidfd was readable, or it was just killed),
        reaping whatever else has died; processes still running are left alone."""
        self._last_status = None
        deadline = time.monotonic() + 5.0
        while self._last_status is None and time.monotonic() < deadline:
            if not self._reap(pid):
                time.sleep(0.0002)

    def _reap(self, pid: int) -> bool:
        """Reap dead children; keeps ``pid``'s status. True when one was reaped."""
        reaped = False
        while True:
            try:
                got, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return reaped
            except InterruptedError:
                continue
            if got == 0:
                return reaped
            reaped = True
            if got == pid:
                self._last_status = status
            if got == self.zygote.pid:  # killed (container mode: programs share its uid); restarted on use
                self.zygote.pid = None
                self.zygote.stop()

    def file_op(self, req: dict, blob: bytearray) -> tuple[dict, bytes]:
        # File operations run with the execution uid, so that files belong to the programs.
        # Between executions no process of that uid exists - except in a container-mode session
        # that keeps processes, whose programs are root of a container whose whole view they may
        # write anyway; the walk refuses links either way (write_in/read_in).
        root = req.get("root") or self.workspace
        if root not in self.roots:
            return {"ok": False, "kind": "invalid", "message": f"{root!r} is not a folder of this session"}, b""
        os.setresgid(-1, self.gid, -1)
        os.setresuid(-1, self.uid, -1)
        try:
            if req["op"] == "write":
                write_in(root, req["path"], blob)
                return {"ok": True}, b""
            if req["op"] == "reset":
                for folder in [*self.roots, *self.scratch]:
                    wipe(folder)
                return {"ok": True}, b""
            data = read_in(root, req["path"], req.get("max_bytes"))
            return {"ok": True}, data
        except PathRefused as e:
            return {"ok": False, "kind": e.kind, "message": str(e)}, b""
        except (OSError, RecursionError) as e:
            what = req.get("path") or req["op"]
            return {"ok": False, "kind": "os", "errno": getattr(e, "errno", None), "message": f"{what}: {getattr(e, 'strerror', None) or e}"}, b""
        finally:
            os.setresuid(-1, 0, -1)
            os.setresgid(-1, 0, -1)

    def serve(self) -> None:
        self.zygote.start()
        with contextlib.suppress(OSError):
            self.zygote.wait_ready()  # else restarted on first use
        send_frame(self.out, {"ready": True, "pid": os.getpid(), "zygote": self.zygote.pid})
        while True:
            frame = recv_frame(self.inp, mutable=True)
            if frame is None:
                return
            req, blob = frame
            op = req.get("op")
            if op == "exec":
                head, data = self.exec(req, blob)  # type: ignore[arg-type]
            elif op in ("write", "read", "reset"):
                head, data = self.file_op(req, blob)  # type: ignore[arg-type]
            elif op == "ping":
                head, data = {"ok": True, "zygote": self.zygote.pid}, b""
            else:
                head, data = {"ok": False, "kind": "invalid", "message": f"unknown op {op!r}"}, b""
            out = frame_buffer(head, data)
            try:
                view = memoryview(out)
                while view:
                    view = view[os.write(self.out, view):]
            finally:
                _wipe(out)
                if isinstance(data, bytearray):
                    _wipe(data)
                _wipe(blob)  # type: ignore[arg-type]


DRAIN_S = 0.05  # after a program's processes are dead: how long its output may go quiet before we stop reading


def _children_cpu() -> float:
    """User + system CPU seconds of this process's reaped children (and theirs)."""
    import resource

    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _drain(caps: dict[int, Capture]) -> None:
    """Read what the program's processes left in their output pipes, then close them. Their
    writers are dead, but a write end can outlive them (parked in a unix socket's queue that the
    kernel frees later): stop when the pipes are empty and quiet for DRAIN_S, never at EOF only."""
    import select

    poller = select.poll()
    for fd in caps:
        os.set_blocking(fd, False)
        poller.register(fd, select.POLLIN)
    open_fds = set(caps)
    while open_fds:
        events = poller.poll(DRAIN_S * 1000)
        if not events:
            break
        for fd, _ev in events:
            try:
                data = os.read(fd, 1 << 16)
            except BlockingIOError:
                continue
            if data:
                caps[fd].add(data)
            else:
                poller.unregister(fd)
                open_fds.discard(fd)
    for fd in caps:
        os.close(fd)


def _assert_namespace_init() -> None:
    """Refuse to mass-kill unless this process is PID 1 of its own PID namespace and ``/proc``
    belongs to that namespace (``/proc/self`` reads ``1``). Run anywhere else - on the host, in
    a test - the server must never signal processes it did not start."""
    if os.getpid() != 1 or os.readlink("/proc/self") != "1":
        raise RuntimeError("the fork server runs only as PID 1 of a private PID namespace with its own /proc")


def _read_until_eof(fd: int) -> bytes:
    chunks: list[bytes] = []
    while True:
        chunk = os.read(fd, 4096)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)


def _die_with_parent() -> None:
    """SIGKILL this server when nsjail (its parent, outside the namespace) dies; the kernel
    then kills everything else in the PID namespace."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass  # the host also kills the server itself; this only makes it quicker


def _set_nondumpable() -> None:
    """Programs share this process's uid (container mode): without CAP_SYS_PTRACE they can then
    neither ptrace it nor read its /proc/PID/mem or environ."""
    import ctypes

    ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE 0


def main() -> None:
    if len(sys.argv) > 2 and sys.argv[1] == ZYGOTE_FLAG:
        zygote_main(json.loads(sys.argv[2]))
        return
    _assert_namespace_init()
    _die_with_parent()
    config = json.loads(sys.argv[1])
    if config.get("nondumpable"):
        _set_nondumpable()
    # Nothing of the server's own stdio may reach a child: children dup2 their own pipes.
    Server(config).serve()


if __name__ == "__main__":
    main()
