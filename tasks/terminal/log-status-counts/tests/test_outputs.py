"""Hidden checks: the script's counts, recomputed here, on the shipped log and on unseen logs."""

import os
import subprocess
from collections import Counter
from pathlib import Path

from genlog import access_log

SCRIPT = "/app/status_counts.sh"


def expected(text):
    counts = Counter()
    for line in text.splitlines():
        after_request = line.split('"')[2]
        counts[after_request.split()[0]] += 1
    return [f"{s} {c}" for s, c in sorted(counts.items(), key=lambda kv: (-kv[1], int(kv[0])))]


def run(path):
    out = subprocess.run(["bash", SCRIPT, str(path)], capture_output=True, text=True, timeout=60, cwd="/tmp")
    assert out.returncode == 0, out.stderr
    return out.stdout.splitlines()


def test_script_is_executable():
    assert os.access(SCRIPT, os.X_OK)


def test_shipped_log_and_report():
    text = Path("/tests/access.log").read_text()
    assert Path("/app/logs/access.log").read_text() == text, "the log was modified"
    want = expected(text)
    assert "400 " in "\n".join(want)
    assert run("/app/logs/access.log") == want
    assert Path("/app/reports/status_counts.txt").read_text().splitlines() == want


def test_unseen_logs(tmp_path):
    for seed, n in ((101, 50), (202, 1500), (303, 7)):
        p = tmp_path / f"log{seed}"
        text = access_log(seed, n)
        p.write_text(text)
        assert run(p) == expected(text), seed


def test_ties_in_numeric_status_order(tmp_path):
    lines = []
    for status in (503, 200, 404, 200, 404, 503, 302):
        lines.append(f'1.2.3.4 - - [05/Mar/2024:00:00:0{len(lines)} +0000] "GET / HTTP/1.1" {status} 12 "-" "x"')
    p = tmp_path / "ties.log"
    p.write_text("\n".join(lines) + "\n")
    assert run(p) == ["200 2", "404 2", "503 2", "302 1"]
