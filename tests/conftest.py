"""Shared fixtures: the tiny checkpoint, the quickstart config, and config-file helpers."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

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
