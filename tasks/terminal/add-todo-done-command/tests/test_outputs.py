"""Hidden checks of the todo CLI, run as a user would run it."""

import json
import subprocess
import sys


def todo(db, *args):
    return subprocess.run([sys.executable, "-m", "todo", "--db", str(db), *args], cwd="/app", capture_output=True,
                          text=True, timeout=30)


def seeded(tmp_path):
    db = tmp_path / "list.json"
    for text in ("buy milk", "call Bob", "write report"):
        assert todo(db, "add", *text.split()).returncode == 0
    return db


def test_done_marks_and_prints(tmp_path):
    db = seeded(tmp_path)
    out = todo(db, "done", "2")
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "Completed 2: call Bob"
    items = json.loads(db.read_text())["items"]
    assert [i["done"] for i in items] == [False, True, False]


def test_list_shows_done(tmp_path):
    db = seeded(tmp_path)
    todo(db, "done", "1")
    out = todo(db, "list")
    assert out.returncode == 0
    assert out.stdout.splitlines() == ["[x] 1 buy milk", "[ ] 2 call Bob", "[ ] 3 write report"]


def test_list_pending(tmp_path):
    db = seeded(tmp_path)
    todo(db, "done", "1")
    todo(db, "done", "3")
    assert todo(db, "list", "--pending").stdout.splitlines() == ["[ ] 2 call Bob"]


def test_unknown_id(tmp_path):
    db = seeded(tmp_path)
    before = db.read_text()
    out = todo(db, "done", "7")
    assert out.returncode == 1
    assert out.stderr.strip() == "No item 7"
    assert out.stdout == ""
    assert db.read_text() == before


def test_done_twice(tmp_path):
    db = seeded(tmp_path)
    todo(db, "done", "3")
    out = todo(db, "done", "3")
    assert out.returncode == 0
    assert out.stdout.strip() == "Completed 3: write report"


def test_add_and_list_unchanged(tmp_path):
    db = tmp_path / "n.json"
    assert todo(db, "add", "one", "two").stdout.strip() == "Added 1: one two"
    assert todo(db, "list").stdout.splitlines() == ["[ ] 1 one two"]
    assert json.loads(db.read_text()) == {"items": [{"id": 1, "text": "one two", "done": False}]}
