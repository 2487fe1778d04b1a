"""Budgets: spend counted per domain by hand, and a run that stops cleanly at its budget."""

from __future__ import annotations

import asyncio
from contextlib import closing

import pytest

from practicum.audit import audit
from practicum.budget import BudgetConfig, Prices, Spend
from practicum.records import Episode, Group, GroupState, Message, Task, Turn


def _group(domain: str, prompts: list[int], completions: list[int], verify_s: float | None = None) -> Group:
    eps = []
    for p, c in zip(prompts, completions):
        e = Episode(task_id="t", domain=domain)
        e.turns = [Turn(prompt_ids=[1] * p, completion_ids=[2] * c, logprobs=[0.0] * c, text="", finish_reason="stop",
                        policy_version=0)]
        if verify_s is not None:
            e.info.extra["verify"] = {"seconds": verify_s}
        eps.append(e)
    return Group(task=Task(id="t", domain=domain, prompt=[Message(role="user", content="q")]), episodes=eps,
                 state=GroupState.ready)


def test_spend_by_hand():
    s = Spend()
    s.add([_group("a", [10, 10], [5, 7]), _group("b", [100], [1], verify_s=0.5)])
    assert s.domains["a"] == {"episodes": 2, "prompt_tokens": 20, "completion_tokens": 12, "sandbox_seconds": 0.0,
                              "sandbox_cpu_seconds": 0.0}
    assert s.domains["b"]["sandbox_seconds"] == 0.5
    prices = Prices(prompt_per_million=1.0, completion_per_million=4.0, sandbox_second=0.01)
    assert s.money(prices) == pytest.approx(120 / 1e6 + 13 * 4 / 1e6 + 0.005)
    assert s.reached(BudgetConfig(tokens=134)) is None  # 133 tokens spent
    assert s.reached(BudgetConfig(tokens=133)) == "budget reached: tokens 133 >= 133"
    assert s.reached(BudgetConfig(completion_tokens=13)).startswith("budget reached: completion tokens")
    again = Spend()
    again.load(s.state(prices))
    assert again.domains == s.domains


def test_a_run_stops_cleanly_at_its_token_budget(tiny_run_config):
    """A 20-step run with a budget of tokens that two steps exceed stops after the step that
    reached it, writes its checkpoint, records the spend, and the audit balances."""
    from practicum.loop import Run, train_async
    from practicum.store import Store

    probe = tiny_run_config("probe", "run.steps=1")
    run = Run(probe, overwrite=True, log=lambda _m: None)
    asyncio.run(train_async(probe, run=run, log=lambda _m: None))
    per_step = run.spend.total("prompt_tokens") + run.spend.total("completion_tokens")
    cfg = tiny_run_config("budget", "run.steps=20", f"budget.tokens={int(per_step * 1.5)}")
    lines: list[str] = []
    result = asyncio.run(train_async(cfg, log=lines.append))
    assert result.steps_done == 2
    assert any("budget reached: tokens" in line and "checkpoint written" in line for line in lines)
    with closing(Store(cfg.run.dir + "/store.sqlite")) as store:
        spend = [v for _s, _k, v in store.metrics(kind="spend")]
        assert len(spend) == 2 and spend[-1]["domains"]["say"]["episodes"] > 0
        assert audit(store).ok
    from pathlib import Path

    assert (Path(cfg.run.dir) / "checkpoints" / "step_000002" / "state.json").is_file()


def test_an_evaluation_stops_cleanly_at_its_budget(tiny_run_config, tmp_path):
    """`practicum eval --budget-tokens`: the held-out set is evaluated in chunks of 8 tasks until
    the budget is reached; the JSON says where it stopped and what was spent."""
    import json

    from typer.testing import CliRunner

    from practicum.cli import app

    raw = json.loads(tiny_run_config.path.read_text())
    raw["domains"] = [{"name": "arith", "env": "math", "eval_size": 20,
                       "source": {"kind": "reasoning_gym", "dataset": "chain_sum"}}]
    path = tmp_path / "arith.yaml"
    path.write_text(json.dumps(raw))
    out = lambda r: json.loads(r.stdout.strip().splitlines()[-1])  # noqa: E731
    full = out(CliRunner().invoke(app, ["eval", str(path), "--no-cache", "--json"]))
    assert full["stopped"] is None and full["spend"] is None and len(full["per_task"]) == 20
    part = out(CliRunner().invoke(app, ["eval", str(path), "--no-cache", "--json", "--budget-tokens", "10"]))
    assert part["stopped"].startswith("budget reached: tokens")
    assert len(part["per_task"]) == 8  # one chunk, then the budget was found reached
    assert part["spend"]["domains"]["arith"]["episodes"] == 8
