"""Hidden checks: the department summary, recomputed here, on the shipped and unseen files."""

import csv
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest
from genstaff import staff_csv


def expected(text):
    depts = {}
    for row in csv.DictReader(io.StringIO(text)):
        depts.setdefault(row["department"], []).append(row)
    return {d: {"count": len(rows),
                "average_salary": round(sum(float(r["salary"]) for r in rows) / len(rows), 2),
                "earliest_start": min(r["start_date"] for r in rows),
                "employees": sorted(r["name"] for r in rows)} for d, rows in depts.items()}


def check(path, want):
    raw = Path(path).read_bytes().decode("utf-8")
    got = json.loads(raw)
    assert set(got) == set(want)
    for d in want:
        assert got[d]["count"] == want[d]["count"]
        assert got[d]["average_salary"] == pytest.approx(want[d]["average_salary"], abs=0.005)
        assert got[d]["earliest_start"] == want[d]["earliest_start"]
        assert got[d]["employees"] == want[d]["employees"]
    if not json.dumps(want, ensure_ascii=False).isascii():
        assert "\\u" not in raw, "non-ASCII characters must not be escaped"


def test_shipped_file():
    text = staff_csv(9, 40)
    assert Path("/app/data/staff.csv").read_text(encoding="utf-8") == text, "the input was modified"
    check("/app/out/departments.json", expected(text))


def test_unseen_files(tmp_path):
    for seed, n in ((1, 200), (2, 3), (3, 57)):
        src, dst = tmp_path / f"s{seed}.csv", tmp_path / f"d{seed}.json"
        text = staff_csv(seed, n)
        src.write_text(text, encoding="utf-8")
        r = subprocess.run([sys.executable, "/app/convert.py", str(src), str(dst)], cwd="/tmp",
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        check(dst, expected(text))


def test_quoted_names(tmp_path):
    src, dst = tmp_path / "q.csv", tmp_path / "q.json"
    src.write_text('id,name,department,salary,start_date\n1,"Doe, Jane",Ops,100,2020-01-02\n'
                   '2,"Roe ""RJ"" Rick",Ops, 50.5 ,2019-12-31\n', encoding="utf-8")
    r = subprocess.run([sys.executable, "/app/convert.py", str(src), str(dst)], cwd="/tmp", capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert json.loads(dst.read_text()) == {"Ops": {"count": 2, "average_salary": 75.25, "earliest_start": "2019-12-31",
                                                   "employees": ["Doe, Jane", 'Roe "RJ" Rick']}}
