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


@pytest.mark.slow
def test_a_killed_rollout_worker_is_replaced_and_nothing_is_lost(local_ray, tiny_run_config):
    cfg = tiny_run_config("ray", *RAY, "run.steps=5", "rollout.max_new_tokens=24", "rollout.prompts_per_step=4",
                          "async.max_staleness=1")
    run = Run(cfg, overwrite=True, log=lambda _m: None)
    engine = run.engine.engine
    assert [w.version for w in engine.workers] == [0, 0]
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
        report = audit(store)
        assert report.ok, report.lines()
        assert report.retried_episodes >= 1  # the killed worker's requests, retried as new attempts


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
