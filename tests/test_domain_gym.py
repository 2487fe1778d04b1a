"""The gym domain: every offline reasoning-gym generator builds, its reference answers score 1
through training's environment and through `verify`, and wrong answers do not."""

from __future__ import annotations

import asyncio
import json

import pytest

from practicum.config import DomainSection, validate_config
from practicum.domains import build_domain, get_plugin
from practicum.domains.gym import GymDomain, offline_generators
from practicum.errors import ConfigError, TaskError

# Generators whose entries carry no answer at all (any valid solution scores): nothing to check.
NO_REFERENCE = {"boxnet", "rush_hour"}


def gym_domain(dataset: str, **options) -> GymDomain:
    section = DomainSection.model_validate({"name": dataset, "env": "gym", "eval_size": 1,
                                            "options": {"dataset": dataset, "size": 200, **options}})
    return build_domain(section, seed=0)  # type: ignore[return-value]


def episode_score(domain: GymDomain, task, reply: str):
    async def run():
        env = domain.make_env()
        await env.reset(task)
        return (await env.step(reply)).score

    return asyncio.run(run())


def test_every_offline_generator_builds_and_its_reference_scores_1():
    """105 generators (all but composite, which only mixes others); one training and one held-out
    task of each, scored by the episode (the run's own dataset) and by `verify` (drawn again)."""
    plugin = get_plugin("gym")
    names = offline_generators()
    assert len(names) == 105 and "composite" not in names
    missing, wrong = set(), {}
    for name in names:
        domain = gym_domain(name)
        for task in (domain.source.train_task(0), *domain.source.eval_tasks()):
            ref = task.metadata["reference"]
            if ref is None:
                missing.add(name)
                continue
            trained = episode_score(domain, task, ref).value
            verified = asyncio.run(plugin.verify(task, ref, None)).score.value  # type: ignore[arg-type]
            if trained < 1.0 or verified < 1.0:
                wrong[task.id] = (trained, verified)
    assert wrong == {}
    assert missing == NO_REFERENCE


def test_wrong_answers_score_below_1_and_the_format_is_a_component():
    domain = gym_domain("chain_sum")
    task = domain.source.train_task(0)
    answer = int(task.target)
    right_tagged = episode_score(domain, task, f"so <answer>{answer}</answer>")
    right_bare = episode_score(domain, task, f"thinking...\n{answer}")
    off_by_one = episode_score(domain, task, f"<answer>{answer + 1}</answer>")
    two_tags = episode_score(domain, task, f"<answer>{answer}</answer> or <answer>{answer + 1}</answer>")
    assert right_tagged.components == {"score": 1.0, "format": 1.0} and right_tagged.value == 1.0
    assert right_bare.components == {"score": 1.0, "format": 0.0}
    assert off_by_one.value == 0.0 and off_by_one.components["format"] == 1.0
    assert two_tags.components["format"] == 0.0  # the last line is then read, not either tag
    weighted = gym_domain("chain_sum", format_weight=0.2)
    assert episode_score(weighted, task, f"<answer>{answer + 1}</answer>").value == pytest.approx(0.2)


def test_held_out_questions_never_occur_in_training():
    domain = gym_domain("basic_arithmetic")
    held_out = {t.prompt[-1].content for t in domain.source.eval_tasks()}
    assert not held_out & {domain.source.train_task(i).prompt[-1].content for i in range(300)}


def test_a_run_mixes_generators_by_name_and_bad_options_name_the_field():
    raw = {"domains": [{"name": n, "env": "gym", "options": {"dataset": n}} for n in ("chain_sum", "leg_counting", "sudoku")]}
    cfg = validate_config(raw, "mix.yaml")
    assert [build_domain(d, 0).source.dataset_name for d in cfg.domains] == ["chain_sum", "leg_counting", "sudoku"]
    with pytest.raises(ConfigError, match=r"mix.yaml: invalid config:\n  domains.0.options.dataset: reasoning-gym has no generator 'chain_sun'; did you mean chain_sum"):
        validate_config({"domains": [{"name": "g", "env": "gym", "options": {"dataset": "chain_sun"}}]}, "mix.yaml")
    with pytest.raises(ConfigError, match=r"domains.0.options: reasoning-gym 'chain_sum' rejects params \{'min_terms': 0\}"):
        validate_config({"domains": [{"name": "g", "env": "gym", "options": {"dataset": "chain_sum", "params": {"min_terms": 0}}}]}, "mix.yaml")


def test_task_files_an_entry_or_an_index_and_bad_ones_name_the_file(tmp_path):
    plugin = get_plugin("gym")
    drawn = tmp_path / "drawn.json"
    drawn.write_text(json.dumps({"dataset": "rearc", "index": 2}))
    task = plugin.load_task(drawn)
    ref = task.metadata["reference"]
    # rearc's scorer compares tuples: the task is drawn again rather than read from its JSON copy
    assert asyncio.run(plugin.verify(task, ref, None)).score.value == 1.0  # type: ignore[arg-type]
    entry = tmp_path / "entry.json"
    entry.write_text(json.dumps({"dataset": "chain_sum", "question": "2 + 3 =", "answer": "5", "metadata": {}}))
    task = plugin.load_task(entry)
    assert asyncio.run(plugin.verify(task, "<answer>5</answer>", None)).score.value == 1.0  # type: ignore[arg-type]
    assert asyncio.run(plugin.verify(task, "<answer>6</answer>", None)).score.value == 0.0  # type: ignore[arg-type]
    for bad, message in [({"dataset": "chain_sum"}, "give either an entry"),
                         ({"dataset": "nope", "index": 1}, "dataset: reasoning-gym has no generator 'nope'"),
                         ({"dataset": "chain_sum", "index": 1, "colour": 1}, "colour: Extra inputs are not permitted")]:
        entry.write_text(json.dumps(bad))
        with pytest.raises(TaskError, match=f"{entry}: invalid gym task: .*{message}"):
            plugin.load_task(entry)
