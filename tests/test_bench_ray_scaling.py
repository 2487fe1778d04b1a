"""benchmarks/ray_scaling.py's pure parts: every side's config validates and differs from the
in-process one only by the distributed section; the report's ratios by hand."""

from __future__ import annotations

import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"
sys.path.insert(0, str(BENCH))

import ray_scaling as rs  # noqa: E402


def test_sides_differ_only_in_where_they_run(tmp_path):
    from practicum.config import load_config

    args = rs.parse_args(["--out", str(tmp_path / "r.json")])
    path = tmp_path / "c.yaml"
    path.write_text(rs.config_text())
    cfgs = {s: load_config(path, rs.side_overrides(s, args, tmp_path)) for s in rs.SIDES}
    assert cfgs["local"].distributed.backend == "local"
    assert [cfgs[s].distributed.rollout_workers for s in ("ray1", "ray2", "ray4")] == [1, 2, 4]
    dumps = {s: c.model_dump(mode="json") for s, c in cfgs.items()}
    for d in dumps.values():
        d.pop("distributed")
        d["run"].pop("dir")
    assert all(d == dumps["local"] for d in dumps.values())


def test_report_ratios_and_overheads():
    side = lambda eps, secs, probe: {"episodes": eps, "seconds": secs, "episodes_per_s": eps / secs,  # noqa: E731
                                     "seconds_per_episode": secs / eps, "probe_median_ms": probe, "startup_seconds": 1.0}
    result = {"sides": {"local": side(100, 50.0, 20.0), "ray1": side(100, 55.0, 24.0), "ray2": side(100, 40.0, 25.0)},
              "settings": {"prompts": 8, "group": 4, "tokens": 96, "steps": 6, "warmup": 2},
              "machine": rs.machine_info(), "command": "c"}
    text = rs.report(result)
    assert "| ray1 | 1 | 100 | 55.0 | 1.82 | 0.91 | 50 | 24.0 | 4.0 |" in text
    assert "| ray2 | 2 | 100 | 40.0 | 2.50 | 1.25 | -100 | 25.0 | 5.0 |" in text
