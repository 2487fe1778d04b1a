"""Container mode: a session whose programs are root in a writable root filesystem.

What Harbor / Terminal-Bench tasks expect of their Docker container, without a container
runtime: the agent and the verifier are root, may write anywhere (``mkdir /server``,
``apt-get install`` into ``/usr``), use ``/dev/fd`` (process substitution), ptys (tmux, vim,
expect) and ``ptrace`` on their own processes, and find what the image's ``RUN`` lines
prepared. Built on the same nsjail sandbox as the default mode; only the root filesystem, the
identity and the capability set differ (``container_stage.py`` assembles the root):

* root filesystem: ``/`` and the machine's ``/usr``, ``/etc`` and ``/var`` are overlays: a
  private writable layer (tmpfs capped at ``Limits.workspace_mb`` and an inode count; nothing
  reaches the host's disk) over the image's cached layers over a read-only, *idmapped* view of
  the machine's folders. Nothing else of the host is visible: not ``/root``, ``/home``, ``/tmp``,
  ``/opt``, the repository or the task's hidden tests (binds excepted);
* identity: uid/gid 0-65535 inside map to a fixed host range (:data:`ROOT_BASE` ...), the same
  for every container session, so that image layers built once keep their owners; no other
  session can be reached (own PID, mount, network, IPC and UTS namespaces);
* capabilities: Docker's default set, which has no ``CAP_SYS_ADMIN`` and no ``CAP_SYS_PTRACE``:
  a program may ptrace its own processes (same uid, dumpable) but not the fork server, which
  makes itself non-dumpable (so its memory, ``/proc/1/mem`` and ``/proc/1/environ`` are out of
  reach too); SIGKILL to the server (PID 1) is ignored by the kernel;
* seccomp: the default mode's policy without the ptrace family; mounts, namespaces, bpf,
  keyrings, io_uring and the like stay refused;
* resources: the same per-execution limits, cgroups and kill-everything-after-each-execution as
  the default mode.

Not isolated beyond the default mode: the kernel; the machine's ``/usr``, ``/etc`` and ``/var``
are shown as an image would hold them, but what in ``/etc`` and ``/var`` only the host's root may
read is hidden (private keys, a database's files) or blanked (the password hashes of
``/etc/shadow``), see :func:`host_mask`; ``/usr`` is shown as it is. The verifier runs in the state the agent left,
as in Harbor: a root agent can change the tools the verifier will use (the verifier toolchain
is a read-only mount and comes first in the verifier's PATH, which narrows but does not close
this).
"""

from __future__ import annotations

import functools
import json
import os
import stat
import sys

from practicum.errors import SandboxError
from practicum.sandbox import shipped
from practicum.sandbox.base import Limits, SessionOptions

ROOT_BASE = 0x5C000000  # host uid/gid of the container's root; ROOT_BASE + k for uid k inside
# where the stage script assembles the root: inside the session's private mount namespace, on a
# tmpfs it mounts over /run there (nothing of the host's /run is touched)
STAGE = "/run/practicum"
ID_COUNT = 65536
TOPS = ("usr", "etc", "var")  # machine folders shown copy-on-write (the rest of / is the image's)
SERVER_INSIDE = "/opt/practicum/forkserver.py"
DOCKER_CAPS = ("CAP_CHOWN", "CAP_DAC_OVERRIDE", "CAP_FSETID", "CAP_FOWNER", "CAP_MKNOD", "CAP_NET_RAW",
               "CAP_SETGID", "CAP_SETUID", "CAP_SETFCAP", "CAP_SETPCAP", "CAP_NET_BIND_SERVICE",
               "CAP_SYS_CHROOT", "CAP_KILL", "CAP_AUDIT_WRITE")
PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
# Where the distribution keeps root's default dot files (Debian's base-files: dot.bashrc,
# dot.profile); $PRACTICUM_DOTFILES points elsewhere on other systems.
DOTFILES = os.environ.get("PRACTICUM_DOTFILES", "/usr/share/base-files")
INODES_PER_MB = 64  # inode cap of the writable layer: 16k inodes for 256 MiB


SANITIZED = ("shadow", "shadow-", "gshadow", "gshadow-")
LOCKS = ("lock", "lock-frontend", "Lock", ".pwd.lock")
# The account databases, shown without this machine's login accounts: ids in Debian's range for
# them (adduser.conf's FIRST_UID..LAST_UID), which no base image has - a task's
# `useradd -m -u 1000 agent` failed with "UID 1000 is not unique" on a machine whose login user is 1000
ACCOUNT_FILES = ("passwd", "passwd-", "group", "group-")
LOGIN_IDS = (1000, 59999)


@functools.cache
def host_mask(tops: tuple[str, ...] = ("etc", "var")) -> tuple[tuple[str, str, str], ...]:
    """What of the machine's folders only the host's root may read: ``(top, path, how)`` with
    ``how`` = ``sanitize`` (shadow files: kept, hashes blanked) or ``hide``; and the account
    databases (``accounts``), shown without the machine's login accounts (:data:`LOGIN_IDS`), as
    an image has them. Lock files are left (apt and dpkg need them; they hold nothing)."""
    out: list[tuple[str, str, str]] = []
    for top in tops:
        for dirpath, dirnames, filenames in os.walk(f"/{top}"):
            keep = []
            for name in [*dirnames, *filenames]:
                p = os.path.join(dirpath, name)
                try:
                    st = os.lstat(p)
                except OSError:
                    continue
                if stat.S_ISLNK(st.st_mode) or name in LOCKS:
                    continue
                readable = st.st_mode & (0o005 if stat.S_ISDIR(st.st_mode) else 0o004)
                rel = os.path.relpath(p, f"/{top}")
                if not readable:
                    out.append((top, rel, "sanitize" if top == "etc" and rel in SANITIZED else "hide"))
                elif name in dirnames:
                    keep.append(name)
            dirnames[:] = keep
    if "etc" in tops:
        out += [("etc", f, "accounts") for f in ACCOUNT_FILES if os.path.isfile(f"/etc/{f}")]
    return tuple(out)


def seccomp_policy(default_policy: str) -> str:
    """The default mode's policy with the ptrace family allowed (own processes only, see above)."""
    out = default_policy
    for name in ("ptrace, ", "process_vm_readv, ", "process_vm_writev, "):
        out = out.replace(name, "")
    return out


def server_python() -> str:
    """The interpreter that runs the fork server inside: the machine's own ``/usr/bin/python3``
    (the only one inside the root filesystem; the fork server is standard-library only)."""
    for p in ("/usr/bin/python3", "/usr/local/bin/python3"):
        if os.access(p, os.X_OK):
            return p
    raise SandboxError("container mode needs a python3 in /usr/bin or /usr/local/bin of this machine "
                       "(it runs the sandbox's fork server)")


def server_env(options: SessionOptions) -> dict[str, str]:
    assert options.container is not None
    env = {"PATH": PATH, "HOME": "/root", "TMPDIR": "/tmp", "LANG": "C.UTF-8", "USER": "root", "LOGNAME": "root",
           "PWD": options.workdir, "TERM": "xterm"}
    env.update(dict(options.container.env))
    return env


CONTAINER_OPEN_FILES = 1024


def server_argv(options: SessionOptions, preload: tuple[str, ...], cgroup_memory: bool = False) -> list[str]:
    """The fork server's command. ``cgroup_memory``: the session's memory cgroup limits its memory,
    so executions get no address-space limit - Docker's way, under which V8, Chromium, the JVM and
    Go, which reserve far more address space than they use, run (Chromium's 32 GiB reservation
    failed under the address-space limit, a SIGTRAP at start)."""
    config = {"exec_uid": 0, "exec_gid": 0, "workspace": options.workdir, "roots": list(options.roots),
              "scratch": [], "env": server_env(options), "preload": list(preload), "nondumpable": True,
              "keep_processes": bool(options.container and options.container.keep_processes),
              "address_space_limit": not cgroup_memory,
              # Docker's soft limit of open descriptors: supervisord refuses to start below its
              # default minfds of 1024; the hard limit stays 1024 (Docker's is 524288), the
              # bound on what a session's processes can hold open
              "open_files": CONTAINER_OPEN_FILES}
    return [server_python(), "-s", "-B", SERVER_INSIDE, json.dumps(config)]


def command(nsjail: str, limits: Limits, options: SessionOptions, server: str, argv: list[str],
            seccomp: str | None, cgroup_args: list[str]) -> list[str]:
    """``unshare`` + the stage script (builds the root) + nsjail + ``argv`` (the fork server)."""
    spec = options.container
    assert spec is not None
    mb = 1 << 20
    for layer in spec.layers:
        if not os.path.isdir(layer):
            raise SandboxError(f"image layer {layer} does not exist")
    stage = {"stage": STAGE, "uid_base": ROOT_BASE, "uid_count": ID_COUNT, "tops": list(TOPS), "layers": list(spec.layers),
             "upper": spec.upper, "workdir": options.workdir, "mask": [list(m) for m in host_mask()], "login_ids": list(LOGIN_IDS), "dotfiles": DOTFILES,
             "upper_mb": limits.workspace_mb, "inodes": max(4096, limits.workspace_mb * INODES_PER_MB)}
    args = [nsjail, "-Mo", "-q", "-t", "0", "--hostname", "sandbox", "--chroot", f"{STAGE}/root", "--rw",
            "-D", options.workdir, "-u", f"0:{ROOT_BASE}:{ID_COUNT}", "-g", f"0:{ROOT_BASE}:{ID_COUNT}"]
    for cap in DOCKER_CAPS:
        args += ["--cap", cap]
    args += ["--rlimit_as", "hard", "--rlimit_cpu", "hard", "--rlimit_fsize", "hard", "--rlimit_nofile", "1024",
             "--rlimit_nproc", "hard", "--rlimit_core", "0", "--nice_level", str(os.nice(0))]
    for dev in ("null", "zero", "full", "random", "urandom", "tty"):
        if os.path.exists(f"/dev/{dev}") and dev != "tty":
            args += ["-B", f"/dev/{dev}"]
    args += ["-s", "/proc/self/fd:/dev/fd", "-s", "/proc/self/fd/0:/dev/stdin", "-s", "/proc/self/fd/1:/dev/stdout",
             "-s", "/proc/self/fd/2:/dev/stderr",
             "-m", "none:/dev/pts:devpts:newinstance,ptmxmode=0666,mode=0620", "-s", "pts/ptmx:/dev/ptmx",
             "-m", f"none:/dev/shm:tmpfs:size={min(limits.workspace_mb, 64) * mb},nr_inodes=4096,mode=1777",
             ]
    staged: list[str] = []
    for host, inside, writable in [(server, SERVER_INSIDE, False), *((b.host, b.inside, b.writable) for b in options.binds)]:
        if not os.path.exists(host):
            raise SandboxError(f"bind: host path {host!r} does not exist")
        if writable:
            raise SandboxError(f"bind {inside}: container sessions take read-only binds only")
        args += ["-R", f"{STAGE}/binds/{len(staged)}:{inside}"]
        staged.append(os.path.realpath(host))
    stage["binds"] = staged
    if limits.network:
        args.append("-N")
    if seccomp:
        args += ["--seccomp_string", seccomp_policy(seccomp)]
    args += cgroup_args
    for k, v in server_env(options).items():
        args += ["-E", f"{k}={v}"]
    args += ["--", *argv]
    return ["unshare", "--mount", "--propagation", "private", "--", sys.executable, "-I", "-S", shipped.path("practicum.sandbox.container_stage"),
            json.dumps(stage), "--", *args]
