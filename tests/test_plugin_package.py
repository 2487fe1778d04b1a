"""A third-party domain as its own package (examples/plugin_domain): installed with pip, found
through its entry point, trained on for a step, listed and verified like a built-in domain."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """examples/plugin_domain pip-installed (offline, no dependencies) into a folder of its own."""
    work = tmp_path_factory.mktemp("plugin")
    shutil.copytree(REPO / "examples" / "plugin_domain", work / "pkg", ignore=shutil.ignore_patterns("build", "*.egg-info"))
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation", "--no-index",
                    "--target", str(work / "site"), str(work / "pkg")], check=True, capture_output=True, timeout=300)
    return work / "site"


def test_the_installed_package_registers_a_domain_that_trains_a_step(site, tmp_path, tiny_model_path, monkeypatch):
    from practicum.config import validate_config
    from practicum.domains import get_plugin, plugin_names, plugin_origin
    from practicum.loop import train

    monkeypatch.syspath_prepend(str(site))
    assert "spelldigits" in plugin_names()
    assert plugin_origin("spelldigits") == "practicum_spelldigits:plugin (practicum-spelldigits 0.1.0)"
    assert get_plugin("spelldigits").components == ("words", "exact")
    cfg = validate_config({
        "run": {"name": "spell", "dir": str(tmp_path / "run"), "seed": 1, "steps": 1, "checkpoint_every": 1},
        "model": {"name": str(tiny_model_path), "engine_dtype": "float32"},
        "domains": [{"name": "spell", "env": "spelldigits", "options": {"min_digits": 1, "max_digits": 2},
                     "eval_size": 4}],
        "rollout": {"prompts_per_step": 2, "group_size": 4, "max_new_tokens": 4},
        "trainer": {"lr": 0.01, "autocast_dtype": "none"},
        "eval": {"before": True, "after": False, "max_new_tokens": 4},
    }, "spell.yaml")
    result = train(cfg, log=lambda line: None)
    assert result.steps_done == 1 and result.before is not None
    (step,) = result.history
    # the per-domain metrics are the plugin's declared components, not any built-in domain's
    assert {"spell/reward", "spell/words", "spell/exact"} <= set(step) and "spell/strict" not in step
    assert 0.0 <= step["spell/words"] <= 1.0 and result.before.per_domain["spell"]["n"] == 4
    with pytest.raises(Exception, match=r"domains.0.options.max_digits: Input should be less than or equal to 9"):
        validate_config({"domains": [{"name": "s", "env": "spelldigits", "options": {"max_digits": 12}}]}, "spell.yaml")


def test_the_cli_lists_and_verifies_the_installed_domain(site, tmp_path):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]), "COLUMNS": "200"}
    task, reply = tmp_path / "task.json", tmp_path / "reply.txt"
    task.write_text(json.dumps({"digits": "731"}))
    reply.write_text("seven three one one")

    def practicum(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "practicum.cli", *args], env=env, capture_output=True, text=True, timeout=300)

    verified = practicum("verify", "spelldigits", "--task", str(task), "--answer", str(reply), "--json")
    assert verified.returncode == 0, verified.stderr
    assert json.loads(verified.stdout) == {"value": 0.75, "components": {"words": 0.75, "exact": 0.0},
                                           "explanation": "3 of 3 words right, 1 extra", "flags": ["extra_words"]}
    shown = practicum("envs", "show", "spelldigits", "--n", "2", "--json")
    assert [t["verdict"]["value"] for t in json.loads(shown.stdout)["tasks"]] == [1.0, 1.0]
    task.write_text(json.dumps({"digits": "7a"}))
    bad = practicum("verify", "spelldigits", "--task", str(task), "--answer", str(reply))
    assert bad.returncode == 2 and f"{task}: invalid spelldigits task: digits: String should match pattern" in bad.stdout.replace("\n", "")
