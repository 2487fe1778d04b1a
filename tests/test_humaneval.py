"""HumanEval through the verifier: all 164 canonical solutions (prompt + canonical_solution)
score 1 with no flag, and all 164 bare prompts score 0 — in real sandboxes, concurrently."""

from __future__ import annotations

import asyncio

import pytest

from practicum.domains.code.tasks import humaneval_tasks
from practicum.verify import CodeVerifier, VerifyConfig


@pytest.fixture(scope="module")
def verdicts():
    from practicum.sandbox import SandboxPool, get_sandbox

    tasks = humaneval_tasks()
    config = VerifyConfig()

    async def run():
        async with SandboxPool(get_sandbox("auto"), size=4, limits=config.limits) as pool:
            verifier = CodeVerifier(pool, config)
            slots = asyncio.Semaphore(4)

            async def one(task, answer):
                async with slots:
                    return await verifier.verify(task.hidden(), answer)

            canonical = [one(t, t.correct_solution) for t in tasks]
            bare = [one(t, t.prompt) for t in tasks]
            results = await asyncio.gather(*canonical, *bare)
        return tasks, results[:164], results[164:]

    return asyncio.run(run())


def test_every_canonical_solution_scores_one_without_flags(verdicts):
    tasks, canonical, _ = verdicts
    assert len(tasks) == 164
    wrong = {t.id: v.score.explanation for t, v in zip(tasks, canonical) if v.score.value != 1.0 or v.flags}
    assert not wrong
    assert all(v.cases and all(c.outcome in ("passed", "trivial") for c in v.cases) for v in canonical)


def test_every_bare_prompt_scores_zero(verdicts):
    tasks, _, bare = verdicts
    wrong = {t.id: v.score.explanation for t, v in zip(tasks, bare) if v.score.value != 0.0}
    assert not wrong
    assert all("does not implement" in v.score.explanation for v in bare)


def test_bare_prompts_run_through_the_harness_fail_the_tests():
    """Without the stub short-cut (the prompt plus a body that returns None), the hidden tests
    themselves fail every HumanEval problem under all-or-nothing scoring."""
    from practicum.sandbox import SandboxPool, get_sandbox

    tasks = humaneval_tasks()
    config = VerifyConfig(scoring="all")

    async def run():
        async with SandboxPool(get_sandbox("auto"), size=4, limits=config.limits) as pool:
            verifier = CodeVerifier(pool, config)
            slots = asyncio.Semaphore(4)

            async def one(task):
                async with slots:
                    return await verifier.verify(task.hidden(), task.prompt + "    return None\n")

            return await asyncio.gather(*(one(t) for t in tasks))

    results = asyncio.run(run())
    passed = [t.id for t, v in zip(tasks, results) if v.score.value != 0.0]
    assert not passed
