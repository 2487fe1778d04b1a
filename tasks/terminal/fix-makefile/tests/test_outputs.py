"""Hidden checks: the agent's Makefile builds, rebuilds incrementally and cleans, in a fresh copy."""

import hashlib
import os
import shutil
import subprocess
import time
from pathlib import Path

import pytest

SOURCES = {  # the C sources must be the ones shipped
    "src/main.c": "ada22930b4438a600b91af04002f0ef57183ea8bee4986a882b8a765e3776697",
    "src/vec.c": "b6b82648778cbf036b9a0e046eaf9096f104b4b80e354f46fe1825728625b131",
    "src/vec.h": "979d1119a23c3845bbb44ff313cbd84c3b8c74fe32617c6b9fb1c4edbf13752a",
}


@pytest.fixture
def project(tmp_path):
    dst = tmp_path / "p"
    dst.mkdir()
    shutil.copy("/app/Makefile", dst / "Makefile")
    for rel in SOURCES:
        (dst / rel).parent.mkdir(exist_ok=True)
        shutil.copy(Path("/app") / rel, dst / rel)
    return dst


def make(cwd, *args):
    return subprocess.run(["make", *args], cwd=cwd, capture_output=True, text=True, timeout=120)


def test_sources_unchanged():
    for rel, digest in SOURCES.items():
        assert hashlib.sha256((Path("/app") / rel).read_bytes()).hexdigest() == digest, rel


def test_builds_and_runs(project):
    r = make(project)
    assert r.returncode == 0, r.stdout + r.stderr
    out = subprocess.run([str(project / "bin/geom"), "3", "4"], capture_output=True, text=True, timeout=10)
    assert out.stdout.strip() == "dist=5.000 sum=7.000"
    out = subprocess.run([str(project / "bin/geom"), "-1.5", "2"], capture_output=True, text=True, timeout=10)
    assert out.stdout.strip() == "dist=2.500 sum=0.500"


def test_incremental(project):
    assert make(project).returncode == 0
    objs = sorted(project.glob("src/*.o"))
    assert [o.name for o in objs] == ["main.o", "vec.o"]
    stamp = {o: o.stat().st_mtime_ns for o in objs}
    r = make(project)
    assert r.returncode == 0 and " -c " not in r.stdout, r.stdout
    assert {o: o.stat().st_mtime_ns for o in objs} == stamp
    time.sleep(0.01)
    future = time.time() + 5
    os.utime(project / "src/vec.h", (future, future))
    r = make(project)
    assert r.returncode == 0
    assert "main.c" in r.stdout and "vec.c" in r.stdout, r.stdout


def test_clean(project):
    assert make(project).returncode == 0
    r = make(project, "clean")
    assert r.returncode == 0
    assert not (project / "bin").exists()
    assert list(project.rglob("*.o")) == []
