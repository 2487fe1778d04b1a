"""Hidden checks: flatten keeps the full path; unflatten inverts it."""

import json
import random
import subprocess
import sys

sys.path.insert(0, "/app")

from confkit import flatten, unflatten  # noqa: E402


def test_deep_keys():
    assert flatten({"a": {"b": {"c": 1, "d": {"e": [1, 2]}}}, "f": 0}) == {"a.b.c": 1, "a.b.d.e": [1, 2], "f": 0}


def test_empty_dict_leaf():
    cfg = {"a": {"b": {}}, "c": {"d": {"e": {}}}}
    assert flatten(cfg) == {"a.b": {}, "c.d.e": {}}
    assert unflatten(flatten(cfg)) == cfg


def test_roundtrip_random():
    rng = random.Random(3)

    def make(depth):
        return {f"k{i}": (make(depth + 1) if depth < 5 and rng.random() < 0.5 else rng.randrange(100))
                for i in range(rng.randrange(1, 4))}

    for _ in range(200):
        cfg = make(0)
        assert unflatten(flatten(cfg)) == cfg


def test_cli(tmp_path):
    p = tmp_path / "c.json"
    p.write_text(json.dumps({"z": {"y": {"x": "v"}}, "a": {"b": True}}))
    out = subprocess.run([sys.executable, "-m", "confkit", str(p)], cwd="/app", capture_output=True, text=True,
                         timeout=30)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["a.b=true", 'z.y.x="v"']
