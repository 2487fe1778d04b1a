"""The cgroup v1 memory and pids groups of the isolated backend's sessions.

Each session gets a parent group ``practicum/<host pid>-<random>`` in both controllers; nsjail
makes its per-jail group inside it. The host removes the groups when the session closes, and
:func:`sweep_stale_cgroups` removes those of host processes that died without closing."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import time
from pathlib import Path

from practicum.sandbox.hostproc import kill_sandbox_pid

CGROUP_V1 = Path("/sys/fs/cgroup")
CGROUP_PARENT = "practicum"


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


def memsw_available() -> bool:
    """Whether the memory controller also limits swap (``memory.memsw.*``)."""
    return (CGROUP_V1 / "memory" / "memory.memsw.limit_in_bytes").exists()


@dataclasses.dataclass
class SessionCgroups:
    """The session's cgroup parents; nsjail creates its per-jail group inside each."""

    name: str

    @property
    def parent(self) -> str:
        """The parent as nsjail's ``--cgroup_*_parent`` wants it (relative to the controller)."""
        return f"{CGROUP_PARENT}/{self.name}"

    @property
    def dirs(self) -> list[Path]:
        return [CGROUP_V1 / ctl / CGROUP_PARENT / self.name for ctl in ("memory", "pids")]

    def create(self, owner: int | None = None) -> None:
        """Make the groups; ``owner``: a host uid that may then manage them (delegation)."""
        for d in self.dirs:
            d.mkdir()
            if owner is not None:
                for p in [d, *d.iterdir()]:
                    os.chown(p, owner, owner)

    def oom_kills(self) -> int:
        """How many processes the memory controller has killed in the session so far."""
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
