"""The pure parts of benchmarks/scaffold_products.py: the Wilson interval against hand-worked
numbers, the eval point's means, and how the two sides' configs differ (only by the scaffold),
with the scaffold's worked examples never a held-out question."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"
sys.path.insert(0, str(BENCH))
import scaffold_products as sp  # noqa: E402


def test_wilson_by_hand():
    # 15/50: p 0.3, z^2/n 0.076832, centre 0.338416/1.076832 = 0.31427,
    # half 1.96 * sqrt(0.0042 + 0.00038416) / 1.076832 = 0.12324
    lo, hi = sp.wilson(15, 50)
    assert (lo, hi) == (pytest.approx(0.19104, abs=1e-4), pytest.approx(0.43751, abs=1e-4))
    # 0/50: centre and half-width are both 0.038416/1.076832 = 0.035675
    assert sp.wilson(0, 50) == (0.0, pytest.approx(0.07135, abs=1e-4))
    assert sp.wilson(50, 50) == (pytest.approx(1 - 0.07135, abs=1e-4), 1.0)
    assert sp.wilson(0, 0) == (0.0, 1.0)


class Row:
    def __init__(self, **components: float) -> None:
        self.components = components


def test_eval_point_means_and_interval():
    rows = [Row(strict=1.0, lenient=1.0, format=1.0), Row(strict=0.0, lenient=1.0, format=0.0),
            Row(strict=0.0, lenient=0.0, format=1.0), Row(strict=0.0, lenient=0.0, format=0.0)]
    m = sp.eval_point(rows)
    assert (m["n"], m["strict"], m["lenient"], m["format"]) == (4, 0.25, 0.5, 0.5)
    assert m["strict_ci"] == list(sp.wilson(1, 4))
    assert sp.eval_point([])["n"] == 0


def test_first_reaching():
    evals = [{"minutes": 0, "strict": 0.0}, {"minutes": 5, "strict": 0.3}, {"minutes": 10, "strict": 0.31}]
    assert sp.first_reaching(evals, "strict", 0.3)["minutes"] == 10  # above, not at
    assert sp.first_reaching(evals[:2], "strict", 0.3) is None


def test_sides_differ_only_by_the_scaffold(tmp_path):
    from practicum.config import load_config

    cfgs = {s: load_config(BENCH / "scaffold_products.yaml", sp.side_overrides(s, tmp_path, 64, []))
            for s in sp.SIDES}
    assert cfgs["plain"].curriculum.scaffold == {}
    scaffold = cfgs["scaffold"].curriculum.scaffold["products"]
    assert scaffold.guided and scaffold.examples
    a, b = (cfgs[s].model_dump(mode="json") for s in sp.SIDES)
    for d in (a, b):
        d["curriculum"].pop("scaffold")
        d["run"].pop("dir")
    assert a == b
    with pytest.raises(ValueError):
        sp.side_overrides("other", tmp_path, 64, [])


def test_scaffold_examples_are_not_held_out_questions():
    from practicum.config import load_config
    from practicum.domains import build_domain

    cfg = load_config(BENCH / "scaffold_products.yaml")
    domain = build_domain(cfg.domains[0], cfg.run.seed, cfg.base_dir)
    held_out = domain.source.held_out_questions
    assert len(held_out) == cfg.domains[0].eval_size  # 50 distinct one-digit products of the 100
    examples = cfg.curriculum.scaffold["products"].examples
    assert not {ex.question for ex in examples} & held_out
    # and training never draws a held-out question
    assert not {domain.source.train_task(i).prompt[-1].content for i in range(200)} & held_out


def test_split_by_help_splits_by_the_episodes_own_mark():
    """Help is what the rollout marked on each episode: in a guided group only some episodes
    were helped, in a scaffolded (unguided) group all, in a plain group none."""
    from practicum.records import Episode, EpisodeState, Group, GroupState, Message, Score, Task

    def ep(strict: float, helped: bool) -> Episode:
        e = Episode(task_id="t", domain="products", state=EpisodeState.done,
                    score=Score(value=strict, components={"strict": strict, "lenient": 1.0, "format": strict}))
        if helped:
            e.info.extra["scaffold"] = {"prefix": "<answer>"}
        return e

    task = Task(id="t", domain="products", prompt=[Message(role="user", content="q")], target="1")
    guided = task.model_copy(update={"metadata": {"scaffold": {"prefix": "<answer>", "guided": 0.5}}})
    hinted = task.model_copy(update={"metadata": {"scaffold": {"hint": True, "prefix": None}}})
    groups = [Group(task=guided, episodes=[ep(1.0, True), ep(1.0, True), ep(0.0, False), ep(1.0, False)],
                    state=GroupState.trained),
              Group(task=hinted, episodes=[ep(1.0, True), ep(0.0, True)], state=GroupState.trained),
              Group(task=task, episodes=[ep(0.0, False), ep(0.0, False)], state=GroupState.trained)]
    split = sp.split_by_help(groups)
    assert split["help"]["n"] == 4 and split["help"]["strict"] == 0.75  # 1, 1 (guided) + 1, 0 (hinted)
    assert split["bare"]["n"] == 4 and split["bare"]["strict"] == 0.25  # 0, 1 (guided) + 0, 0 (plain)
    assert split["bare"]["lenient"] == 1.0
