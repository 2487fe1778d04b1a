"""The `practicum` command line on the tiny model: train, eval a checkpoint, clear errors."""

from __future__ import annotations

import json
import re

from typer.testing import CliRunner

from practicum.cli import app
from practicum.config import describe

runner = CliRunner()


def _flat(text: str) -> str:
    """The output without whitespace: rich wraps long lines (and paths) at the terminal width."""
    return re.sub(r"\s", "", text)


def test_help_config_lists_every_field():
    """`practicum train --help-config` prints one line per config field."""
    result = runner.invoke(app, ["train", "--help-config"])
    assert result.exit_code == 0, result.output
    for line in describe():
        name = line.split(" ", 1)[0].rstrip(":")
        assert name in result.output


def test_train_then_eval_a_checkpoint(tiny_run_config, tmp_path):
    """`practicum train` runs a config with --set overrides and reports held-out results;
    `practicum eval --checkpoint` evaluates the checkpoint it wrote, as JSON."""
    config = tiny_run_config.path
    run_dir = tmp_path / "cli-run"
    result = runner.invoke(app, ["train", str(config), "--set", f"run.dir={run_dir}", "--set", "run.steps=2",
                                 "--set", "eval.before=true", "--set", "eval.after=true"])
    assert result.exit_code == 0, result.output
    assert "held-out" in result.output and "step 2/2" in result.output
    ckpt = run_dir / "checkpoints" / "step_000002"
    assert (ckpt / "state.json").is_file()

    result = runner.invoke(app, ["eval", str(config), "--checkpoint", str(ckpt), "--json", "--limit", "2"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout.strip().splitlines()[-1])  # stdout only: stderr has progress bars
    assert out["per_domain"]["say"]["n"] == 2
    assert 0.0 <= out["per_domain"]["say"]["reward"] <= 1.0


def test_eval_prints_one_table_with_tasks_score_errors_and_seconds(tiny_run_config):
    """`practicum eval` prints one row per domain: tasks, mean score, errors, seconds, then the
    domain's components; --json carries the same counts under "domains"."""
    config = str(tiny_run_config.path)
    result = runner.invoke(app, ["eval", config, "--limit", "2"], terminal_width=200)
    assert result.exit_code == 0, result.output
    header = next(line for line in result.stdout.splitlines() if "mean score" in line)
    cols = [c.strip() for c in header.strip("┃│ ").replace("┃", "│").split("│")]
    assert cols[:5] == ["domain", "tasks", "mean score", "errors", "seconds"] and "reward" not in cols
    row = next(line for line in result.stdout.splitlines() if line.startswith("│ say"))
    cells = [c.strip() for c in row.strip("│ ").split("│")]
    assert cells[0] == "say" and cells[1] == "2" and cells[3] == "0"  # domain, tasks, errors

    result = runner.invoke(app, ["eval", config, "--limit", "2", "--json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout.strip().splitlines()[-1])
    say = out["domains"]["say"]
    assert (say["tasks"], say["errors"], say["error_kinds"]) == (2, 0, {}) and say["seconds"] > 0


def test_bad_config_exits_with_a_clear_error(write_yaml):
    """A config error exits with status 2 and a message naming the file and field, no traceback."""
    path = write_yaml({"domains": [{"name": "a", "source": {"kind": "jsonl", "path": "x.jsonl"}}],
                       "rollout": {"group_sise": 4}})
    result = runner.invoke(app, ["train", str(path)])
    assert result.exit_code == 2
    assert str(path) in _flat(result.output) and "rollout.group_sise" in result.output
    assert "Traceback" not in result.output


def test_train_without_config_says_what_to_give():
    """`practicum train` alone exits with status 2 and an example command."""
    result = runner.invoke(app, ["train"])
    assert result.exit_code == 2
    assert "practicum train examples/quickstart.yaml" in result.output
