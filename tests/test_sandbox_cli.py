"""``practicum sandbox run`` and ``practicum verify code`` as a user (or an attacker) runs them:
several programs in one reused session, several answers through one shared pool, and text
output that a program cannot use to rewrite the verdict (issue 8)."""

from __future__ import annotations

import json
import os
import secrets
from pathlib import Path

import pytest
from typer.testing import CliRunner

from practicum.cli import app
from practicum.sandbox.namespaced import NsjailSandbox

AVAILABLE, WHY = NsjailSandbox.available()
if not AVAILABLE and os.environ.get("CI") == "true":
    raise RuntimeError(f"CI=true but the isolated sandbox is unavailable: {WHY}")
pytestmark = pytest.mark.skipif(not AVAILABLE, reason=f"isolated sandbox unavailable: {WHY}")
runner = CliRunner()
REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("PRACTICUM_SHARED", REPO.parent / "shared"))

SCAN = r'''
import ctypes, os, re
pat = re.compile(rb"S3CR3T[0-9a-f]{32}")
found = set()
for line in open("/proc/self/maps"):
    parts = line.split()
    lo, hi = (int(x, 16) for x in parts[0].split("-"))
    name = parts[5] if len(parts) > 5 else ""
    if parts[1].startswith("r") and name in ("", "[heap]", "[stack]"):
        found.update(pat.findall(ctypes.string_at(lo, hi - lo)))
print("found", sorted(x.decode() for x in found), "files", sorted(os.listdir(".")))
'''


def test_text_output_shows_control_characters_instead_of_obeying_them(tmp_path):
    """A program's escape sequences (clear line, carriage return, OSC title) are shown as
    ``\\x1b``... in the text output; --json keeps them as they are. Failed before: passed raw."""
    prog = tmp_path / "esc.py"
    prog.write_text('print("\\x1b[2K\\r\\x1b[32mok\\x1b[0m exit code 0\\x1b]0;pwned\\x07\\x9b")\n'
                    'import sys; sys.stderr.write("\\x1b[1A\\x1b[2K")\n')
    result = runner.invoke(app, ["sandbox", "run", str(prog)])
    assert result.exit_code == 0, result.output
    assert "\x1b" not in result.output and "\r" not in result.output and "\x07" not in result.output
    assert "\x9b" not in result.output
    assert "\\x1b[2K\\x0d" in result.output and "\\x1b]0;pwned\\x07" in result.output
    raw = runner.invoke(app, ["sandbox", "run", str(prog), "--json"])
    assert json.loads(raw.output)["stdout"].startswith("\x1b[2K\r")


def test_same_session_runs_programs_in_one_pooled_session_with_the_training_reset(tmp_path):
    secret = "S3CR3T" + secrets.token_hex(16)
    first = tmp_path / "first.py"
    first.write_text(f"x = {secret[:8]!r} + {secret[8:]!r}\nprint(x)\nopen('left.txt', 'w').write(x)\n")
    second = tmp_path / "second.py"
    second.write_text(SCAN)
    third = tmp_path / "third.sh"
    third.write_text("echo $$ > /scratch/pid; ls -A /scratch /dev/shm\n")
    result = runner.invoke(app, ["sandbox", "run", str(first), str(second), str(third), "--same-session", "--json"])
    assert result.exit_code == 0, result.output
    records = json.loads(result.output)
    assert [r["status"] for r in records] == ["ok", "ok", "ok"]
    assert secret in records[0]["stdout"]
    assert "found [] files ['second.py']" in records[1]["stdout"]  # no memory, no file of the first
    assert records[2]["stdout"].split() == ["/dev/shm:", "/scratch:", "pid"]
    single = runner.invoke(app, ["sandbox", "run", str(first), "--same-session", "--json"])
    assert isinstance(json.loads(single.output), list)  # --same-session always prints a list
    text = runner.invoke(app, ["sandbox", "run", str(first), str(second), "--same-session"])
    assert "first.py" in text.output and "second.py" in text.output and "found []" in text.output


def test_verify_code_scores_several_answers_in_order_through_one_pool(tmp_path):
    case = SHARED / "hostile" / "reward_hacks" / "eq_always_true"
    if not case.exists():
        pytest.skip(f"{case} not found (set PRACTICUM_SHARED)")
    task = json.loads((case / "task.json").read_text())
    good = tmp_path / "good.py"
    good.write_text(task["correct_solution"])
    args = ["verify", "code", "--task", str(case / "task.json"), "--answer", str(good),
            "--answer", str(case / "solution.py"), "--answer", str(good), "--pool-size", "1", "--json"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    records = json.loads(result.output)
    assert [r["value"] for r in records] == [1.0, 0.0, 1.0]
    assert records[1]["flags"] == ["eq_override"]
    one = runner.invoke(app, ["verify", "code", "--task", str(case / "task.json"), "--answer", str(good), "--json"])
    assert json.loads(one.output)["value"] == 1.0  # one answer: one object, as before
