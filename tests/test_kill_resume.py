"""kill -9 at random moments, resume each time: nothing is lost, nothing is trained twice.

A real training subprocess (``practicum train``, the tiny model, the asynchronous orchestrator
with max_staleness 1) is killed with SIGKILL at a random moment 20 times in a row and resumed
with ``--resume`` each time; then it runs to the end and ``practicum runs audit`` must balance:
every drawn group trained exactly once, or dropped with a reason, or failed - and the number
trained is exactly steps x groups per step.
"""

from __future__ import annotations

import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time

import pytest

from practicum.audit import audit
from practicum.store import Store

KILLS = 20
STEPS, P = 1500, 3  # long enough that kills land while it trains (the tiny model does ~50 steps/s)


def _command(cfg_path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "practicum.cli", "train", str(cfg_path), *extra]


def _trained(store_path) -> int:
    """Groups recorded as trained so far, read without taking part in the run's writes."""
    if not store_path.exists():
        return 0
    try:
        db = sqlite3.connect(f"file:{store_path}?mode=ro", uri=True, timeout=5)
        try:
            return db.execute("SELECT COUNT(*) FROM events WHERE entity = 'group' AND state = 'trained'").fetchone()[0]
        finally:
            db.close()
    except sqlite3.OperationalError:  # the run has not created its tables yet
        return 0


def _wait_for_training(proc, store_path, before: int, timeout: float = 180.0) -> None:
    """Block until the run has trained a group past ``before`` (or ended, or the timeout passed)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and proc.poll() is None and _trained(store_path) <= before:
        time.sleep(0.05)


@pytest.mark.slow
def test_twenty_sigkills_lose_nothing(tiny_run_config, tmp_path):
    cfg = tiny_run_config.path.with_name("killed.yaml")  # the tiny model on its own small domain
    raw = json.loads(tiny_run_config.path.read_text())
    raw["run"].update({"dir": str(tmp_path / "killed"), "steps": STEPS, "checkpoint_every": 20})
    raw["rollout"].update({"group_size": 4, "prompts_per_step": P})
    raw["async"] = {"max_staleness": 1}
    cfg.write_text(json.dumps(raw))
    store_path = tmp_path / "killed" / "store.sqlite"
    rng = random.Random(1234)
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    kills_mid_work = trained_before = 0
    for i in range(KILLS):
        args = _command(cfg, "--resume") if store_path.exists() else _command(cfg, "--overwrite")
        proc = subprocess.Popen(args, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
        if i % 2:  # odd kills land at a random moment of start-up or early work
            time.sleep(rng.uniform(0.5, 6.0))
        else:  # even kills land while it trains: after its next update, at a random moment
            _wait_for_training(proc, store_path, _trained(store_path))
            time.sleep(rng.uniform(0.0, 1.5))
        if proc.poll() is not None:  # it finished or failed before the kill
            err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
            assert proc.returncode == 0, f"run {i} failed on its own: {err[-2000:]}"
            break
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        trained = _trained(store_path)
        kills_mid_work += trained > trained_before
        trained_before = trained
    else:
        i = KILLS
    assert i == KILLS, f"the run ended after only {i} kills: make it longer"
    assert kills_mid_work >= KILLS // 2  # at least the even kills hit a run that had been training
    done = subprocess.run(_command(cfg, "--resume"), capture_output=True, text=True, timeout=900, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    store = Store(store_path)
    try:
        rep = audit(store)
    finally:
        store.close()
    assert rep.ok, rep.lines()
    assert rep.groups["trained"] == STEPS * P
    assert rep.missing_draws == [] and rep.trained_twice == [] and rep.in_flight == []
    assert rep.reverted_groups > 0 and rep.requeued_groups > 0  # updates were lost and redone, rollouts re-queued
    cli = subprocess.run([sys.executable, "-m", "practicum.cli", "runs", "audit", str(tmp_path / "killed")],
                         capture_output=True, text=True, timeout=120)
    assert cli.returncode == 0 and "audit: OK" in cli.stdout, cli.stdout + cli.stderr
