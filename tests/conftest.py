"""Shared fixtures: the tiny checkpoint, the quickstart config, and config-file helpers."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def quickstart_path() -> Path:
    """examples/quickstart.yaml, the config the README runs."""
    return REPO / "examples" / "quickstart.yaml"


@pytest.fixture(scope="session")
def tiny_model_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny random LlamaForCausalLM + word-level tokenizer, written once per session.

    Tests must not modify it; a test that needs its own copy calls make_tiny_model itself.
    """
    from practicum.testing import make_tiny_model

    return make_tiny_model(tmp_path_factory.mktemp("tiny-model"))


@pytest.fixture
def write_yaml(tmp_path: Path) -> Callable[[object, str], Path]:
    """Write a Python object (or raw text) as a YAML file under tmp_path and return its path."""

    def write(data: object, name: str = "config.yaml") -> Path:
        path = tmp_path / name
        path.write_text(data if isinstance(data, str) else yaml.safe_dump(data, sort_keys=False))
        return path

    return write


@pytest.fixture
def tiny_run_config(tmp_path: Path, tiny_model_path: Path) -> Callable[..., Any]:
    """A run config for the tiny model on a JSONL domain whose questions use its vocabulary."""
    rows = [{"question": f"say {d}", "answer": d} for d in "0123456789"]
    (tmp_path / "say.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    config = {
        "run": {"name": "tiny", "seed": 1, "steps": 4, "checkpoint_every": 2, "keep_checkpoints": 2},
        "model": {"name": str(tiny_model_path), "engine_dtype": "float32"},
        "domains": [{"name": "say", "source": {"kind": "jsonl", "path": "say.jsonl", "eval_fraction": 0.3},
                     "system_prompt": "", "options": {"reward": {"strict": 0.0, "lenient": 1.0, "format": 0.0}}}],
        "rollout": {"prompts_per_step": 3, "group_size": 6, "max_new_tokens": 6, "temperature": 1.0},
        "trainer": {"lr": 0.01, "autocast_dtype": "none"},
        "eval": {"before": False, "after": False, "max_new_tokens": 6},
    }
    path = tmp_path / "tiny.yaml"
    path.write_text(json.dumps(config))  # JSON is YAML

    def load(run_dir: str, *overrides: str):  # -> RunConfig
        from practicum.config import load_config

        return load_config(path, [f"run.dir={tmp_path / run_dir}", *overrides])

    load.path = path  # type: ignore[attr-defined]
    return load


# Under CI=true a test whose real component is missing fails instead of skipping: a green run
# must mean the sandbox, ../shared/ and the embedded model were really there. Skips for other
# reasons (an optional GPU backend, say) stay skips.
REAL_COMPONENTS = ("isolated sandbox unavailable", "PRACTICUM_SHARED", "shared/", "not present", "embedded model")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if os.environ.get("CI") != "true" or not report.skipped or getattr(report, "wasxfail", None) is not None:
        return
    reason = str(report.longrepr[-1]) if isinstance(report.longrepr, tuple) else str(report.longrepr)
    if any(key in reason for key in REAL_COMPONENTS):
        report.outcome = "failed"
        report.longrepr = f"CI=true: a real component is missing, so this test fails instead of skipping: {reason}"
