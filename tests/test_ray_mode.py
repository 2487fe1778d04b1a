"""Ray mode on a local Ray instance (CPU): rollout workers and the trainer as actors, a rollout
worker killed in the middle of a step, the run finishing with a balanced audit, and the
replacement worker holding the current weights before its first request."""

from __future__ import annotations

import asyncio
from contextlib import closing

import pytest
import ray  # installed by `make setup` (the ray extra): a missing Ray fails here, it is not skipped

from practicum.audit import audit
from practicum.loop import Run, train_async
from practicum.store import Store

RAY = ("distributed.backend=ray", "distributed.rollout_workers=2", "distributed.health_interval=0.5",
       "distributed.health_timeout=20", "distributed.rollout.threads=1", "distributed.trainer.threads=1")


@pytest.fixture(scope="module")
def local_ray():
    ray.init(num_cpus=6, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()


def with_code_domain(tiny_run_config, name: str):
    """The tiny config plus a code domain (tasks/code): its answers are verified in sandboxes."""
    import json
    from pathlib import Path

    from practicum.config import load_config

    raw = json.loads(tiny_run_config.path.read_text())
    repo = Path(__file__).resolve().parents[1]
    raw["domains"].append({"name": "code", "env": "code", "eval_size": 1,
                           "source": {"kind": "tasks", "path": str(repo / "tasks/code"), "eval_fraction": 0.25}})
    path = tiny_run_config.path.with_name(f"{name}.yaml")
    path.write_text(json.dumps(raw))
    return path, load_config


@pytest.mark.slow
def test_a_killed_rollout_worker_is_replaced_and_nothing_is_lost(local_ray, tiny_run_config):
    """Two rollout workers, one sandbox worker, the trainer as an actor; the say domain and a code
    domain whose answers run in the sandbox worker's sessions."""
    path, load_config = with_code_domain(tiny_run_config, "ray_kill")
    cfg = load_config(path, [f"run.dir={path.parent / 'ray'}", *RAY, "distributed.sandbox_workers=1", "run.steps=5",
                             "rollout.max_new_tokens=24", "rollout.prompts_per_step=4", "async.max_staleness=1"])
    run = Run(cfg, overwrite=True, log=lambda _m: None)
    engine = run.engine.engine
    assert [w.version for w in engine.workers] == [0, 0]
    assert engine._args[-1] == cfg.model.hf_options()  # each worker's HFEngine is built with the config's sizes
    killed: list[str] = []

    async def killer() -> None:
        """Once the first update is published, kill a worker while it has requests in flight."""
        while not killed:
            await asyncio.sleep(0.005)
            busy = [w for w in engine.workers if w.inflight > 0]
            if run.trainer.version >= 1 and busy:
                ray.kill(busy[0].handle, no_restart=True)
                killed.append(busy[0].name)
        # hold new draws until the replacement is up (a tiny model's run could otherwise end
        # first); episodes already running go on, on the surviving worker
        async with run.orch.paused():
            while engine.replaced < 1 or len(engine._ready_workers()) < 2:
                await asyncio.sleep(0.05)

    async def go():
        task = asyncio.ensure_future(killer())
        try:
            return await train_async(cfg, run=run, log=lambda _m: None)  # closes the run, and so the workers
        finally:
            task.cancel()

    result = asyncio.run(go())
    assert killed and result.steps_done == 5 and engine.replaced >= 1, engine.errors
    assert not engine.errors
    health = engine.final_health  # the workers alive at the end, as they reported before being stopped
    assert len(health) == 2 and killed[0] not in health
    # the replacement (started last) was given the weights current when it came up: it held an
    # updated version (>= 1), never the initial weights, when its first request arrived
    replacement = max(health, key=lambda n: int(n.rsplit("-", 1)[1]))
    assert health[replacement]["first_request_version"] is not None
    assert health[replacement]["first_request_version"] >= 1
    assert all(h["version"] == run.trainer.version for h in health.values())
    with closing(Store(cfg.run.dir + "/store.sqlite")) as store:
        code = [e for g in store.groups(kind="train") if g.task.domain == "code" for e in g.episodes]
        assert code and all(e.score is not None for e in code if e.trainable)
        report = audit(store)
        assert report.ok, report.lines()
        assert report.retried_episodes >= 1  # the killed worker's requests, retried as new attempts
    # the code domain's solution and grader pools are the sandbox worker's (the tiny model writes no
    # code, so its answers score 0 without running: test_code_is_verified_in_a_sandbox_worker runs
    # real solutions through a worker)
    from practicum.distributed.sandbox import RemotePool

    (code_domain,) = [d for d in run.domains if d.name == "code"]
    assert isinstance(code_domain.sandbox, RemotePool) and isinstance(code_domain.verifier.graders, RemotePool)
    assert len(run.sandbox_workers.final_health) == 1


@pytest.mark.slow
def test_a_worker_added_to_a_running_job_gets_traffic_only_with_the_current_weights(local_ray, tiny_run_config):
    cfg = tiny_run_config("ray_add", *RAY, "distributed.rollout_workers=1", "run.steps=3")
    run = Run(cfg, overwrite=True, log=lambda _m: None)
    engine = run.engine.engine

    async def go():
        await train_async(cfg, run=run, log=lambda _m: None)
        version = engine.policy_version
        (new,) = await engine.add_workers(1)
        assert new.version == version >= 1  # loaded before it was marked ready
        health = await engine.check_health()
        assert health[new.name]["version"] == version and health[new.name]["first_request_version"] is None
        await run.aclose()

    asyncio.run(go())


@pytest.mark.slow
def test_code_is_verified_in_a_sandbox_worker(local_ray, tmp_path):
    """The code domain built with Ray mode's pool factory: solutions and hidden tests run in
    sessions held by the sandbox worker actor (another process), with the same verdicts as
    locally - the reference solution 1.0, a wrong one below 1, a hostile one contained."""
    from pathlib import Path

    from practicum.config import DomainSection
    from practicum.distributed import DistributedConfig
    from practicum.distributed.sandbox import RemoteSessions
    from practicum.domains import build_domain
    from practicum.domains.plugin import BuildContext

    repo = Path(__file__).resolve().parents[1]
    sessions = RemoteSessions(DistributedConfig(backend="ray", sandbox_workers=1))
    section = DomainSection.model_validate({"name": "code", "env": "code", "eval_size": 1,
                                            "source": {"kind": "tasks", "path": "tasks/code", "eval_fraction": 0.25}})
    domain = build_domain(section, 0, repo, ctx=BuildContext(seed=0, base_dir=repo, sessions=sessions))
    (task,) = [t for t in domain.source.eval_tasks() if t.id == "add_numbers"]
    solution = (repo / "tasks/code/add_numbers/solution.py").read_text()
    answers = {"right": f"```python\n{solution}\n```",
               "wrong": "```python\ndef add_numbers(numbers):\n    return 0\n```",
               "hostile": "```python\nimport os\ndef add_numbers(numbers):\n    os.system('kill -9 -1')\n"
                          "    return sum(numbers)\n```"}

    async def score(answer: str) -> float:
        env = domain.make_env()
        try:
            await env.reset(task)
            obs = await env.step(answer)
            return obs.score.value
        finally:
            await env.close()

    async def go():
        out = {k: await score(a) for k, a in answers.items()}
        health = await sessions.health()
        await domain.close() if hasattr(domain, "close") else None
        return out, health

    try:
        scores, health = asyncio.run(go())
    finally:
        sessions.close()
    assert scores["right"] == 1.0 and scores["wrong"] < 1.0
    assert 0.0 <= scores["hostile"] <= 1.0  # scored (contained), whatever it passed
    (h,) = health
    assert h["opened"] >= 6 and h["calls"] >= 6  # solution and grader sessions for each answer, in the worker
    import os

    assert h["pid"] != os.getpid()


def test_a_rollout_worker_builds_its_engine_with_the_sizes_it_is_given(tiny_model_path):
    """What a Ray actor runs, called in process: the hf options (``ModelSection.hf_options()``)
    reach its HFEngine."""
    import torch

    from practicum.distributed.rollout import RolloutWorker

    worker = RolloutWorker(str(tiny_model_path), "float32", "cpu", torch.get_num_threads(),
                           hf={"max_batch": 4, "prefix_cache_mb": 0, "kv_room": 3, "kv_row_room": 0})
    e = worker.engine
    assert (e.max_batch, e.prefix_cache_bytes, e.kv_room, e.kv_row_room) == (4, 0, 3, 0)
    asyncio.run(worker.close())
