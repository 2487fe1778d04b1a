"""Backend choice, the local (not isolated) backend, and the ``practicum sandbox`` CLI.

The local backend runs only trusted programs here: it is not isolated, so no hostile program
is ever given to it.
"""

from __future__ import annotations

import asyncio
import json
import os
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from practicum.cli_sandbox import sandbox_app
from practicum.errors import SandboxError
from practicum.sandbox import Limits, SandboxPool, get_sandbox, report
from practicum.sandbox.local import LocalSandbox, NotIsolatedWarning
from practicum.sandbox.namespaced import NsjailSandbox

ISOLATED, WHY = NsjailSandbox.available()
needs_isolation = pytest.mark.skipif(not ISOLATED, reason=f"isolated sandbox unavailable: {WHY}")


def local() -> LocalSandbox:
    with pytest.warns(NotIsolatedWarning, match="NOT isolated"):
        sb = get_sandbox("local")
    assert isinstance(sb, LocalSandbox) and sb.isolated is False
    return sb  # type: ignore[return-value]


# --- choosing a backend -------------------------------------------------------------------------
def test_auto_never_falls_back_to_local(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(NsjailSandbox, "available", classmethod(lambda cls: (False, "no user namespaces here")))
    with pytest.raises(SandboxError, match=r"no user namespaces here.*get_sandbox\('local'\)"):
        get_sandbox("auto")
    with pytest.raises(SandboxError):
        get_sandbox()
    with pytest.raises(SandboxError, match="unknown sandbox backend"):
        get_sandbox("docker")


@needs_isolation
def test_auto_is_the_isolated_backend() -> None:
    sb = get_sandbox("auto")
    assert sb.isolated and sb.name == "nsjail"
    assert get_sandbox(sb) is sb


def test_report_rows_for_doctor() -> None:
    rows = report()
    assert all(isinstance(n, str) and isinstance(ok, bool) and isinstance(why, str) for n, ok, why in rows)
    names = [n for n, _, _ in rows]
    assert any("nsjail" in n for n in names) and "sandbox local" in names
    nsjail_row = next(r for r in rows if r[0].startswith("sandbox nsjail"))
    assert nsjail_row[1] == ISOLATED


# --- the local backend --------------------------------------------------------------------------
def test_local_backend_warns_and_runs_with_limits() -> None:
    sb = local()

    async def main() -> None:
        async with await sb.session(Limits(timeout_s=5, output_bytes=1000)) as s:
            r = await s.run_python("import sys; print(sys.stdin.read().upper())", stdin="hi")
            assert r.ok and r.stdout == "HI\n"
            r = await s.exec("exit 4")
            assert (r.status, r.exit_code) == ("ok", 4)
            r = await s.run_python("print('x' * 5000)")
            assert r.truncated and len(r.stdout) == 1000
            r = await s.exec(["definitely-not-a-program"])
            assert r.status == "error"
            await s.write_file("d/f.txt", "data")
            assert (await s.exec(["cat", "d/f.txt"])).stdout == "data"
            os.symlink("/etc/passwd", os.path.join(s.workspace, "link"))  # type: ignore[attr-defined]
            with pytest.raises(SandboxError):
                await s.read_file("link")
            with pytest.raises(SandboxError):
                await s.read_file("../x")
            r = await s.run_python("b = bytearray(600 * 1024 * 1024)")
            assert r.status == "memory"
            base = s.base  # type: ignore[attr-defined]
        assert not os.path.exists(base)

    asyncio.run(main())


def test_local_timeout_kills_the_process_group() -> None:
    sb = local()

    async def main() -> None:
        async with await sb.session() as s:
            t0 = time.monotonic()
            r = await s.exec("sleep 30 & echo $! > bg.pid; sleep 30", timeout_s=0.5)
            assert r.status == "timeout" and time.monotonic() - t0 < 5
            pid = int((await s.read_file("bg.pid")).decode())
            await asyncio.sleep(0.1)
            assert not Path(f"/proc/{pid}").exists() or "Z" in Path(f"/proc/{pid}/stat").read_text().split()[2]

    asyncio.run(main())


def test_local_pool_and_extra_dirs() -> None:
    sb = local()

    async def main() -> None:
        async with SandboxPool(sb, size=2, workdir="/app", extra_dirs=["/logs/verifier"]) as pool:
            async with await pool.session() as s:
                await s.write_file("/logs/verifier/reward.txt", "1")
                assert await s.read_file("/logs/verifier/reward.txt") == b"1"
            async with await pool.session() as s:  # the same session, emptied
                with pytest.raises(FileNotFoundError):
                    await s.read_file("/logs/verifier/reward.txt")
            results = await asyncio.gather(*(pool.run_python(f"print({i})") for i in range(4)))
            assert [r.stdout for r in results] == [f"{i}\n" for i in range(4)]

    asyncio.run(main())


# --- the CLI ------------------------------------------------------------------------------------
runner = CliRunner()


def test_cli_run_local_json(tmp_path: Path) -> None:
    prog = tmp_path / "prog.py"
    prog.write_text("import sys\nprint(open('data.txt').read().strip(), sys.argv[0])\nsys.exit(3)\n")
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "data.txt").write_text("from the workspace\n")
    with pytest.warns(NotIsolatedWarning):
        res = runner.invoke(sandbox_app, ["run", str(prog), "--workspace", str(ws), "--backend", "local", "--json"])
    assert res.exit_code == 1, res.output
    out = json.loads(res.stdout)
    assert {"status", "exit_code", "stdout", "stderr", "truncated", "duration_s"} <= out.keys()
    assert (out["status"], out["exit_code"], out["stdout"]) == ("ok", 3, "from the workspace prog.py\n")


def test_cli_bad_input_exits_2(tmp_path: Path) -> None:
    res = runner.invoke(sandbox_app, ["run", str(tmp_path / "missing.py"), "--json"])
    assert res.exit_code == 2 and "no such file" in json.loads(res.stdout)["error"]
    data = tmp_path / "data.bin"
    data.write_bytes(b"\x00\x01")
    res = runner.invoke(sandbox_app, ["run", str(data), "--backend", "local"])
    assert res.exit_code == 2 and "cannot tell how to run it" in res.output


@needs_isolation
def test_cli_run_isolated_with_limits(tmp_path: Path) -> None:
    prog = tmp_path / "spin.py"
    prog.write_text("print('start', flush=True)\nwhile True:\n    pass\n")
    res = runner.invoke(sandbox_app, ["run", str(prog), "--timeout", "0.5", "--json"])
    out = json.loads(res.stdout)
    assert res.exit_code == 1 and out["status"] == "timeout" and out["stdout"] == "start\n"
    hog = tmp_path / "hog.py"
    hog.write_text("b = bytearray(300 * 1024 * 1024)\n")
    out = json.loads(runner.invoke(sandbox_app, ["run", str(hog), "--memory-mb", "128", "--json"]).stdout)
    assert out["status"] == "memory"
    ok = tmp_path / "ok.sh"
    ok.write_text("echo hello from $(pwd)\n")
    res = runner.invoke(sandbox_app, ["run", str(ok)])
    assert res.exit_code == 0 and "hello from /workspace" in res.output and "ok" in res.output


def test_cli_check_lists_backends() -> None:
    res = runner.invoke(sandbox_app, ["check"])
    assert res.exit_code == 0 and "sandbox local" in res.output
