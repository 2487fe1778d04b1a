"""Hidden checks: exactly the expected files and folders remain, with their contents."""

import os
from pathlib import Path

ROOT = Path("/app/workspace")
FILES = {  # what must remain, with contents (the setup is deterministic)
    "a/report.txt": "quarterly report",
    "b/c/data.csv": "x,y",
    "b/c/archive.tmp.gz": "not a .tmp name",
    "keep/x.tmp": "kept temp",
    "keep/y~": "kept backup",
    "notes.tmpl": "a template, not a temp file",
    "tmp.txt": "not temp either",
    "mixed/keep.me": "stay",
    "-odd dir/real.txt": "dash real",
}
DIRS = {"a", "b", "b/c", "keep", "keep/empty", "mixed", "-odd dir"}


def test_remaining_tree():
    files, dirs = set(), set()
    for dirpath, dirnames, filenames in os.walk(ROOT):
        rel = Path(dirpath).relative_to(ROOT)
        dirs |= {(rel / d).as_posix() for d in dirnames}
        files |= {(rel / f).as_posix() for f in filenames}
    assert files == set(FILES)
    assert dirs == DIRS


def test_contents_unchanged():
    for rel, content in FILES.items():
        assert (ROOT / rel).read_text() == content + "\n", rel
