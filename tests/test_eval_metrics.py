"""Evaluation statistics against values computed by hand."""

from __future__ import annotations

import math

import pytest

from practicum.eval_metrics import (
    clustered_mean,
    paired,
    pass_at_k,
    pass_hat_k,
    process_metrics,
    same_reply,
    same_reply_warning,
    t_quantile,
)
from practicum.records import Episode, EpisodeError, EpisodeInfo, EpisodeState, Message, Score, Turn


def test_pass_at_k_by_hand():
    # n=5 samples, c=2 right: pass@1 = 2/5; pass@2 = 1 - C(3,2)/C(5,2) = 1 - 3/10 = 0.7
    assert pass_at_k(5, 2, 1) == pytest.approx(0.4)
    assert pass_at_k(5, 2, 2) == pytest.approx(0.7)
    assert pass_at_k(5, 2, 4) == 1.0  # n - c = 3 < k: some sample must be right
    assert pass_at_k(5, 0, 3) == 0.0
    with pytest.raises(ValueError):
        pass_at_k(3, 4, 1)


def test_pass_hat_k_by_hand():
    # all k right: C(c,k)/C(n,k); n=5, c=3: pass^1 = 0.6, pass^2 = 3/10, pass^3 = 1/10, pass^4 = 0
    assert pass_hat_k(5, 3, 1) == pytest.approx(0.6)
    assert pass_hat_k(5, 3, 2) == pytest.approx(0.3)
    assert pass_hat_k(5, 3, 3) == pytest.approx(0.1)
    assert pass_hat_k(5, 3, 4) == 0.0


def test_t_quantile_matches_tables():
    assert t_quantile(0.975, 1) == pytest.approx(12.706, abs=1e-3)
    assert t_quantile(0.975, 9) == pytest.approx(2.262, abs=1e-3)
    assert t_quantile(0.8, 9) == pytest.approx(0.883, abs=1e-3)


def test_clustered_mean_by_hand():
    """Two tasks of two samples: a (1, 1), b (0, 0). Mean 0.5; residual sums per task +1 and -1;
    CR1 se = sqrt(2/1 * (1 + 1)) / 4 = 0.5; t(0.975, 1) = 12.706 -> [-5.85, 6.85]. The same four
    scores treated as independent would have se 0.289: clustering widens it."""
    ci = clustered_mean([("a", 1.0), ("a", 1.0), ("b", 0.0), ("b", 0.0)])
    assert (ci.mean, ci.n, ci.clusters) == (0.5, 4, 2)
    assert ci.se == pytest.approx(0.5)
    assert ci.lo == pytest.approx(0.5 - 12.7062 * 0.5, abs=1e-3)
    # one sample per task: the ordinary standard error of the mean, sd/sqrt(n)
    xs = [0.0, 1.0, 1.0, 0.0, 1.0]
    one = clustered_mean([(str(i), x) for i, x in enumerate(xs)])
    sd = math.sqrt(sum((x - 0.6) ** 2 for x in xs) / 4)
    assert one.se == pytest.approx(sd / math.sqrt(5))


def test_paired_by_hand():
    """Differences B - A over 4 tasks: +1, 0, +1, 0 -> mean 0.5, sd 0.5774, se 0.2887, t = 1.732
    with 3 df: two-sided p = 0.1817; CI 0.5 +- 3.182 x 0.2887; MDE (3.182 + 0.978) x 0.2887 = 1.201."""
    a = {"t1": 0.0, "t2": 1.0, "t3": 0.0, "t4": 0.5, "only_a": 1.0}
    b = {"t1": 1.0, "t2": 1.0, "t3": 1.0, "t4": 0.5, "only_b": 0.0}
    r = paired(a, b)
    assert r.n == 4 and r.mean == pytest.approx(0.5) and r.sd == pytest.approx(0.57735, abs=1e-4)
    assert r.p == pytest.approx(0.1817, abs=2e-3)
    assert r.lo == pytest.approx(0.5 - 3.1824 * 0.28868, abs=1e-3)
    assert r.mde == pytest.approx((3.1824 + 0.9785) * 0.28868, abs=2e-3)
    assert (r.wins, r.losses) == (2, 0)


def _ep(score: float, turns: int = 1, tool_errors: int = 0, tool_calls: int = 0, trouble_text: str | None = None,
        infra: bool = False, end: str = "done") -> Episode:
    msgs = [Message(role="user", content="task")]
    if trouble_text:
        msgs.append(Message(role="tool", content=trouble_text))
    e = Episode(task_id="t", domain="d", messages=msgs, state=EpisodeState.done if not infra else EpisodeState.failed,
                score=Score(value=score), info=EpisodeInfo(end_reason=end, tool_calls={"run": tool_calls} if tool_calls else {},
                                                           tool_errors={"malformed": tool_errors} if tool_errors else {}))
    e.turns = [Turn(prompt_ids=[1], completion_ids=[2, 3], logprobs=[0.0, 0.0], text="x", finish_reason="stop",
                    policy_version=0) for _ in range(0 if infra else turns)]
    if infra:
        e.errors.append(EpisodeError(kind="environment", message="sandbox died"))
    return e


def test_process_metrics_by_hand():
    eps = [_ep(1.0, turns=2),  # clean success in 2 turns
           _ep(1.0, turns=4, tool_errors=1, tool_calls=3),  # a tool error, then success: recovered
           _ep(0.0, turns=3, trouble_text="AssertionError: expected 3"),  # a failing test, no recovery
           _ep(0.0, turns=5, end="turn_limit"),  # ran out of turns
           _ep(0.0, infra=True)]  # errored: kept apart from failures
    m = process_metrics(eps)
    assert (m.episodes, m.errored, m.failed, m.timed_out) == (5, 1, 2, 1)
    assert m.success_rate == pytest.approx(2 / 4)
    assert m.turns_to_success == pytest.approx(3.0)
    assert (m.met_trouble, m.recovered) == (2, 1) and m.recovery_rate == pytest.approx(0.5)
    assert m.tool_calls == 4 and m.tool_call_validity == pytest.approx(0.75)
    assert m.tokens == 2 * (2 + 4 + 3 + 5)
    assert m.prompt_tokens == 2 + 4 + 3 + 5 and m.sandbox_cpu_s == 0.0 and m.cost is None


def test_same_reply_counts_the_distinct_tasks_given_one_reply():
    def said(task: str, text: str) -> Episode:
        e = _ep(0.0)
        e.task_id, e.turns[-1].text = task, text
        return e

    # 5 tasks: "<answer>1</answer>" to t1, t2, t3 (t3 twice: counted once) and t4 (one of its
    # two samples); t5 something else -> 4 of 5 tasks
    eps = [said("t1", "<answer>1</answer>"), said("t2", " <answer>1</answer>\n"), said("t3", "<answer>1</answer>"),
           said("t3", "<answer>1</answer>"), said("t4", "<answer>1</answer>"), said("t4", "<answer>2</answer>"),
           said("t5", "<answer>6</answer>")]
    assert same_reply(eps) == ("<answer>1</answer>", 0.8)
    m = process_metrics(eps)
    assert m.same_reply == 0.8 and m.same_reply_text == "<answer>1</answer>"
    assert same_reply([said("t1", "a"), said("t2", "b")]) == ("b", 0.5)  # a tie: one of them, at 1 of 2
    assert same_reply([said("t1", "a"), said("t1", "a")]) == (None, None)  # one task says nothing of a collapse
    assert process_metrics([]).same_reply is None
    assert same_reply_warning("gcd", 200, 1.0, "<answer>1</answer>") == (
        "gcd: the same reply to 100% of 200 tasks ('<answer>1</answer>'): its score is what that one answer happens to fit")
    assert same_reply_warning("gcd", 200, 0.49, "x") is None  # under half the tasks
    assert same_reply_warning("gcd", 9, 1.0, "x") is None  # too few tasks to call it a collapse


def test_the_cost_counts_tokens_and_sandbox_cpu_at_the_configured_prices():
    from practicum.budget import Prices

    eps = [_ep(1.0, turns=2), _ep(0.0, turns=1)]
    eps[0].info.sandbox_cpu_s, eps[1].info.sandbox_cpu_s = 1.5, 0.25
    eps[1].info.extra["verify"] = {"seconds": 2.0}  # the code verifier's wall seconds, priced apart
    prices = Prices(prompt_per_million=1e6, completion_per_million=2e6, sandbox_cpu_second=0.1, sandbox_second=0.01)
    m = process_metrics(eps, prices=prices)
    # prompt 3 tokens x 1 + completion 6 tokens x 2 + 1.75 cpu-s x 0.1 + 2 verifier s x 0.01
    assert m.prompt_tokens == 3 and m.tokens == 6 and m.sandbox_cpu_s == pytest.approx(1.75)
    assert m.cost == pytest.approx(3 + 12 + 0.175 + 0.02)


def _eval_json(path, rewards: dict[str, float], seconds: float, domain: str = "arith") -> None:
    import json

    path.write_text(json.dumps({"model": path.stem, "seconds": seconds, "per_domain": {},
                                "per_task": [{"task": t, "domain": domain, "reward": r, "components": {}, "turns": 1,
                                              "tool_calls": 0, "tool_errors": 0, "end": "done", "errors": []}
                                             for t, r in rewards.items()]}))


def test_compare_gates_a_tier_by_its_interval_and_reports_the_speedup(tmp_path):
    """B equal to A on 40 tasks but 2x faster: the gate passes; B losing 10 of 40 tasks: the gate
    fails (exit 1); a file that is not an evaluation: exit 2."""
    import json

    from typer.testing import CliRunner

    from practicum.cli import app

    full = {f"t{i}": float(i % 2) for i in range(40)}
    _eval_json(tmp_path / "full.json", full, 20.0)
    _eval_json(tmp_path / "same.json", full, 10.0)
    worse = {t: (0.0 if i < 10 else r) for i, (t, r) in enumerate(full.items())}
    _eval_json(tmp_path / "worse.json", worse, 10.0)
    run = CliRunner().invoke(app, ["compare", str(tmp_path / "full.json"), str(tmp_path / "same.json"), "--json"])
    assert run.exit_code == 0, run.output
    out = json.loads(run.output)
    assert out["pass"] and out["speedup"] == 2.0 and out["domains"]["arith"]["diff"] == 0.0
    run = CliRunner().invoke(app, ["compare", str(tmp_path / "full.json"), str(tmp_path / "worse.json"), "--json"])
    assert run.exit_code == 1
    d = json.loads(run.output)["domains"]["arith"]
    assert d["diff"] == pytest.approx(-5 / 40) and d["losses"] == 5 and not d["within_tolerance"]
    (tmp_path / "bad.json").write_text("{}")
    run = CliRunner().invoke(app, ["compare", str(tmp_path / "full.json"), str(tmp_path / "bad.json")])
    assert run.exit_code == 2 and "not an evaluation" in run.output


def test_practicum_eval_samples_metrics_and_the_response_cache(tiny_run_config, tmp_path):
    """`practicum eval --samples 3 --k 1 --k 2`: three episodes per task, pass@k and pass^k per
    domain; a second run with the same model, prompts and sampling answers every request from
    the cache (no generation) with the same scores; another temperature misses it."""
    import json

    from typer.testing import CliRunner

    from practicum.cli import app

    cache = tmp_path / "cache.sqlite"
    args = ["eval", str(tiny_run_config.path), "--samples", "3", "--k", "1", "--k", "2", "--cache", str(cache), "--json"]
    first = CliRunner().invoke(app, args)
    assert first.exit_code == 0, first.output
    out = lambda r: json.loads(r.stdout.strip().splitlines()[-1])  # noqa: E731 - stdout only: stderr has progress bars
    a = out(first)
    (m,) = a["metrics"].values()
    assert m["samples_per_task"] == 3 and {"pass@1", "pass@2", "pass^1", "pass^2"} <= m.keys()
    assert m["pass@2"] >= m["pass@1"] >= m["pass^2"]
    assert len(a["per_task"]) == 3 * m["tasks"] and a["cache"]["hits"] == 0
    second = out(CliRunner().invoke(app, args))
    assert second["cache"]["misses"] == 0 and second["cache"]["hits"] == a["cache"]["misses"]
    assert [r["reward"] for r in second["per_task"]] == [r["reward"] for r in a["per_task"]]
    other = out(CliRunner().invoke(app, [*args, "--temperature", "0.5"]))
    assert other["cache"]["hits"] == 0
    # a bound of 0 MB: this run is answered from the cache, then every reply of both settings is deleted
    emptied = out(CliRunner().invoke(app, [*args, "--cache-max-mb", "0"]))
    assert emptied["cache"]["hits"] == a["cache"]["misses"]
    assert emptied["cache"]["pruned"] == a["cache"]["misses"] + other["cache"]["misses"]
    assert out(CliRunner().invoke(app, args))["cache"]["hits"] == 0
    bad = CliRunner().invoke(app, ["eval", str(tiny_run_config.path), "--k", "4"])
    assert bad.exit_code != 0 and "--samples" in bad.output
