"""Domains are plugins: the entry-point registry, plugin-owned config, and the `envs` and
`verify DOMAIN` commands over every installed domain."""

from __future__ import annotations

import json
from importlib.metadata import EntryPoint

import pytest
from typer.testing import CliRunner

import practicum.domains as registry
from practicum.cli import app
from practicum.config import load_config
from practicum.domains import get_plugin, plugin_names
from practicum.domains.plugin import DomainPlugin
from practicum.errors import ConfigError, PluginError

BUILT_IN = {"math", "code", "terminal", "gym"}
runner = CliRunner()


def test_built_in_domains_are_registered_through_entry_points_and_keep_the_contract():
    assert BUILT_IN <= set(plugin_names())
    for name in plugin_names():
        plugin = get_plugin(name)
        assert isinstance(plugin, DomainPlugin) and plugin.name == name
        assert plugin.components and all(isinstance(c, str) for c in plugin.components)
        assert "practicum.domains." in registry.plugin_origin(name) or name not in BUILT_IN


def test_an_unknown_env_lists_the_installed_ones_and_names_file_and_field(write_yaml):
    with pytest.raises(PluginError, match=r"unknown env 'nope'; the installed domains are: code, .*math"):
        get_plugin("nope")
    path = write_yaml({"domains": [{"name": "a", "env": "math"}, {"name": "b", "env": "nope"}]})
    with pytest.raises(ConfigError, match=rf"{path}: invalid config:\n  domains.1.env: unknown env 'nope'"):
        load_config(path)


def test_a_plugin_that_fails_to_load_says_which_and_what_to_do(monkeypatch, write_yaml):
    broken = EntryPoint(name="broken", value="practicum_no_such_module:plugin", group=registry.ENTRY_POINT_GROUP)
    impostor = EntryPoint(name="impostor", value="practicum.domains.math:plugin", group=registry.ENTRY_POINT_GROUP)
    real = registry._entry_points()
    monkeypatch.setattr(registry, "_entry_points", lambda: {**real, "broken": broken, "impostor": impostor})
    with pytest.raises(PluginError, match=r"domain plugin 'broken' from practicum_no_such_module:plugin .* failed to load: "
                                          r"ModuleNotFoundError.*Fix or reinstall that package, or uninstall it"):
        get_plugin("broken")
    with pytest.raises(PluginError, match="calls itself 'math'"):
        get_plugin("impostor")
    with pytest.raises(ConfigError, match=r"domains.0.env: domain plugin 'broken' .* failed to load"):
        load_config(write_yaml({"domains": [{"name": "b", "env": "broken"}]}))


@pytest.mark.parametrize("section, message", [
    ({"name": "m", "env": "math", "options": {"reward": {"strict": 0, "lenient": 0}}}, "domains.0.options.reward: reward weights must not all be zero"),
    ({"name": "m", "env": "math", "options": {"rewards": {}}}, "domains.0.options.rewards: unknown field of env 'math'"),
    ({"name": "m", "env": "math", "reward": {"strict": 1}}, "'reward:' moved to options.reward"),
    ({"name": "m", "env": "math", "source": {"kind": "jsonl"}}, "domains.0.source: jsonl sources need 'path'"),
    ({"name": "t", "env": "terminal"}, "domains.0.source: Field required"),
    ({"name": "g", "env": "gym", "source": {"kind": "tasks", "path": "x"}}, "domains.0.source: env 'gym' takes no source: section"),
    ({"name": "c", "env": "code", "options": {"mode": "multi", "max_runs": -1}}, "domains.0.options.max_runs: Input should be greater than or equal to 0"),
])
def test_each_plugin_validates_its_own_options_and_errors_name_file_and_field(write_yaml, section, message):
    path = write_yaml({"domains": [section]})
    with pytest.raises(ConfigError) as e:
        load_config(path)
    assert str(e.value).startswith(f"{path}: invalid config:") and message in str(e.value), str(e.value)


def test_math_options_configure_the_domain(write_yaml, tmp_path):
    (tmp_path / "p.jsonl").write_text('{"question": "1 + 1 =", "answer": "2"}\n')
    cfg = load_config(write_yaml({"domains": [{"name": "m", "env": "math", "source": {"kind": "jsonl", "path": "p.jsonl", "eval_fraction": 0},
                                               "options": {"reward": {"strict": 0, "lenient": 1}}}]}))
    domain = registry.build_domain(cfg.domains[0], 0, cfg.base_dir)
    assert domain.weights.strict == 0 and domain.weights.lenient == 1  # type: ignore[attr-defined]


@pytest.mark.parametrize("env, default", [("sql", 30), ("longctx", 20), ("finance", 50), ("legal", 40),
                                          ("geometry", 20), ("scene", 40)])
def test_a_sections_eval_size_sets_the_held_out_set_of_every_domain(write_yaml, env, default):
    def held_out(section: dict) -> list:
        cfg = load_config(write_yaml({"domains": [{"name": "d", "env": env, **section}]}))
        return registry.build_domain(cfg.domains[0], 0, cfg.base_dir).source.eval_tasks()  # type: ignore[attr-defined]

    assert len(held_out({})) == default
    assert len(held_out({"eval_size": 3})) == 3
    assert len(held_out({"eval_size": 3, "options": {"eval_size": 2}})) == 2  # the plugin's own option wins
    if env == "longctx":
        a, b = held_out({"eval_size": 2}), held_out({"eval_size": 2, "eval_seed": 99})
        assert [t.id for t in a] != [t.id for t in b]


def test_verify_scores_answer_files_for_math_and_gym_and_rejects_bad_files(tmp_path):
    task = tmp_path / "task.json"
    task.write_text(json.dumps({"question": "What is 2 + 3?", "answer": "5"}))
    good, wrong, bare = tmp_path / "good.txt", tmp_path / "wrong.txt", tmp_path / "bare.txt"
    good.write_text("2 + 3 = 5, so <answer>5</answer>")
    wrong.write_text("<answer>6</answer>")
    bare.write_text("The answer is 5")
    out = runner.invoke(app, ["verify", "math", "--task", str(task), "--answer", str(good), "--json"])
    assert out.exit_code == 0, out.output
    assert json.loads(out.output) == {"value": 1.0, "components": {"strict": 1.0, "lenient": 1.0, "format": 1.0},
                                      "explanation": "answer '5' in tags; target '5'", "flags": []}
    several = runner.invoke(app, ["verify", "math", "--task", str(task), "--answer", str(wrong), "--answer", str(bare), "--json"])
    assert [r["components"] for r in json.loads(several.output)] == [
        {"strict": 0.0, "lenient": 0.0, "format": 1.0}, {"strict": 0.0, "lenient": 1.0, "format": 0.0}]
    gym_task = tmp_path / "gym.json"
    gym_task.write_text(json.dumps({"dataset": "chain_sum", "question": "4 + 4 =", "answer": "8"}))
    gym_answer = tmp_path / "eight.txt"
    gym_answer.write_text("<answer>8</answer>")
    out = runner.invoke(app, ["verify", "gym", "--task", str(gym_task), "--answer", str(gym_answer), "--json"])
    assert json.loads(out.output)["components"] == {"score": 1.0, "format": 1.0}
    task.write_text(json.dumps({"question": "What is 2 + 3?"}))
    bad = runner.invoke(app, ["verify", "math", "--task", str(task), "--answer", str(good)])
    assert bad.exit_code == 2 and f"{task}: invalid math task: answer: Field required" in bad.output.replace("\n", "")
    task.write_text("{not json")
    bad = runner.invoke(app, ["verify", "math", "--task", str(task), "--answer", str(good)])
    assert bad.exit_code == 2 and "not valid JSON" in bad.output
    missing = runner.invoke(app, ["verify", "gym", "--task", str(gym_task), "--answer", str(tmp_path / "none.txt")])
    assert missing.exit_code == 2 and "cannot read answer" in missing.output


def test_every_installed_domain_has_a_verify_command():
    out = runner.invoke(app, ["verify", "--help"], env={"COLUMNS": "200"})
    for name in plugin_names():
        assert f" {name} " in out.output


def test_envs_list_reports_every_domain_with_counts_tools_and_components():
    out = runner.invoke(app, ["envs", "list", "--json", "--draws", "20"])
    assert out.exit_code == 0, out.output
    rows = {r["name"]: r for r in json.loads(out.output)}
    assert set(rows) == set(plugin_names())
    assert rows["math"]["components"] == ["strict", "lenient", "format"] and rows["math"]["held_out"] == 200
    assert rows["code"]["held_out"] == 32 and rows["code"]["training"] == "20+" and rows["code"]["tools"] == ["python", "submit"]
    assert rows["gym"]["components"] == ["score", "format"] and rows["gym"]["tools"] == []
    assert rows["terminal"]["held_out"] is None and "source: Field required" in rows["terminal"]["problem"]
    table = runner.invoke(app, ["envs", "list"], env={"COLUMNS": "200"})
    assert "pass_rate, all_passed" in table.output


def test_envs_show_prints_sample_tasks_with_their_reference_and_its_score():
    out = runner.invoke(app, ["envs", "show", "gym", "--n", "2", "--set", "options.dataset=leg_counting", "--json"])
    assert out.exit_code == 0, out.output
    shown = json.loads(out.output)
    assert [t["verdict"]["value"] for t in shown["tasks"]] == [1.0, 1.0]
    assert any(line.startswith("dataset (default 'chain_sum')") for line in shown["options"])
    text = runner.invoke(app, ["envs", "show", "math", "--n", "1"], env={"COLUMNS": "200"})
    assert "reference: <answer>" in text.output and "score 1.000" in text.output
    bad = runner.invoke(app, ["envs", "show", "terminal"])
    assert bad.exit_code == 2 and "source: Field required" in bad.output


@pytest.mark.parametrize("name", ["deep.json", "deep.jsonl"])
def test_every_plugin_refuses_json_nested_past_the_parsers_depth_as_a_task_error(tmp_path, name):
    """json.loads raises RecursionError, not JSONDecodeError, on 5,000 nested lists: a task
    file like that is a TaskError naming the file, for every installed plugin."""
    from practicum.errors import TaskError

    deep = "[" * 5000 + "]" * 5000
    path = tmp_path / name
    path.write_text(deep if name.endswith(".json") else '{"a": 1}\n' + deep + "\n")
    for plugin in plugin_names():
        with pytest.raises(TaskError) as e:
            get_plugin(plugin).load_task(path)
        assert str(path) in str(e.value), (plugin, e.value)
