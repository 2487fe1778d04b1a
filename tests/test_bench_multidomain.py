"""The statistics of benchmarks/multidomain.py, against numbers worked out by hand: the t
quantile, intervals, the paired test and its verdict, the mean over domains, and the target's
verdict on made-up sides. How the sides' configs are cut from the benchmark's config."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
import multidomain as md  # noqa: E402


def test_t_quantile_matches_tables():
    # Student's t tables: t_{0.975} for 1, 3, 9 degrees of freedom; the normal's 1.960 for large df
    assert md.t_quantile(0.975, 1) == pytest.approx(12.706, abs=1e-3)
    assert md.t_quantile(0.975, 3) == pytest.approx(3.182, abs=1e-3)
    assert md.t_quantile(0.975, 9) == pytest.approx(2.262, abs=1e-3)
    assert md.t_quantile(0.975, 1e6) == pytest.approx(1.960, abs=1e-3)
    with pytest.raises(ValueError):
        md.t_quantile(0.3, 5)


def test_mean_ci_by_hand():
    # [0, 1, 1, 1]: mean 0.75, sd 0.5, se 0.25, t_{0.975,3} = 3.1824 -> half-width 0.7956
    c = md.mean_ci([0.0, 1.0, 1.0, 1.0])
    assert (c.n, c.mean) == (4, 0.75)
    assert c.lo == pytest.approx(0.75 - 0.7956, abs=1e-4)
    assert c.hi == pytest.approx(0.75 + 0.7956, abs=1e-4)
    cut = md.mean_ci([0.0, 1.0, 1.0, 1.0], bounds=(0.0, 1.0))  # a score cannot leave [0, 1]
    assert (cut.lo, cut.hi) == (0.0, 1.0)
    assert md.mean_ci([0.4]) == md.Interval(1, 0.4)  # one value: no interval
    assert md.mean_ci([]) == md.Interval(0, None)


def test_paired_diff_no_significant_change():
    # differences [1, 1, 0, 0]: mean 0.5, se sqrt(1/3)/2 = 0.2887, t = sqrt(3) on 3 df.
    # For 3 df, F(t) = 1/2 + (x/(1+x^2) + atan x)/pi with x = t/sqrt(3) = 1: F = 0.90915, so the
    # two-sided p = 0.1817; half-width 3.1824 * 0.2887 = 0.9187.
    a = {"t1": 1.0, "t2": 1.0, "t3": 1.0, "t4": 0.0}
    b = {"t1": 0.0, "t2": 0.0, "t3": 1.0, "t4": 0.0}
    d = md.paired_diff(a, b)
    assert (d.n, d.mean, d.wins, d.losses) == (4, 0.5, 2, 0)
    assert d.se == pytest.approx(math.sqrt(1 / 3) / 2)
    assert d.p == pytest.approx(0.1817, abs=1e-4)
    assert (d.lo, d.hi) == (pytest.approx(0.5 - 0.9187, abs=1e-4), pytest.approx(0.5 + 0.9187, abs=1e-4))
    assert d.verdict == "no change"


def test_paired_diff_gain_and_loss():
    # eight tasks gained 1, two unchanged: mean 0.8, sd sqrt(1.6/9) = 0.4216, se 0.1333, t = 6 on
    # 9 df (two-sided p = 0.0002), half-width 2.2622 * 0.1333 = 0.3016
    after = {f"t{i}": 1.0 for i in range(10)}
    before = {f"t{i}": (1.0 if i >= 8 else 0.0) for i in range(10)}
    up = md.paired_diff(after, before)
    assert up.mean == pytest.approx(0.8)
    assert up.lo == pytest.approx(0.8 - 0.3016, abs=1e-4)
    assert up.p == pytest.approx(2.0e-4, abs=5e-5)
    assert up.verdict == "gain"
    down = md.paired_diff(before, after)
    assert down.mean == pytest.approx(-0.8) and down.verdict == "loss" and down.p == up.p


def test_paired_diff_pairs_by_task_and_handles_no_variance():
    # only the shared tasks count; an extra task on one side is ignored
    d = md.paired_diff({"a": 1.0, "b": 0.5, "x": 1.0}, {"a": 1.0, "b": 0.5, "y": 0.0})
    assert (d.n, d.mean, d.p, d.verdict) == (2, 0.0, 1.0, "no change")
    # every task up by exactly 0.25: no variance, a certain gain
    same = md.paired_diff({"a": 0.5, "b": 1.0}, {"a": 0.25, "b": 0.75})
    assert (same.mean, same.lo, same.hi, same.p, same.verdict) == (0.25, 0.25, 0.25, 0.0, "gain")
    assert md.paired_diff({"a": 1.0}, {"a": 0.0}).verdict == "too few tasks"


def test_mean_of_diffs_welch():
    # means 0.2 and 0.0 with se 0.1 and 0.2 on 101 tasks each: mean 0.1, se sqrt(0.01 + 0.04) / 2
    # = 0.1118, df = 0.05^2 / ((0.1^4 + 0.2^4) / 100) = 147.06, t = 0.894 -> p = 0.373 (no change)
    parts = [md.Diff(101, 0.2, 0.1), md.Diff(101, 0.0, 0.2)]
    m = md.mean_of_diffs(parts)
    assert m.mean == pytest.approx(0.1)
    assert m.se == pytest.approx(math.sqrt(0.0125))
    assert m.df == pytest.approx(147.06, abs=0.01)
    assert m.p == pytest.approx(0.373, abs=2e-3)
    assert m.verdict == "no change"
    assert md.mean_of_diffs([md.Diff(1, 1.0)]).mean is None  # no usable part


def test_verdict_threshold():
    assert md.verdict(0.1, 0.049) == "gain"
    assert md.verdict(-0.1, 0.049) == "loss"
    assert md.verdict(0.1, 0.05) == "no change"


def _side(scores: dict[str, dict[str, float]]) -> dict:
    return {"steps": [{}], "final": {d: {"scores": s} for d, s in scores.items()}}


def test_target_verdict_on_made_up_sides():
    # two domains of 10 tasks; base all 0. mixed solves 8 of each (significant gains, t = 6);
    # single:a solves 10 of a (own 1.0) and loses nothing on b; single:b solves 6 of b.
    # mixed mean 0.8 vs singles' mean (1.0 + 0.6) / 2 = 0.8: at least as high.
    ids = [f"t{i}" for i in range(10)]
    zero = {i: 0.0 for i in ids}
    eight = {i: (1.0 if k < 8 else 0.0) for k, i in enumerate(ids)}
    six = {i: (1.0 if k < 6 else 0.0) for k, i in enumerate(ids)}
    ones = {i: 1.0 for i in ids}
    result = {"sides": {
        "base": _side({"a": zero, "b": zero}),
        "mixed": _side({"a": eight, "b": eight}),
        "ablation": _side({"a": zero, "b": eight}),
        "single:a": _side({"a": ones, "b": zero}),
        "single:b": _side({"a": zero, "b": six}),
        "single:c": {"error": "crashed"},  # a failed side is left out, not fatal
    }}
    a = md.analyse(result, ["a", "b"])
    t = a["target"]
    assert t["mixed_vs_base"] == {"a": "gain", "b": "gain"}
    assert t["gains_on_every_domain"] and t["loses_on_none"]
    assert t["mixed_mean_over_domains"] == pytest.approx(0.8)
    assert t["singles_mean_own_domain"] == pytest.approx(0.8)
    assert t["singles_mean_over_domains"] == pytest.approx(((1.0 + 0.0) / 2 + (0.0 + 0.6) / 2) / 2)  # 0.4
    assert t["at_least_single_average"] and t["met"]
    assert t["mixed_vs_single_per_domain"]["a"]["mean"] == pytest.approx(-0.2)
    assert t["mixed_vs_ablation_per_domain"]["a"]["verdict"] == "gain"
    assert t["single_on_other_domains"]["a"]["b"]["verdict"] == "no change"
    assert a["table"]["single:b"]["b"]["score"]["mean"] == pytest.approx(0.6)
    # a mixed run that forgets b (base solved 8 of b, mixed none: t = -6) misses the target
    result["sides"]["base"] = _side({"a": zero, "b": eight})
    result["sides"]["mixed"] = _side({"a": eight, "b": zero})
    a = md.analyse(result, ["a", "b"])
    t = a["target"]
    assert t["mixed_vs_base"] == {"a": "gain", "b": "loss"}
    assert not t["gains_on_every_domain"] and not t["loses_on_none"] and not t["met"]
    text = md.report({**result, "analysis": a, "settings": {"minutes": 1, "eval_tokens": 64, "drift_eval_size": 5},
                      "machine": _machine(), "command": "x"}, ["a", "b"])
    assert "**target not met**" in text and "b loss" in text and "One reply to most" not in text
    # the mixed side answered b with one reply to 9 of its 10 tasks: the report says so
    result["sides"]["mixed"]["final"]["b"]["same_reply"] = {"share": 0.9, "text": "<answer>1</answer>"}
    result["sides"]["single:a"]["final"]["b"]["same_reply"] = {"share": 0.4, "text": "x"}  # under half: not shown
    text = md.report({**result, "analysis": a, "settings": {"minutes": 1, "eval_tokens": 64, "drift_eval_size": 5},
                      "machine": _machine(), "command": "x"}, ["a", "b"])
    assert "collapsed onto one answer" in text and "mixed b 90% '<answer>1</answer>'" in text and "single:a b" not in text
    assert "forgotten" not in text  # no guard checks recorded: no line
    # the guard's checks: at the last one, b had forgotten 3 tasks it had right before
    result["sides"]["mixed"]["drift"] = {"evals": [{"step": 0, "forgotten": {"a": 0.0, "b": 0.0}},
                                                   {"step": 4, "forgotten": {"a": 0.0, "b": 3.0}}]}
    text = md.report({**result, "analysis": a, "settings": {"minutes": 1, "eval_tokens": 64, "drift_eval_size": 5},
                      "machine": _machine(), "command": "x"}, ["a", "b"])
    assert "At its last check (step 4)" in text and "a 0, b 3." in text and "drift guard: 2 held-out checks" in text
    assert "lost and gained" not in text  # results written before the best step was kept: no line
    # and what moved against the best earlier check, which the guard's paired test weighed
    result["sides"]["mixed"]["drift"]["evals"][-1].update(lost_gained={"a": [1, 2], "b": [5, 1]},
                                                          best_step={"a": 0, "b": 2})
    text = md.report({**result, "analysis": a, "settings": {"minutes": 1, "eval_tokens": 64, "drift_eval_size": 5},
                      "machine": _machine(), "command": "x"}, ["a", "b"])
    assert "a -1 +2 (best at step 0), b -5 +1 (best at step 2)." in text
    assert "Machine speed" not in text  # results written before the probe have none: no line
    # the speed probes: the median of each side's, where it has any
    result["sides"]["mixed"]["speed"] = [{"step": 0, "gflops": 190.0}, {"step": 4, "gflops": 118.0},
                                         {"step": 9, "gflops": 120.0}]
    result["sides"]["single:a"]["speed"] = [{"step": 0, "gflops": 185.0}, {"step": 12, "gflops": 181.0}]
    text = md.report({**result, "analysis": a, "settings": {"minutes": 1, "eval_tokens": 64, "drift_eval_size": 5},
                      "machine": _machine(), "command": "x"}, ["a", "b"])
    assert "mixed 120, single:a 183." in text and "single:b" not in text.split("Machine speed")[1]



def test_a_gain_made_of_one_reply_to_most_tasks_does_not_count():
    """mixed gains on a and b (8 of 10 against 0), but answers b with one reply to 9 of its 10
    tasks where the base model's commonest reply answered 3: b's gain is not counted, so the
    target is missed. When the base model answered b so itself (95%), the gain counts."""
    ids = [f"t{i}" for i in range(10)]
    zero = {i: 0.0 for i in ids}
    eight = {i: (1.0 if k < 8 else 0.0) for k, i in enumerate(ids)}
    result = {"sides": {"base": _side({"a": zero, "b": zero}), "mixed": _side({"a": eight, "b": eight}),
                        "single:a": _side({"a": eight, "b": zero}), "single:b": _side({"a": zero, "b": eight})}}
    assert md.analyse(result, ["a", "b"])["target"]["met"]
    result["sides"]["mixed"]["final"]["b"]["same_reply"] = {"share": 0.9, "text": "<answer>1</answer>"}
    result["sides"]["base"]["final"]["b"]["same_reply"] = {"share": 0.3, "text": "12"}
    a = md.analyse(result, ["a", "b"])
    t = a["target"]
    assert t["mixed_vs_base"] == {"a": "gain", "b": "gain"}
    assert t["collapsed_gains"] == {"b": {"share": 0.9, "text": "<answer>1</answer>", "base_share": 0.3}}
    assert not t["gains_on_every_domain"] and not t["met"]
    text = md.report({**result, "analysis": a, "settings": {"minutes": 1, "eval_tokens": 64, "drift_eval_size": 5},
                      "machine": _machine(), "command": "x"}, ["a", "b"])
    assert "gains on every domain: **no** (b's gain is one reply, '<answer>1</answer>', to 90% of its tasks: not counted)" in text
    result["sides"]["base"]["final"]["b"]["same_reply"] = {"share": 0.95, "text": "<answer>1</answer>"}
    t = md.analyse(result, ["a", "b"])["target"]
    assert t["collapsed_gains"] == {} and t["gains_on_every_domain"] and t["met"]


def _machine() -> dict:
    return {"cpu": "cpu", "cpus_available": 2, "logical_cpus": 2, "memory_gib": 8, "torch": "2", "torch_threads": 2,
            "transformers": "5", "trl": None}


def test_side_configs_cut_from_the_benchmark_config():
    raw = {"domains": [{"name": "a"}, {"name": "b"}], "curriculum": {"filter": {"enabled": True}}, "rollout": {}}
    assert md.side_raw(raw, "mixed")["curriculum"] == {"filter": {"enabled": True}}
    abl = md.side_raw(raw, "ablation")
    assert "curriculum" not in abl and [d["name"] for d in abl["domains"]] == ["a", "b"]
    one = md.side_raw(raw, "single:b")
    assert "curriculum" not in one and one["domains"] == [{"name": "b"}]
    assert "curriculum" in raw  # the benchmark's own config is not changed
    with pytest.raises(SystemExit, match="no domain 'c'"):
        md.side_raw(raw, "single:c")
    assert md.side_names(["a", "b"]) == ["base", "mixed", "ablation", "single:a", "single:b"]


def test_a_single_side_keeps_its_own_domains_scaffold_levels_and_shaping_and_nothing_else():
    scaffold = {"hint": "say it", "guided": True}
    levels = {"levels": [{"max_value": 10}, {"max_value": 25}], "window": 8}
    shaping = {"format": 0.5}
    raw = {"domains": [{"name": "a"}, {"name": "b"}, {"name": "c"}],
           "curriculum": {"filter": {"enabled": True}, "scaffold": {"a": scaffold}, "levels": {"a": levels, "b": levels},
                          "shaping": {"b": shaping}}}
    assert md.side_raw(raw, "single:a")["curriculum"] == {"scaffold": {"a": scaffold}, "levels": {"a": levels}}
    assert md.side_raw(raw, "single:b")["curriculum"] == {"levels": {"b": levels}, "shaping": {"b": shaping}}
    assert "curriculum" not in md.side_raw(raw, "single:c")
    assert "curriculum" not in md.side_raw(raw, "ablation")


def test_the_benchmark_config_validates_for_every_side(tmp_path):
    args = md.parse_args(["--out", str(tmp_path / "m.json")])
    names = [d["name"] for d in md.read_raw(args.config, [])["domains"]]
    assert names == ["arithmetic", "products", "decimals", "equations"]
    for side in md.side_names(names):
        cfg = md.side_config(args, side)
        assert cfg.run.dir == str(tmp_path / f"m_{side.replace(':', '_')}_run")  # beside --out, named after it
        assert md.side_file(tmp_path / "m.json", side, ".part.json").name == f"m_{side.replace(':', '_')}.part.json"
        assert cfg.curriculum.scaffold.keys() == ({"products"} if side in ("mixed", "base", "single:products") else set())
        shaped = set(md.read_raw(args.config, [])["curriculum"]["shaping"])
        own = {side.split(":", 1)[1]} & shaped if side.startswith("single:") else shaped if side in ("mixed", "base") else set()
        assert cfg.curriculum.shaping.keys() == own


@pytest.mark.parametrize("native", [True, False], ids=["bf16-cpu", "no-bf16-cpu"])
def test_auto_precision_is_stored_as_what_this_machine_runs(tmp_path, monkeypatch, native):
    """``auto`` precision resolves by the CPU: each side's config says which it ran (bf16 engine and
    autocast on a CPU with bf16 instructions, fp32 on one without), so a side of the other kind is
    another recipe to ``--reuse``; a precision the config names stays as named."""
    from practicum import hardware

    monkeypatch.setattr(hardware, "cpu_has_native_bf16", lambda: native)
    sets = ["--set", "model.engine_dtype=auto", "--set", "trainer.autocast_dtype=auto"]
    args = md.parse_args([*sets, "--out", str(tmp_path / "m.json")])
    for side in ("base", "mixed", "single:products"):
        cfg = md.side_config(args, side)
        assert cfg.model.engine_dtype == ("bfloat16" if native else "float32")
        assert cfg.trainer.autocast_dtype == ("bfloat16" if native else "none")
    mine, defaults = md.side_recipe(args, "mixed")
    other = {**mine, "model": {**mine["model"], "engine_dtype": "float32" if native else "bfloat16"}}
    assert md.recipe_differences(other, mine, defaults=defaults) == [
        f'model.engine_dtype: "{other["model"]["engine_dtype"]}" (this run: "{mine["model"]["engine_dtype"]}")']
    named = md.parse_args(["--set", "model.engine_dtype=float32", "--set", "trainer.autocast_dtype=none",
                           "--out", str(tmp_path / "n.json")])
    cfg = md.side_config(named, "mixed")
    assert (cfg.model.engine_dtype, cfg.trainer.autocast_dtype) == ("float32", "none")


def test_single_checks_give_a_specialist_the_guards_checks_and_nothing_else(tmp_path):
    """--single-checks: a single side gets the drift guard's checks with reaction warn (a log line,
    no change to training), its own help kept; without the flag it has no guard; the mixed side's
    curriculum is the config's either way."""
    plain = md.parse_args(["--out", str(tmp_path / "m.json")])
    checked = md.parse_args(["--out", str(tmp_path / "m.json"), "--single-checks"])
    assert not md.side_config(plain, "single:equations").curriculum.drift.enabled
    drift = md.side_config(checked, "single:equations").curriculum.drift
    assert drift.enabled and drift.reaction == "warn"
    products = md.side_config(checked, "single:products").curriculum
    assert "products" in products.scaffold and products.drift.reaction == "warn"
    assert md.side_config(checked, "mixed").curriculum == md.side_config(plain, "mixed").curriculum
    assert not md.side_config(checked, "ablation").curriculum.drift.enabled


def test_group_fates_count_every_drawn_group_by_what_became_of_it(tmp_path):
    from practicum.records import Group, GroupState, Task
    from practicum.store import Store

    store = Store(tmp_path / "s.sqlite")
    fates = [(GroupState.trained, ""), (GroupState.trained, ""), (GroupState.dropped, "filtered: uniform (mean 0)"),
             (GroupState.dropped, "stale: generated 1 versions ago (max_staleness 0)"), (GroupState.ready, "")]
    for k, (state, reason) in enumerate(fates):
        g = Group(id=f"g{k:08d}", task=Task(id=f"t{k}", domain="d", prompt=[{"role": "user", "content": "p"}]), draw=k, state=state, reason=reason)
        store.record_group(g, 0)
    assert md.group_fates(store) == {"trained": 2, "filtered": 1, "stale": 1, "ready": 1}
    result = {"sides": {"mixed": {"group_fates": md.group_fates(store)}}, "analysis": {"table": {}},
              "settings": {"minutes": 1, "eval_tokens": 8, "drift_eval_size": 5}, "machine": _machine(), "command": "x"}
    assert "mixed 2 trained, 1 filtered, 1 stale, 1 ready" in md.report(result, ["d"])


def test_reuse_takes_the_earlier_runs_other_sides_and_refuses_other_domains(tmp_path):
    import json

    ids = {"t1": 1.0, "t2": 0.0}
    prior = {"benchmark": "multidomain", "started": "2026-12-04 23:27:13", "settings": {"domains": ["a", "b"]},
             "sides": {"base": _side({"a": ids, "b": ids}), "mixed": _side({"a": ids, "b": ids}),
                       "single:a": {**_side({"a": ids, "b": ids}), "reused_from": "2026-12-03 10:00:00"},
                       "single:b": {"error": "crashed"}}}
    path = tmp_path / "prior.json"
    path.write_text(json.dumps(prior))
    got = md.reused_sides(str(path), ["a", "b"], ["mixed"])
    assert sorted(got) == ["base", "single:a"]  # not the side run again, not a side that failed
    assert got["base"]["reused_from"] == "2026-12-04 23:27:13" and got["base"]["final"] == prior["sides"]["base"]["final"]
    assert got["single:a"]["reused_from"] == "2026-12-03 10:00:00"  # reused there too: the date it ran
    with pytest.raises(SystemExit, match="not a multidomain result over the domains"):
        md.reused_sides(str(path), ["a", "c"], ["mixed"])
    (tmp_path / "broken.json").write_text("{not json")
    for bad in (tmp_path / "broken.json", tmp_path / "missing.json"):
        with pytest.raises(SystemExit, match="cannot read it as a result"):
            md.reused_sides(str(bad), ["a", "b"], ["mixed"])


def test_reuse_refuses_a_result_whose_held_out_tasks_are_not_this_runs(tmp_path):
    """Sides pair task by task: a result whose held-out tasks differ under the same ids (another
    eval_seed, other generator parameters) is refused; the benchmark's own domains give other
    fingerprints then, and the same ones under another training seed."""
    import argparse
    import json

    config = str(Path(md.__file__).with_name("multidomain.yaml"))

    def fingerprints(*overrides: str, n: int = 20) -> dict[str, str]:
        ns = argparse.Namespace(config=config, overrides=list(overrides), out=str(tmp_path / "x.json"), minutes=1.0,
                                eval_tokens=48, threads=0, single_checks=False)
        return md.held_out_fingerprints(md.all_domains(ns)[1], n)

    mine = fingerprints()
    assert set(mine) == {"arithmetic", "products", "decimals", "equations"}
    assert fingerprints() == mine  # a function of the config
    assert fingerprints("run.seed=1") == mine  # the training seed: the same held-out tasks
    other = fingerprints("domains.0.eval_seed=1", "domains.3.source.params.max_value=30")
    assert [d for d in mine if other[d] != mine[d]] == ["arithmetic", "equations"]
    assert fingerprints(n=10)["arithmetic"] != mine["arithmetic"]  # over the result's own number of tasks

    ids = {"t1": 1.0}
    prior = {"benchmark": "multidomain", "started": "2026-12-06 09:00:00",
             "settings": {"domains": list(mine), "minutes": 1.0, "eval_tokens": 48, "eval_size": 20, "held_out": other},
             "sides": {"base": _side({d: ids for d in mine})}}
    path = tmp_path / "prior.json"
    path.write_text(json.dumps(prior))
    with pytest.raises(SystemExit, match="held-out tasks of arithmetic, equations are not this run's"):
        md.reused_sides(str(path), list(mine), ["mixed"], 1.0, 48, held_out=lambda n: fingerprints(n=n))
    prior["settings"]["held_out"] = mine
    path.write_text(json.dumps(prior))
    assert "base" in md.reused_sides(str(path), list(mine), ["mixed"], 1.0, 48, held_out=lambda n: fingerprints(n=n))
    del prior["settings"]["held_out"]  # a result from before fingerprints: taken as it is
    path.write_text(json.dumps(prior))
    assert "base" in md.reused_sides(str(path), list(mine), ["mixed"], 1.0, 48, held_out=lambda n: {})


def test_reuse_refuses_sides_of_another_budget_and_the_target_is_not_judged_across_budgets(tmp_path):
    """The target compares sides trained for one wall-clock budget: a 10-minute single reused by a
    20-minute run is refused, unless asked for, and then the report does not judge the target."""
    import json

    ids = [f"t{i}" for i in range(10)]
    zero = {i: 0.0 for i in ids}
    eight = {i: (1.0 if k < 8 else 0.0) for k, i in enumerate(ids)}
    prior = {"benchmark": "multidomain", "started": "2026-12-05 10:00:00",
             "settings": {"domains": ["a"], "minutes": 10, "eval_tokens": 48},
             "sides": {"base": _side({"a": zero}), "single:a": _side({"a": eight}),
                       "ablation": {**_side({"a": zero}), "minutes": 5}}}  # its own record beats the settings'
    path = tmp_path / "prior.json"
    path.write_text(json.dumps(prior))
    got = md.reused_sides(str(path), ["a"], ["mixed", "ablation"], minutes=10, eval_tokens=48)
    assert sorted(got) == ["base", "single:a"] and got["single:a"]["minutes"] == 10
    with pytest.raises(SystemExit, match="side single:a trained for 10 minutes, this run trains for 20"):
        md.reused_sides(str(path), ["a"], ["mixed"], minutes=20, eval_tokens=48)
    with pytest.raises(SystemExit, match="side ablation trained for 5 minutes"):
        md.reused_sides(str(path), ["a"], ["mixed", "single:a"], minutes=10, eval_tokens=48)
    with pytest.raises(SystemExit, match="evaluated with 48 new tokens, this run with 64"):
        md.reused_sides(str(path), ["a"], ["mixed"], minutes=10, eval_tokens=64)
    # base trains nothing: any budget pairs with it
    assert "base" in md.reused_sides(str(path), ["a"], ["mixed", "single:a", "ablation"], minutes=20, eval_tokens=48)

    sides = md.reused_sides(str(path), ["a"], ["mixed", "ablation"], minutes=20, eval_tokens=48, other_budget=True)
    sides["mixed"] = {**_side({"a": {i: 1.0 for i in ids}}), "minutes": 20}
    t = md.analyse({"sides": sides}, ["a"])["target"]
    assert t["budgets_differ"] == {"single:a": 10, "mixed": 20}
    assert t["gains_on_every_domain"] and t["at_least_single_average"] and not t["met"]  # met otherwise; not judged
    sides["mixed"]["minutes"] = 10
    assert md.analyse({"sides": sides}, ["a"])["target"]["met"]


def test_recipe_differences_by_hand():
    """Fields compared one by one, domains by name; a field the stored config lacks counts as its
    default then; where a side ran and how fast its engine went do not count."""
    theirs = {"run": {"dir": "/a", "seed": 0}, "model": {"name": "m", "max_batch": 32},
              "trainer": {"lr": 2e-5}, "rollout": {"temperature": 1.0},
              "domains": [{"name": "a", "eval_size": 400}, {"name": "b", "eval_size": 50}]}
    mine = {"run": {"dir": "/b", "seed": 3}, "model": {"name": "m", "max_batch": 64},
            "trainer": {"lr": 2e-5, "lr_schedule": "wsd", "warmup_fraction": 0.0}, "rollout": {"temperature": 0.7},
            "domains": [{"name": "a", "eval_size": 400}, {"name": "b", "eval_size": 50, "weight": 1.0}]}
    defaults = {"trainer": {"lr": 1e-5, "lr_schedule": "constant", "warmup_fraction": 0.0},
                "domains": [{"name": "a"}, {"name": "b", "weight": 1.0}]}
    assert md.recipe_differences(theirs, mine, defaults=defaults) == [
        'rollout.temperature: 1.0 (this run: 0.7)',
        'trainer.lr_schedule: absent, its default then "constant" (this run: "wsd")']
    # without defaults an added field cannot be judged and is skipped
    assert md.recipe_differences(theirs, mine) == ['rollout.temperature: 1.0 (this run: 0.7)']
    # base trains nothing: only its model and domains are compared
    assert md.recipe_differences(theirs, mine, ("model", "domains"), defaults) == []
    renamed = {**mine, "domains": [{"name": "a"}, {"name": "c"}]}
    assert md.recipe_differences(theirs, renamed, ("domains",)) == ["domains: ['a', 'b'] (this run: ['a', 'c'])"]
    other = {**mine, "domains": [{"name": "a", "eval_size": 200}, {"name": "b", "eval_size": 50}]}
    assert md.recipe_differences(theirs, other, ("domains",)) == ["domains.a.eval_size: 400 (this run: 200)"]


def test_reuse_refuses_a_side_of_another_recipe_unless_asked_and_then_does_not_judge(tmp_path):
    """A side trained under another learning-rate schedule than this run's is refused; with
    other_recipe it is taken, its differences travel with it, and the target is not judged."""
    import json

    ids = [f"t{i}" for i in range(10)]
    zero = {i: 0.0 for i in ids}
    eight = {i: (1.0 if k < 8 else 0.0) for k, i in enumerate(ids)}
    old = {"trainer": {"lr": 2e-5}, "domains": [{"name": "a"}]}             # before lr_schedule existed
    new = {"trainer": {"lr": 2e-5, "lr_schedule": "wsd"}, "domains": [{"name": "a"}]}
    prior = {"benchmark": "multidomain", "started": "2026-12-05 10:00:00",
             "settings": {"domains": ["a"], "minutes": 10, "eval_tokens": 48},
             "sides": {"base": {**_side({"a": zero}), "config": old}, "single:a": {**_side({"a": eight}), "config": old},
                       "ablation": {**_side({"a": zero}), "config": new}}}
    path = tmp_path / "prior.json"
    path.write_text(json.dumps(prior))
    defaults = {"trainer": {"lr": 1e-5, "lr_schedule": "constant"}, "domains": [{"name": "a"}]}

    def recipe(side):
        return new, defaults

    with pytest.raises(SystemExit, match=r'side single:a was trained under another recipe than this run.s: '
                                         r'trainer.lr_schedule: absent, its default then "constant" \(this run: "wsd"\)'):
        md.reused_sides(str(path), ["a"], ["mixed"], 10, 48, recipe=recipe)
    got = md.reused_sides(str(path), ["a"], ["mixed", "single:a"], 10, 48, recipe=recipe)  # base and ablation agree
    assert sorted(got) == ["ablation", "base"] and "recipe_differs" not in got["ablation"]
    sides = md.reused_sides(str(path), ["a"], ["mixed"], 10, 48, recipe=recipe, other_recipe=True)
    assert sides["single:a"]["recipe_differs"] == ['trainer.lr_schedule: absent, its default then "constant" (this run: "wsd")']
    sides["mixed"] = {**_side({"a": {i: 1.0 for i in ids}}), "minutes": 10}
    result = {"sides": sides}
    t = md.analyse(result, ["a"])["target"]
    assert t["recipes_differ"] == {"single:a": sides["single:a"]["recipe_differs"]}
    assert t["gains_on_every_domain"] and t["at_least_single_average"] and not t["met"]  # met otherwise; not judged
    result.update(analysis=md.analyse(result, ["a"]), settings={"domains": ["a"], "drift_eval_size": 0, "minutes": 10,
                                                                "eval_tokens": 48},
                  machine=md.machine_info(), command="x")
    text = md.report(result, ["a"])
    assert "single:a was trained under another recipe" in text and "target met" not in text and "target not met" not in text
    del sides["single:a"]["recipe_differs"]
    assert md.analyse({"sides": sides}, ["a"])["target"]["met"]


def test_side_recipe_of_the_benchmark_config_flags_a_stored_side_from_before_the_schedule():
    """On the real config: a side's recipe agrees with itself, and a stored ablation from before
    ``trainer.lr_schedule`` existed is told apart from a run that sets it."""
    args = md.parse_args(["--minutes", "10", "--set", "trainer.lr_schedule=wsd", "--out", "/tmp/unused.json"])
    mine, defaults = md.side_recipe(args, "ablation")
    assert mine["trainer"]["lr_schedule"] == "wsd" and defaults["trainer"]["lr_schedule"] == "constant"
    assert "curriculum" not in mine or not mine["curriculum"].get("drift", {}).get("enabled")
    assert md.recipe_differences(mine, mine, defaults=defaults) == []
    old = {**mine, "trainer": {k: v for k, v in mine["trainer"].items() if k != "lr_schedule"}}
    assert md.recipe_differences(old, mine, defaults=defaults) == [
        'trainer.lr_schedule: absent, its default then "constant" (this run: "wsd")']
    # base trains nothing: the schedule is not its recipe
    base_mine, base_defaults = md.side_recipe(args, "base")
    assert md.recipe_differences(old, base_mine, ("model", "domains"), base_defaults) == []


def test_side_recipe_flags_a_domain_field_the_stored_side_lacks():
    """A field added to a domain's section after a side ran (here its own entropy_coef) stood at
    its default in that run: a run that sets it differs from the stored side, and one that leaves
    it unset does not (the default is the field's, not this run's value)."""
    plain = md.parse_args(["--minutes", "10", "--out", "/tmp/unused.json"])
    stored, _ = md.side_recipe(plain, "single:arithmetic")
    for d in stored["domains"]:
        del d["entropy_coef"]
    args = md.parse_args(["--minutes", "10", "--set", "domains.0.entropy_coef=0.03", "--out", "/tmp/unused.json"])
    mine, defaults = md.side_recipe(args, "single:arithmetic")
    assert md.recipe_differences(stored, mine, defaults=defaults) == [
        "domains.arithmetic.entropy_coef: absent, its default then null (this run: 0.03)"]
    mine, defaults = md.side_recipe(plain, "single:arithmetic")
    assert md.recipe_differences(stored, mine, defaults=defaults) == []


# --- several training seeds (--pool) ---------------------------------------------------------------
_IDS = [f"t{i}" for i in range(10)]


def _k(k: int) -> dict[str, float]:
    """The first k of ten tasks right."""
    return {i: (1.0 if n < k else 0.0) for n, i in enumerate(_IDS)}


def _seeded(seed: int, scores: dict[str, dict[str, float]], lr: float = 2e-5, **extra) -> dict:
    return {**_side(scores), "config": {"run": {"seed": seed, "dir": f"/x/{seed}"}, "trainer": {"lr": lr}},
            "minutes": 10.0, **extra}


def _result(started: str, sides: dict, cpu: str = "cpu", held_out: str = "h") -> dict:
    return {"benchmark": "multidomain", "started": started, "machine": {**_machine(), "cpu": cpu},
            "settings": {"domains": ["a", "b"], "eval_size": 10, "eval_tokens": 64, "held_out": {"a": held_out},
                         "minutes": 10.0},
            "sides": sides}


def _two_seeds() -> list[tuple[str, dict]]:
    """Seed 0: mixed 8/10 on a and b, single:a 10/10, single:b 6/10 (gap -0.2, +0.2: 0.0).
    Seed 1 in a second result that reused seed 0's base and mixed: mixed 6 and 8, the singles 8
    and 8 (gap -0.2, 0.0: -0.1)."""
    base = _side({"a": _k(0), "b": _k(0)})
    mixed0 = _seeded(0, {"a": _k(8), "b": _k(8)})
    first = _result("2026-12-06 10:00:00", {"base": base, "mixed": mixed0,
                                            "single:a": _seeded(0, {"a": _k(10), "b": _k(0)}),
                                            "single:b": _seeded(0, {"a": _k(0), "b": _k(6)})})
    second = _result("2026-12-06 12:00:00", {
        "base": {**base, "reused_from": "2026-12-06 10:00:00"},
        "mixed": {**mixed0, "reused_from": "2026-12-06 10:00:00"},  # the same run, taken once
        "single:a": _seeded(1, {"a": _k(8), "b": _k(0)}),
        "single:b": _seeded(1, {"a": _k(0), "b": _k(8)})})
    third = _result("2026-12-06 14:00:00", {"mixed": _seeded(1, {"a": _k(6), "b": _k(8)})})
    return [("first.json", first), ("second.json", second), ("third.json", third)]


def test_pool_judges_the_target_on_scores_averaged_over_seeds_by_hand():
    pool = md.pool_seeds(_two_seeds(), ["a", "b"])
    assert pool["seeds"] == [0, 1] and pool["incomplete_seeds"] == {}
    assert pool["per_seed"][0]["target"]["met"] and not pool["per_seed"][1]["target"]["met"]
    assert pool["per_seed"][0]["target"]["mixed_minus_singles"]["mean"] == pytest.approx(0.0)
    assert pool["per_seed"][1]["target"]["mixed_minus_singles"]["mean"] == pytest.approx(-0.1)
    # per task averaged over seeds: mixed a = (8 + 6 of 10) -> 0.7, b 0.8: 0.75; single:a (10 + 8) -> 0.9,
    # single:b (6 + 8) -> 0.7: 0.8. The pooled gap is -0.05: not met, though seed 0 met it alone
    t = pool["pooled"]["target"]
    assert pool["pooled"]["table"]["mixed"]["a"]["score"]["mean"] == pytest.approx(0.7)
    assert t["mixed_mean_over_domains"] == pytest.approx(0.75)
    assert t["singles_mean_own_domain"] == pytest.approx(0.8)
    assert t["mixed_minus_singles"]["mean"] == pytest.approx(-0.05)
    assert t["gains_on_every_domain"] and not t["met"]
    # over seeds: gaps 0.0 and -0.1, sd 0.0707, se 0.05, t_{0.975,1} 12.706: half-width 0.6353
    gap = pool["across_seeds"]["mixed_minus_singles"]
    assert (gap["n"], gap["mean"]) == (2, pytest.approx(-0.05))
    assert gap["hi"] - gap["mean"] == pytest.approx(0.6353, abs=1e-4)
    assert pool["across_seeds"]["met_in"] == [0]
    text = md.pool_report(pool, ["a", "b"], "x")
    assert "**target not met** over seeds 0, 1" in text and "seed 0: mixed 0.800" in text
    assert "(t-interval over 2 seeds)" in text and "gains on every domain yes, loses on none yes; target met." in text
    # seed 1's single:a weaker (6 of 10): single:a averages 0.8, singles 0.75, and the pooled mix meets it
    results = _two_seeds()
    results[1][1]["sides"]["single:a"] = _seeded(1, {"a": _k(6), "b": _k(0)})
    assert md.pool_seeds(results, ["a", "b"])["pooled"]["target"]["met"]


def test_pool_leaves_out_an_incomplete_seed_and_a_gain_of_one_reply_in_any_seed_does_not_count():
    results = _two_seeds()[:2] + [("fourth.json", _result("2026-12-06 15:00:00", {
        "single:a": _seeded(2, {"a": _k(9), "b": _k(0)})}))]
    pool = md.pool_seeds(results, ["a", "b"])
    assert pool["seeds"] == [0] and pool["incomplete_seeds"] == {1: ["mixed"], 2: ["mixed", "single:b"]}
    assert "Seed 2 left out: it lacks mixed, single:b." in md.pool_report(pool, ["a", "b"], "x")
    alone = md.pool_seeds([("only.json", _result("2026-12-06 16:00:00", {
        "base": _side({"a": _k(0), "b": _k(0)}), "mixed": _seeded(0, {"a": _k(8), "b": _k(8)})}))], ["a", "b"])
    assert alone == {"seeds": [], "incomplete_seeds": {0: ["single:a", "single:b"]}, "per_seed": {}}
    assert "nothing to judge" in md.pool_report(alone, ["a", "b"], "x")
    results = _two_seeds()
    results[2][1]["sides"]["mixed"]["final"]["b"]["same_reply"] = {"share": 0.9, "text": "<answer>1</answer>"}
    pool = md.pool_seeds(results, ["a", "b"])
    assert pool["per_seed"][1]["target"]["collapsed_gains"]
    assert pool["pooled"]["target"]["collapsed_gains"] == {1: pool["per_seed"][1]["target"]["collapsed_gains"]}
    assert not pool["pooled"]["target"]["gains_on_every_domain"] and not pool["pooled"]["target"]["met"]


def test_pool_refuses_what_would_not_compare():
    def bad(change) -> list[tuple[str, dict]]:
        results = _two_seeds()
        change(results)
        return results

    cases = {
        "another recipe than with seed 0": lambda r: r[1][1]["sides"].__setitem__(
            "single:a", _seeded(1, {"a": _k(8), "b": _k(0)}, lr=4e-5)),
        "two runs of single:a with seed 1": lambda r: r[2][1]["sides"].__setitem__(
            "single:a", _seeded(1, {"a": _k(8), "b": _k(0)})),
        "a wall-clock budget buys other steps": lambda r: r[2][1].__setitem__("machine", {**_machine(), "cpu": "other"}),
        "would not pair task by task": lambda r: r[2][1]["settings"]["held_out"].__setitem__("a", "other"),
        "different budgets": lambda r: r[2][1]["sides"]["mixed"].__setitem__("minutes", 5.0),
        "not a multidomain result": lambda r: r[2][1]["settings"].__setitem__("domains", ["a", "c"]),
        "its base side is another model": lambda r: (
            r[0][1]["sides"]["base"].__setitem__("config", {"model": {"name": "m"}}),
            r[2][1]["sides"].__setitem__("base", {**_side({"a": _k(0), "b": _k(0)}), "config": {"model": {"name": "n"}}})),
    }
    for message, change in cases.items():
        with pytest.raises(SystemExit, match=message):
            md.pool_seeds(bad(change), ["a", "b"])
    with pytest.raises(SystemExit, match="no result holds the base side"):
        md.pool_seeds(_two_seeds()[2:], ["a", "b"])


def test_pool_from_the_command_line_writes_its_result(tmp_path, capsys):
    import json

    paths = []
    for name, res in _two_seeds():
        (tmp_path / name).write_text(json.dumps(res))
        paths.append(str(tmp_path / name))
    out = tmp_path / "seeds.json"
    args = md.parse_args(["--pool", *paths, "--out", str(out)])
    md.pool_main(args)
    got = json.loads(out.read_text())
    assert got["benchmark"] == "multidomain_seeds" and got["seeds"] == [0, 1] and got["from"] == paths
    assert got["pooled"]["target"]["mixed_minus_singles"]["mean"] == pytest.approx(-0.05)
    assert "**target not met**" in capsys.readouterr().out
    assert md.parse_args([]).out == "benchmarks/out/multidomain.json"
    # a file that is not a result, or a side without its scores: a clear error, not a traceback
    (tmp_path / "list.json").write_text("[1, 2]")
    with pytest.raises(SystemExit, match="not a multidomain result"):
        md.pool_main(md.parse_args(["--pool", str(tmp_path / "list.json")]))
    broken = _two_seeds()[0][1]
    del broken["sides"]["mixed"]["final"]["b"]
    (tmp_path / "broken.json").write_text(json.dumps(broken))
    with pytest.raises(SystemExit, match="side mixed has no per-task scores of b"):
        md.pool_main(md.parse_args(["--pool", str(tmp_path / "broken.json")]))
    assert md.result_shape_problem({"settings": {}, "sides": {}}) == "settings.domains, a list of domain names"
    assert md.result_shape_problem({"settings": {"domains": ["a"]}, "sides": {"mixed": 3}}) == "side mixed is not an object"
    assert md.result_shape_problem({"settings": {"domains": ["a"]}, "sides": {"mixed": {"steps": []}}}) is None  # unfinished
    assert md.parse_args(["--pool", "x.json"]).out == "benchmarks/out/multidomain_seeds.json"
