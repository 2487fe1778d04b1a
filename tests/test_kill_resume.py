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
        time.sleep(rng.uniform(3.0, 10.0))  # start-up (imports, model) takes a few seconds
        if proc.poll() is not None:  # it finished or failed before the kill
            err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
            assert proc.returncode == 0, f"run {i} failed on its own: {err[-2000:]}"
            break
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        if store_path.exists():
            s = Store(store_path)
            trained = s.db.execute("SELECT COUNT(*) FROM events WHERE entity = 'group' AND state = 'trained'").fetchone()[0]
            kills_mid_work += trained > trained_before
            trained_before = trained
            s.close()
    else:
        i = KILLS
    assert i == KILLS, f"the run ended after only {i} kills: make it longer"
    assert kills_mid_work >= KILLS // 2  # most kills hit a run that had been training
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
