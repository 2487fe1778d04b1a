"""Hidden checks: the summary, recomputed here, on the shipped log and on unseen ones."""

import json
import math
import subprocess
import sys
from pathlib import Path

from genreq import requests_log


def expected(text):
    by = {}
    for line in text.splitlines():
        try:
            e = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(e, dict):
            by.setdefault(e["path"], []).append(e["ms"])
    out = {}
    for path, v in by.items():
        v = sorted(v)
        out[path] = {"count": len(v), "p50": v[math.ceil(0.5 * len(v)) - 1],
                     "p95": v[math.ceil(0.95 * len(v)) - 1], "max": v[-1]}
    return out


def run(src, dst):
    r = subprocess.run([sys.executable, "/app/latency_report.py", str(src), str(dst)], cwd="/tmp",
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    return json.loads(Path(dst).read_text())


def test_shipped_report():
    text = requests_log(2024, 800)
    assert Path("/app/data/requests.jsonl").read_text() == text, "the input was modified"
    assert json.loads(Path("/app/reports/latency.json").read_text()) == expected(text)


def test_unseen_inputs(tmp_path):
    for seed, n in ((1, 50), (2, 3000), (3, 5)):
        src = tmp_path / f"r{seed}.jsonl"
        text = requests_log(seed, n)
        src.write_text(text)
        assert run(src, tmp_path / f"o{seed}.json") == expected(text), seed


def test_small_exact(tmp_path):
    src = tmp_path / "s.jsonl"
    rows = [{"path": "/a", "ms": v} for v in (5, 1, 4, 2, 3)] + [{"path": "/b", "ms": 7.5}]
    src.write_text("\n".join(json.dumps(r) for r in rows) + "\n{oops\n")
    assert run(src, tmp_path / "s.json") == {"/a": {"count": 5, "p50": 3, "p95": 5, "max": 5},
                                            "/b": {"count": 1, "p50": 7.5, "p95": 7.5, "max": 7.5}}
