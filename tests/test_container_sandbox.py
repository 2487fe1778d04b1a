"""Container mode of the sandbox: root in a writable root filesystem, and still isolated.

Each test runs real programs in real container-mode sessions (nsjail, overlays, idmapped
mounts). What Harbor tasks need must work; what would let a program reach the host, another
session or the fork server must not.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from practicum.errors import SandboxError
from practicum.sandbox import Limits, get_sandbox
from practicum.sandbox.base import Container

REPO = Path(__file__).resolve().parents[1]


def run(script: str, limits: Limits | None = None, workdir: str = "/app") -> tuple[str, str, int | None]:
    async def go():
        s = await get_sandbox().session(limits or Limits(timeout_s=30), workdir=workdir, container=Container())
        try:
            r = await s.exec(["bash", "-c", script])
        finally:
            await s.close()
        return r

    r = asyncio.run(go())
    return r.stdout, r.stderr, r.exit_code


def test_root_writes_anywhere_copy_on_write():
    out, err, code = run("id -u; mkdir /server && echo made; echo x > /usr/bin/added && echo usr-ok; "
                         "echo 'a=1' >> /etc/added.conf && echo etc-ok; rm /etc/issue && echo rm-ok; pwd")
    assert code == 0, err
    assert out.split() == ["0", "made", "usr-ok", "etc-ok", "rm-ok", "/app"]
    assert not Path("/usr/bin/added").exists() and not Path("/server").exists()  # nothing reached the host
    assert Path("/etc/issue").exists()
    out, _, _ = run("ls /server /usr/bin/added 2>&1 | head -2; test -e /etc/issue && echo issue-back")
    assert "No such file" in out and "issue-back" in out  # a new session starts from the image again


def test_process_substitution_ptys_and_dot_files():
    out, err, code = run("cat <(echo via-dev-fd); tmux new-session -d -s t 'sleep 5' && tmux ls | cut -d: -f1; "
                         "test -f /root/.bashrc && echo bashrc")
    assert code == 0, err
    assert out.split() == ["via-dev-fd", "t", "bashrc"]


PTRACE = r"""
import ctypes, os, signal, sys, time
libc = ctypes.CDLL(None, use_errno=True)
child = os.fork()
if child == 0:
    time.sleep(10)
    os._exit(0)
time.sleep(0.1)
own = libc.ptrace(16, child, 0, 0)  # PTRACE_ATTACH to our own child
print("own", own, ctypes.get_errno())
os.kill(child, signal.SIGKILL)
server = libc.ptrace(16, 1, 0, 0)   # and to the fork server, PID 1
print("server", server, ctypes.get_errno())
try:
    open("/proc/1/mem", "rb").read(1)
    print("mem readable")
except OSError as e:
    print("mem", e.errno)
"""


def test_ptrace_own_processes_but_never_the_fork_server():
    out, err, code = run(f"python3 - <<'EOF'\n{PTRACE}\nEOF\nkill -9 1; sleep 0.2; echo server-alive")
    lines = out.splitlines()
    assert lines[0] == "own 0 0", (out, err)
    assert lines[1].startswith("server -1 ") and lines[2].startswith("mem ") and lines[3] == "server-alive", out


def test_the_host_is_not_visible_and_there_is_no_network(tmp_path):
    from practicum.models import practicum_home

    secret = tmp_path / "host-secret.txt"  # a host file next to the checkout's kind of place
    secret.write_text("host only")
    # files, not folders: a folder such as /tmp also exists inside the container (its own)
    host_files = [REPO / "pyproject.toml", secret, *sorted(practicum_home().glob("*"))[:3]]
    out, _, _ = run("; ".join(f"test -e {f} && echo SEEN {f}" for f in host_files) +
                    "; python3 -c \"import socket; socket.create_connection(('1.1.1.1', 53), timeout=2)\" "
                    "2>/dev/null || echo no-network")
    assert "SEEN" not in out and "no-network" in out


def test_writable_layer_is_capped_in_size_and_inodes():
    out, _, _ = run("dd if=/dev/zero of=/big bs=1M count=64 2>/dev/null; stat -c 'size %s' /big; "
                    "python3 -c \"\nimport os\nn=0\ntry:\n    for i in range(100000):\n        open(f'/tmp/f{i}', 'w').close(); n+=1\n"
                    "except OSError as e:\n    print('inodes', n, e.errno)\n\"",
                    limits=Limits(timeout_s=60, workspace_mb=32))
    assert int(out.split("size")[1].split()[0]) <= 32 << 20  # the 64 MiB file was cut at the cap
    assert "inodes" in out and int(out.split("inodes")[1].split()[0]) < 100000


def test_memory_kill_and_cleanup():
    out, err, code = run("python3 -c 'x = bytearray(1 << 30)'; echo rc=$?", limits=Limits(timeout_s=30, memory_mb=256))
    assert "rc=" in out and "rc=0" not in out, (out, err)
    assert REPO.is_dir() and (REPO / "pyproject.toml").is_file()  # the host is untouched


def test_var_lock_leads_somewhere_as_in_debians_images():
    """/var/lock links to /run/lock, which Debian's and Ubuntu's images have (TB2's mailman set-up
    makes /var/lock/mailman)."""
    out, err, code = run("mkdir -p /var/lock/mailman && test -d /run/lock/mailman && stat -c %a /run/lock")
    assert code == 0 and out.strip() == "1777", (out, err)


def test_the_machines_login_accounts_are_not_in_the_images_account_databases():
    """A base image has no login users; this machine may (a uid-1000 user here), and a task's
    `RUN useradd -m -u 1000 agent` then failed with "UID 1000 is not unique". Container mode shows
    /etc/passwd, /etc/group and the shadow files without the machine's ids 1000-59999 (their
    names gone from group member lists too); root, the system accounts and nobody stay."""
    host = [ln.split(":") for ln in Path("/etc/passwd").read_text().splitlines()]
    logins = [r[0] for r in host if len(r) > 2 and r[2].isdigit() and 1000 <= int(r[2]) <= 59999]
    script = ("cut -d: -f1 /etc/passwd /etc/group | sort -u | tr '\\n' ' '; echo; cut -d: -f4 /etc/group | tr '\\n' ','; echo; "
              "useradd -m -u 1000 agent && id -u agent && grep -c '^agent:' /etc/shadow && test -d /home/agent && echo home")
    out, err, code = run(script)
    assert code == 0, (out, err)
    names, members, *rest = out.splitlines()
    assert {"root", "nobody", "daemon"} <= set(names.split())
    assert not set(logins) & set(names.split()) and not set(logins) & set(members.split(",")), (logins, out)
    assert rest == ["1000", "1", "home"]
    assert "agent" not in Path("/etc/passwd").read_text()  # the host's own database is untouched


def test_open_descriptors_have_dockers_soft_limit_in_container_mode_only():
    """supervisord will not start below its default minfds of 1024 ("The minimum number of file
    descriptors required to run this process is 1024", a public Harbor task's set-up): container
    mode gives each execution Docker's soft limit, 1024; 1024 can really be opened; the hard limit
    stays 1024, so no program can raise it. The shared environment keeps 256."""
    probe = ("ulimit -Sn; ulimit -Hn; python3 -c 'import os; fds = [os.open(\"/dev/null\", 0) for _ in range(1000)]; "
             "print(\"opened\", len(fds))'; ulimit -n 2048 2>/dev/null && echo raised || echo refused")
    out, err, code = run(probe)
    assert out.split() == ["1024", "1024", "opened", "1000", "refused"], (out, err)

    async def shared():
        s = await get_sandbox().session(Limits(timeout_s=30))
        try:
            return await s.exec(["bash", "-c", "ulimit -Sn"])
        finally:
            await s.close()

    assert asyncio.run(shared()).stdout.strip() == "256"


def test_reserved_address_space_is_not_memory_where_a_cgroup_holds_the_memory():
    """Chromium, V8, the JVM and Go reserve far more address space than they touch (Chromium: 32
    GiB PROT_NONE at start, then SIGTRAP when refused - a Terminal-Bench 2.0 task's chromedriver).
    Docker limits memory with a cgroup, not an address-space limit; so does container mode where
    the machine has the cgroup: the reservation succeeds, and touching more than the limit is still
    killed. Without the cgroup the address-space limit is the only guard and stays."""
    from practicum.sandbox.cgroups import cgroups_v1

    reserve = ("python3 -c 'import mmap; m = mmap.mmap(-1, 32 << 30, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS, "
               "prot=0); print(\"reserved\", len(m) >> 30)'; python3 -c 'x = bytearray(1 << 30)'; echo rc=$?")
    out, err, _ = run(reserve, limits=Limits(timeout_s=30, memory_mb=256))
    if cgroups_v1()[0]:
        assert "reserved 32" in out, (out, err)
    else:
        assert "reserved" not in out, (out, err)
    assert "rc=" in out and "rc=0" not in out, (out, err)  # a real gigabyte over 256 MiB is refused either way


# --- the hostile programs, in container mode ------------------------------------------------------

SHARED = Path(os.environ.get("PRACTICUM_SHARED", REPO.parent / "shared"))
HOSTILE = SHARED / "hostile" / "sandbox"
PROGRAMS = sorted(p.name for p in HOSTILE.glob("*.py")) if HOSTILE.is_dir() else []
OUTSIDE = ["/etc/practicum_escape", "/tmp/practicum_escape", os.path.expanduser("~/practicum_escape"),
           "/var/tmp/practicum_escape", "/tmp/practicum_daemon_marker", str(REPO.parent / "practicum_escape")]


@pytest.mark.parametrize("name", PROGRAMS or ["(missing)"])
def test_hostile_programs_are_contained_in_container_mode(name, monkeypatch):
    """Every hostile program, run as root of a container-mode session with the default limits:
    no ESCAPED line, nothing written on the host, nothing left running, the session still serves."""
    if not PROGRAMS:
        if os.environ.get("CI") == "true":
            pytest.fail(f"{HOSTILE} is missing: CI must run the hostile programs")
        pytest.skip(f"{HOSTILE} not present")
    import secrets
    import shutil
    import socket

    canary = secrets.token_hex(8)
    monkeypatch.setenv("PRACTICUM_CANARY", canary)
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    listener.settimeout(0.1)
    free_before = shutil.disk_usage("/").free
    limits = Limits()

    async def go():
        s = await get_sandbox().session(limits, workdir="/app", container=Container())
        try:
            await s.write_file("port", str(listener.getsockname()[1]))
            await s.write_file(name, (HOSTILE / name).read_text())
            r = await s.exec(["python3", name])
            if name == "daemon.py":
                await asyncio.sleep(5)
            left = s.program_pids()
            home = await s.exec(["ls", "-A", "/root"])
            links = []
            for link in ("passwd_link", "dir_link/passwd"):
                try:
                    links.append(await s.read_file(link))
                except (OSError, SandboxError):
                    links.append(None)
            again = await s.exec(["python3", "-c", "print('still serving')"])
        finally:
            await s.close()
        return r, left, links, again, home

    r, left, links, again, home = asyncio.run(go())
    # Container mode gives root a private, writable copy of the whole tree by design: writing
    # /etc or /root there, or listing the container's own /root, is no escape. Those lines are
    # judged from the host instead (below: nothing exists on the host; /root holds only the
    # image's dot files).
    by_design = ("ESCAPED: wrote ", "ESCAPED: can list /root")
    escaped = [ln for ln in r.stdout.splitlines() if "ESCAPED" in ln and not ln.startswith(by_design)]
    assert not escaped, r.stdout
    assert set(home.stdout.split()) <= {".bashrc", ".profile", "practicum_escape"}, home.stdout
    assert canary not in r.stdout + r.stderr
    assert again.stdout == "still serving\n", again
    assert not {p for p in left if Path(f"/proc/{p}").exists()}, f"processes left: {left}"
    assert not any(Path(p).exists() for p in OUTSIDE)
    assert all(x is None or b"root:" not in x for x in links)
    assert shutil.disk_usage("/").free > free_before - (64 << 20)
    with pytest.raises(OSError):
        listener.accept()  # nothing reached the host's loopback
    listener.close()
    if name == "cpu_spin.py":
        assert r.status == "timeout"
    if name == "memory_hog.py":
        assert r.status in ("memory", "killed") or "MemoryError" in r.stderr
    if name == "output_flood.py":
        assert r.truncated and len(r.stdout) <= limits.output_bytes


def test_what_only_the_hosts_root_may_read_stays_hidden():
    """The idmapped view would make root-only host files readable by the sandbox's root: shadow
    hashes are blanked and private files hidden, while apt's and dpkg's state stays usable."""
    from practicum.sandbox.container import host_mask

    mask = host_mask()
    assert ("etc", "shadow", "sanitize") in mask  # Debian's /etc/shadow is root-only (0640)
    hidden = [f"/{top}/{rel}" for top, rel, how in mask if how == "hide"]
    out, err, code = run("cut -d: -f2 /etc/shadow | sort -u; " +
                         "".join(f"test -e {p} && echo VISIBLE {p}; " for p in hidden) +
                         "useradd -m bob && id -u bob; dpkg-query -W -f='${Status}\\n' bash")
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0] == "*", out  # the hash field of every entry is blanked
    assert not [ln for ln in lines if ln.startswith("VISIBLE")], out
    assert lines[-1] == "install ok installed" and lines[-2].isdigit()


@pytest.mark.parametrize("keep", [True, False])
def test_background_processes_live_on_only_in_a_session_that_keeps_them(keep):
    """keep_processes (a terminal task's container): what an execution leaves in the background
    runs on into the next execution, while a timed-out execution's own processes are killed;
    without it (an image build) nothing an execution started outlives it. Exit codes hold either way."""

    async def go():
        s = await get_sandbox().session(Limits(timeout_s=5), workdir="/app", container=Container(keep_processes=keep))
        try:
            started = await s.exec(["bash", "-c", "nohup sleep 300 >/dev/null 2>&1 & exit 3"])
            alive = await s.exec(["bash", "-c", "pgrep -xc sleep || true"])
            late = await s.exec(["bash", "-c", "sleep 201 & sleep 100"], timeout_s=1)
            after = await s.exec(["bash", "-c", "pgrep -xa sleep || true"])
            return started, alive, late, after
        finally:
            await s.close()

    started, alive, late, after = asyncio.run(go())
    assert started.exit_code == 3 and late.status == "timeout"
    assert alive.stdout.strip() == ("1" if keep else "0")
    assert [line.split(None, 1)[1] for line in after.stdout.splitlines()] == (["sleep 300"] if keep else [])
