"""Hidden checks: the agent's Makefile, run on the verifier's own copy of the project."""

import shutil
import subprocess
import tarfile

import pytest


@pytest.fixture
def project(tmp_path):
    p = tmp_path / "proj"
    shutil.copytree("/tests/project", p)
    shutil.copy("/app/Makefile", p / "Makefile")
    for cache in ("src/greetlib/__pycache__", "tests/__pycache__"):  # stale bytecode, as a developer would have
        (p / cache).mkdir()
        (p / cache / "core.cpython-311.pyc").write_bytes(b"\x00stale")
    return p


def make(p, *args):
    return subprocess.run(["make", *args], cwd=p, capture_output=True, text=True, timeout=120)


def test_test_target(project):
    r = make(project, "test")
    assert r.returncode == 0, r.stdout + r.stderr
    (project / "tests" / "test_broken.py").write_text(
        "import unittest\n\nclass B(unittest.TestCase):\n    def test_x(self):\n        self.assertEqual(1, 2)\n")
    assert make(project, "test").returncode != 0


def test_dist_reads_version_and_contents(project):
    (project / "VERSION").write_text("9.8.7\n")
    r = make(project, "dist")
    assert r.returncode == 0, r.stdout + r.stderr
    archive = project / "dist" / "greetlib-9.8.7.tar.gz"
    with tarfile.open(archive) as tar:
        files = sorted(m.name.removeprefix("./") for m in tar.getmembers() if m.isfile())
        assert files == ["greetlib-9.8.7/README.md", "greetlib-9.8.7/VERSION",
                         "greetlib-9.8.7/src/greetlib/__init__.py", "greetlib-9.8.7/src/greetlib/__main__.py",
                         "greetlib-9.8.7/src/greetlib/core.py"]
        assert tar.extractfile("greetlib-9.8.7/VERSION").read() == b"9.8.7\n"
        assert tar.extractfile("greetlib-9.8.7/src/greetlib/core.py").read() == \
            (project / "src/greetlib/core.py").read_bytes()


def test_dist_refuses_when_tests_fail(project):
    (project / "tests" / "test_broken.py").write_text(
        "import unittest\n\nclass B(unittest.TestCase):\n    def test_x(self):\n        self.fail('no')\n")
    assert make(project, "dist").returncode != 0
    assert not list(project.glob("dist/*.tar.gz"))


def test_clean(project):
    assert make(project, "dist").returncode == 0
    r = make(project, "clean")
    assert r.returncode == 0
    assert not (project / "dist").exists()
    assert not list(project.rglob("__pycache__"))
    assert (project / "src/greetlib/core.py").exists() and (project / "tests/test_core.py").exists()


def test_run_and_phony(project):
    r = make(project, "run", "NAME=Zoe")
    assert r.stdout.strip().splitlines()[-1] == "Have a nice day, Zoe!"
    for name in ("test", "dist", "clean"):
        (project / name).write_text("a file named like the target")
    r = make(project, "test")
    assert r.returncode == 0 and "Ran 2 tests" in r.stdout + r.stderr, r.stdout + r.stderr
    assert "up to date" not in make(project, "clean").stdout
    assert (project / "test").exists()
