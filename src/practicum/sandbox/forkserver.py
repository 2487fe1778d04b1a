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
execution started, a double-forked daemon included, outlives it.

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


def send_frame(fd: int, header: dict, blob: bytes = b"") -> None:
    view = memoryview(encode_frame(header, blob))
    while view:
        n = os.write(fd, view)
        view = view[n:]


def _read_exact(fd: int, n: int) -> bytes | None:
    chunks = []
    while n:
        chunk = os.read(fd, min(n, 1 << 20))
        if not chunk:
            return None
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def recv_frame(fd: int) -> tuple[dict, bytes] | None:
    head = _read_exact(fd, _HEADER.size)
    if head is None:
        return None
    jlen, blen = _HEADER.unpack(head)
    if jlen > MAX_FRAME or blen > MAX_FRAME:
        raise ValueError("frame too large")
    data = _read_exact(fd, jlen) if jlen else b""
    blob = _read_exact(fd, blen) if blen else b""
    if data is None or blob is None:
        return None
    return json.loads(data), blob


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


def rlimits(lim: dict) -> list[tuple[int, int, int]]:
    """The per-execution rlimits ``(resource, soft, hard)`` for a ``Limits`` as a dict."""
    import resource

    mb = 1 << 20
    cpu = max(1, int(-(-lim["cpu_s"] // 1)))
    return [
        (resource.RLIMIT_AS, lim["memory_mb"] * mb, lim["memory_mb"] * mb),
        (resource.RLIMIT_CPU, cpu, cpu + 1),  # SIGXCPU at the soft limit, SIGKILL one second later
        (resource.RLIMIT_FSIZE, lim["file_size_mb"] * mb, lim["file_size_mb"] * mb),
        (resource.RLIMIT_NPROC, lim["processes"], lim["processes"]),
        (resource.RLIMIT_NOFILE, 256, 256),
        (resource.RLIMIT_CORE, 0, 0),
    ]


class Server:
    def __init__(self, config: dict) -> None:
        self.uid, self.gid = config["exec_uid"], config["exec_gid"]
        self.workspace = config["workspace"]
        self.roots = list(config.get("roots") or [self.workspace])  # what the file operations may reach
        self.scratch = list(config.get("scratch") or [])  # further writable folders, emptied by reset
        self.env = config["env"]
        self.inp, self.out = 0, 1
        self._last_status: int | None = None

    # -- child side (never returns) --
    def _child(self, req: dict, fds: tuple[int, int, int], errpipe: int) -> None:
        """Set up a forked child and run the request in it. ``errpipe`` (close-on-exec) carries
        a set-up or exec failure to the server; its EOF means the program has started."""
        try:
            for target, fd in enumerate(fds):
                os.dup2(fd, target)
            os.closerange(3, errpipe)
            os.closerange(errpipe + 1, 1 << 16)
            os.setsid()
            os.setgroups([self.gid])
            os.setresgid(self.gid, self.gid, self.gid)
            os.setresuid(self.uid, self.uid, self.uid)  # drops every capability of the server
            import resource

            for which, soft, hard in rlimits(req["limits"]):
                _, cur_hard = resource.getrlimit(which)  # never above what the sandbox was given
                if cur_hard != resource.RLIM_INFINITY:
                    soft, hard = min(soft, cur_hard), min(hard, cur_hard)
                resource.setrlimit(which, (soft, hard))
            os.chdir(self.workspace)
            os.umask(0o022)
            env = dict(self.env)
            env.update(req.get("env") or {})
        except BaseException as e:  # noqa: BLE001 - a child must never return into the server loop
            with contextlib.suppress(Exception):
                os.write(errpipe, f"sandbox set-up failed: {e!r}".encode())
            os._exit(126)
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
            self._python(req["code"], env)
        finally:
            os._exit(1)

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

    # -- server side --
    def exec(self, req: dict, stdin: bytes) -> tuple[dict, bytes]:
        import select

        cap = req["limits"]["output_bytes"]
        timeout = float(req["timeout"])
        in_r, in_w = os.pipe2(os.O_CLOEXEC)
        out_r, out_w = os.pipe2(os.O_CLOEXEC)
        err_r, err_w = os.pipe2(os.O_CLOEXEC)
        ep_r, ep_w = os.pipe2(os.O_CLOEXEC)  # the child reports a failed set-up or exec here
        start = time.monotonic()
        pid = os.fork()
        if pid == 0:
            self._child(req, (in_r, out_w, err_w), ep_w)
        for fd in (in_r, out_w, err_w, ep_w):
            os.close(fd)
        exec_error = _read_until_eof(ep_r)
        os.close(ep_r)

        pidfd = os.pidfd_open(pid)
        caps = {out_r: Capture(cap), err_r: Capture(cap)}
        poller = select.poll()
        for fd in caps:
            poller.register(fd, select.POLLIN)
        poller.register(pidfd, select.POLLIN)
        pending = memoryview(stdin)
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
        # The program's own process has ended (or ran out of time): end everything it started.
        self._kill_all_but_status(pid)
        status = self._last_status
        os.close(pidfd)
        if in_w >= 0:
            os.close(in_w)
        for fd, capture in caps.items():  # every writer is dead now, so these reads reach EOF
            while True:
                data = os.read(fd, 1 << 16)
                if not data:
                    break
                capture.add(data)
            os.close(fd)
        out, err = caps[out_r], caps[err_r]
        code = os.waitstatus_to_exitcode(status) if status is not None else None
        return {
            "exit_code": code if code is not None and code >= 0 else None,
            "signal": -code if code is not None and code < 0 else None,
            "timed_out": timed_out,
            "duration": duration,
            "exec_error": exec_error.decode(errors="replace"),
            "truncated": out.total > cap or err.total > cap,
            "stdout_len": len(out.head),
            "memory_error": err.memory_error(),
        }, bytes(out.head) + bytes(err.head)

    def _kill_all_but_status(self, pid: int) -> None:
        """SIGKILL every process of this sandbox but the server, reap them all, and keep the wait
        status of ``pid`` (the execution's own process) in ``self._last_status``.

        Only ever done as PID 1 of a private PID namespace whose ``/proc`` is that namespace's:
        the pids listed there are then exactly the sandbox's processes. Never ``kill(-1)``.
        """
        self._last_status = None
        _assert_namespace_init()
        me = os.getpid()
        while True:
            self._reap(pid, block=False)
            others = [int(n) for n in os.listdir("/proc") if n.isdigit() and int(n) > 1 and int(n) != me]
            if not others:
                return
            for victim in others:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(victim, signal.SIGKILL)
            if not self._reap(pid, block=True):  # none of them is our child yet: they are dying
                time.sleep(0.0002)

    def _reap(self, pid: int, block: bool) -> bool:
        """Reap dead children (waiting for the first one when ``block``); keeps ``pid``'s status.
        False when there was no child at all."""
        flags = 0 if block else os.WNOHANG
        while True:
            try:
                got, status = os.waitpid(-1, flags)
            except ChildProcessError:
                return False
            except InterruptedError:
                continue
            if got == 0:
                return True
            if got == pid:
                self._last_status = status
            flags = os.WNOHANG

    def file_op(self, req: dict, blob: bytes) -> tuple[dict, bytes]:
        # File operations run with the execution uid, so that files belong to the programs.
        # Safe without races: between executions no process of that uid exists.
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
        send_frame(self.out, {"ready": True, "pid": os.getpid()})
        while True:
            frame = recv_frame(self.inp)
            if frame is None:
                return
            req, blob = frame
            op = req.get("op")
            if op == "exec":
                head, data = self.exec(req, blob)
            elif op in ("write", "read", "reset"):
                head, data = self.file_op(req, blob)
            elif op == "ping":
                head, data = {"ok": True}, b""
            else:
                head, data = {"ok": False, "kind": "invalid", "message": f"unknown op {op!r}"}, b""
            send_frame(self.out, head, data)


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


def main() -> None:
    _assert_namespace_init()
    _die_with_parent()
    config = json.loads(sys.argv[1])
    if config.get("nondumpable"):
        # programs share this process's uid (container mode): without CAP_SYS_PTRACE they can
        # then neither ptrace it nor read its /proc/1/mem or environ
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE 0
    for name in config.get("preload", []):
        try:
            __import__(name)
        except ImportError:
            pass
    # Nothing of the server's own stdio may reach a child: children dup2 their own pipes.
    Server(config).serve()


if __name__ == "__main__":
    main()
