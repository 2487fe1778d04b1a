"""Hidden checks: run the agent's backup.sh on awkward trees and inspect what it produced."""

import os
import subprocess
import tarfile
from pathlib import Path

SCRIPT = "/app/bin/backup.sh"
FILES = {
    "a.txt": "a",
    "with space/b c.txt": "bc",
    "with space/deeper/'quoted' \"name\".md": "q",
    "-dash/-x.txt": "dash",
    "skip.tmp": "no",
    "with space/also.tmp": "no",
    "keep.tmp.txt": "yes",
    "ünïcode/ß.txt": "u",
}


def tree(root):
    for rel, content in FILES.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(content)
    (root / "empty dir").mkdir()
    return root


def expected_members():
    return sorted((k for k in FILES if not k.endswith(".tmp")), key=lambda s: s.encode())


def run(args, cwd):
    return subprocess.run(["bash", SCRIPT, *args], cwd=cwd, capture_output=True, text=True, timeout=60)


def check_outputs(dest, name):
    with tarfile.open(dest / f"{name}.tar.gz") as tar:
        members = {m.name.removeprefix("./"): m for m in tar.getmembers() if m.isfile()}
        assert sorted(members, key=lambda s: s.encode()) == expected_members()
        for rel in members:
            assert tar.extractfile(members[rel]).read().decode() == FILES[rel]
    manifest = (dest / f"{name}.manifest").read_text().splitlines()
    assert manifest == expected_members()


def test_absolute_paths(tmp_path):
    src = tree(tmp_path / "My Stuff")
    r = run([str(src), str(tmp_path / "out dir" / "nested")], cwd="/tmp")
    assert r.returncode == 0, r.stderr
    check_outputs(tmp_path / "out dir" / "nested", "My Stuff")


def test_relative_paths(tmp_path):
    tree(tmp_path / "work" / "src tree")
    r = run(["src tree", "../backups"], cwd=tmp_path / "work")
    assert r.returncode == 0, r.stderr
    check_outputs(tmp_path / "backups", "src tree")


def test_trailing_slash(tmp_path):
    src = tree(tmp_path / "data")
    r = run([str(src) + "/", str(tmp_path / "b")], cwd="/tmp")
    assert r.returncode == 0, r.stderr
    check_outputs(tmp_path / "b", "data")


def test_usage_errors(tmp_path):
    for args in ([], ["only-one"], ["a", "b", "c"], [str(tmp_path / "missing"), str(tmp_path / "never")]):
        r = run(args, cwd=tmp_path)
        assert r.returncode == 2, (args, r.returncode)
        assert r.stderr.strip(), args
    assert not (tmp_path / "never").exists()
    f = tmp_path / "file.txt"
    f.write_text("x")
    assert run([str(f), str(tmp_path / "never2")], cwd=tmp_path).returncode == 2
    assert not (tmp_path / "never2").exists()


def test_tar_failure_is_reported(tmp_path):
    src = tree(tmp_path / "s")
    dest = tmp_path / "ro"
    dest.mkdir()
    (dest / "s.tar.gz").mkdir()  # tar cannot write its archive where a folder is
    r = run([str(src), str(dest)], cwd="/tmp")
    assert r.returncode != 0


def test_sample_still_there():
    assert Path("/app/sample/My Documents/old drafts/draft 1.md").read_text() == "draft 1\n"
    assert os.access(SCRIPT, os.X_OK)
