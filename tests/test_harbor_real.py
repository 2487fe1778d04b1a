"""Real Harbor tasks, written elsewhere, run unchanged: every task in ../shared/harbor_real/
builds its image, its reference solution scores 1 and an untouched workspace scores 0.

These tasks bootstrap their verifier from the internet (apt-get, the uv installer, uvx) and
prepare state with Dockerfile COPY and RUN lines; they pass only through Practicum's container
mode and its offline verifier toolchain. The first run builds each image (RUN lines reach the
package registries); later runs use the cache. Without ../shared the tests skip, except under
``CI=true``, where they fail.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
HARBOR_REAL = Path(os.environ.get("PRACTICUM_SHARED", REPO.parent / "shared")) / "harbor_real"
TASKS = sorted(p.name for p in HARBOR_REAL.iterdir() if (p / "task.toml").exists()) if HARBOR_REAL.is_dir() else []


def _require_shared() -> None:
    if not HARBOR_REAL.is_dir():
        if os.environ.get("CI") == "true":
            pytest.fail(f"{HARBOR_REAL} is missing: CI must run the real Harbor tasks")
        pytest.skip(f"{HARBOR_REAL} not present")


def test_the_twelve_tasks_are_there():
    _require_shared()
    assert len(TASKS) >= 12, TASKS


@pytest.mark.slow
def test_tasks_check_cli_on_the_whole_folder():
    """`practicum tasks check --run-solutions --json` over the folder, as a user runs it: one
    record per task, each task's reference solution scores 1 and its untouched workspace 0
    (the first run builds every image; later runs use the cache), exit 0."""
    _require_shared()
    r = subprocess.run([sys.executable, "-m", "practicum.cli", "tasks", "check", str(HARBOR_REAL), "--run-solutions",
                        "--json"], capture_output=True, text=True, timeout=1500)
    records = [json.loads(line) for line in r.stdout.splitlines() if line.startswith("{")]
    assert {rec["task"] for rec in records} == set(TASKS), r.stdout + r.stderr
    for rec in records:
        assert rec["reference"] == 1.0 and rec["untouched"] == 0.0, rec  # the record's reason says why not
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
