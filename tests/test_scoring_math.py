"""Answer extraction, the math environment's score components, and the math task sources."""

from __future__ import annotations

import asyncio
import json

import pytest

from practicum.domains.math.env import DEFAULT_SYSTEM_PROMPT, JsonlMathSource, MathDomain, MathEnv, ReasoningGymSource
from practicum.errors import TaskError
from practicum.scoring import RewardWeights, extract_answer

CHAIN_SUM = {"min_terms": 2, "max_terms": 2, "min_digits": 1, "max_digits": 2}


@pytest.mark.parametrize(
    "reply, strict, lenient, formatted",
    [
        ("<answer>42</answer>", "42", "42", True),
        ("so the sum is <answer> -7 </answer>.", "-7", "-7", True),  # stripped
        ("<answer>\n12\n</answer>", "12", "12", True),  # content may span lines
        ("<answer>-3</answer> but maybe 5", "-3", "-3", True),  # the tag wins over later numbers
        ("I think 7, no, 8", None, "8", False),  # no tag: last number
        ("<answer>1</answer><answer>2</answer> 9", None, "9", False),  # two tags: not the format
        ("<answer> </answer> 4", None, "4", False),  # empty tag: not the format
        ("<answer>5", None, "5", False),  # unclosed tag
        ("total: 1,000 or 2.50", None, "2.50", False),
        ("no idea", None, None, False),
        ("", None, None, False),
    ],
)
def test_extract_answer(reply, strict, lenient, formatted):
    """Strict = the one non-empty <answer> pair; lenient = strict, else the last number."""
    ex = extract_answer(reply)
    assert (ex.strict, ex.lenient, ex.formatted) == (strict, lenient, formatted)


def test_reward_weights_combine_normalises():
    """value = sum(weight * component) / sum(weights), within [0, 1]."""
    w = RewardWeights(strict=2.0, lenient=1.0, format=1.0)
    assert w.combine({"strict": 1.0, "lenient": 1.0, "format": 1.0}) == pytest.approx(1.0)  # 4 / 4
    assert w.combine({"strict": 0.0, "lenient": 1.0, "format": 0.0}) == pytest.approx(0.25)  # 1 / 4
    assert w.combine({"strict": 1.0, "lenient": 1.0, "format": 0.0}) == pytest.approx(0.75)  # 3 / 4
    with pytest.raises(ValueError):
        RewardWeights(0.0, 0.0, 0.0).combine({"strict": 1.0, "lenient": 1.0, "format": 1.0})


@pytest.fixture(scope="module")
def chain_sum() -> ReasoningGymSource:
    return ReasoningGymSource("arith", "chain_sum", CHAIN_SUM, DEFAULT_SYSTEM_PROMPT, seed=0,
                              eval_seed=10_000_019, eval_size=200)


def _score(env: MathEnv, task, reply: str):
    async def go():
        await env.reset(task)
        return await env.step(reply)

    obs = asyncio.run(go())
    assert obs.done and obs.messages == []
    return obs.score


def test_math_env_score_components_on_chain_sum(chain_sum):
    """strict/lenient/format components and their weighted value, on hand-written replies."""
    task = chain_sum.train_task(0)
    target = int(task.target)
    wrong = target + 1
    env = MathEnv("arith", chain_sum, RewardWeights(strict=2.0, lenient=1.0, format=1.0))
    cases = [
        # reply                                       strict lenient format  value (weights 2:1:1)
        (f"<answer>{target}</answer>", 1.0, 1.0, 1.0, 4 / 4),
        (f"the result is {target}", 0.0, 1.0, 0.0, 1 / 4),  # right number, no tags
        (f"<answer>{wrong}</answer>", 0.0, 0.0, 1.0, 1 / 4),  # format only
        (f"<answer>{wrong}</answer> oops, {target}", 0.0, 0.0, 1.0, 1 / 4),  # a tag is read strictly
        (f"{target} or maybe {wrong}", 0.0, 0.0, 0.0, 0.0),  # the last number is wrong
        ("", 0.0, 0.0, 0.0, 0.0),
    ]
    for reply, strict, lenient, fmt, value in cases:
        score = _score(env, task, reply)
        assert score.components == {"strict": strict, "lenient": lenient, "format": fmt}, reply
        assert score.value == pytest.approx(value), reply
        assert str(task.target) in score.explanation


def test_math_env_uses_the_tasks_own_target(chain_sum):
    """Two different tasks: each reply is right for its own task only."""
    a = chain_sum.train_task(1)
    b = next(chain_sum.train_task(i) for i in range(2, 50) if chain_sum.train_task(i).target != a.target)
    env = MathDomain("arith", chain_sum, RewardWeights()).make_env()
    assert _score(env, a, f"<answer>{a.target}</answer>").value == pytest.approx(1.0)
    assert _score(env, b, f"<answer>{a.target}</answer>").components["strict"] == 0.0


def test_reasoning_gym_tasks_are_pure_functions_of_index(chain_sum):
    """The same index gives the same task, from a fresh source too (resume relies on this)."""
    again = ReasoningGymSource("arith", "chain_sum", CHAIN_SUM, DEFAULT_SYSTEM_PROMPT, seed=0,
                               eval_seed=10_000_019, eval_size=200)
    for i in (0, 7, 12345):
        assert chain_sum.train_task(i) == again.train_task(i)
    assert chain_sum.eval_tasks() == again.eval_tasks()
    assert chain_sum.train_task(0).prompt[0].content == DEFAULT_SYSTEM_PROMPT


def test_reasoning_gym_held_out_questions_never_appear_in_training(chain_sum):
    """No question of the held-out set occurs among 2000 training tasks, although the raw
    training stream does repeat some of them (so the filter is what keeps them apart)."""
    held_out = {t.prompt[-1].content for t in chain_sum.eval_tasks()}
    assert len(held_out) == len(chain_sum.eval_tasks()) == 200  # no duplicates inside the eval set
    train = [chain_sum.train_task(i) for i in range(2000)]
    assert not held_out & {t.prompt[-1].content for t in train}
    raw_collisions = [i for i in range(2000) if chain_sum.train_ds[i]["question"] in held_out]
    assert raw_collisions, "the test needs a generator whose raw stream meets the held-out set"
    for i in raw_collisions:  # those indices were replaced by another candidate, not dropped
        assert train[i].id != f"chain_sum/train/{i}"
    assert len({t.id for t in train}) == 2000


def test_reasoning_gym_bad_dataset_or_params_is_a_task_error():
    """An unknown generator or parameters it rejects raise TaskError naming them."""
    with pytest.raises(TaskError, match="no_such_generator"):
        ReasoningGymSource("x", "no_such_generator", {}, "", 0, 1, 10)
    with pytest.raises(TaskError, match="chain_sum"):
        ReasoningGymSource("x", "chain_sum", {"min_terms": 5, "max_terms": 2}, "", 0, 1, 10)


def _jsonl(tmp_path, rows: list) -> object:
    path = tmp_path / "tasks.jsonl"
    path.write_text("\n".join(r if isinstance(r, str) else json.dumps(r) for r in rows) + "\n")
    return path


def _jsonl_env(tmp_path, answers: list[str]) -> tuple[JsonlMathSource, MathEnv]:
    rows = [{"question": f"q{i}", "answer": a} for i, a in enumerate(answers)]
    src = JsonlMathSource("m", _jsonl(tmp_path, rows), "", seed=0, eval_fraction=0.0)
    return src, MathEnv("m", src, RewardWeights())


def test_jsonl_latex_answers_are_verified_mathematically(tmp_path):
    """math-verify compares values, not strings: \\frac{1}{2} = 0.5 = 1/2, but not 0.4."""
    src, env = _jsonl_env(tmp_path, ["\\frac{1}{2}", "12"])
    half, twelve = src.train_task(0), src.train_task(1)
    if half.target != "\\frac{1}{2}":
        half, twelve = twelve, half
    for reply, right in [("<answer>0.5</answer>", True), ("<answer>1/2</answer>", True),
                         ("<answer>\\frac{1}{2}</answer>", True), ("<answer>0.4</answer>", False)]:
        assert _score(env, half, reply).components["strict"] == float(right), reply
    assert _score(env, twelve, "<answer>12</answer>").value == pytest.approx(1.0)
    assert _score(env, twelve, "<answer>13</answer>").components["strict"] == 0.0


@pytest.mark.parametrize(
    "gold, reply, right",
    [
        ("\\sqrt{2}", "\\sqrt{2}", True),  # a LaTeX gold answer without $...$ must still parse
        ("\\dfrac{3}{4}", "0.75", True),
        ("2\\sqrt{3}", "2", False),  # must not be read as its leading "2"
        ("2\\sqrt{3}", "2\\sqrt{3}", True),
    ],
)
def test_jsonl_latex_gold_answers_without_delimiters(tmp_path, gold, reply, right):
    """Task files hold bare LaTeX answers; they must be parsed as math, not as stray text."""
    src, env = _jsonl_env(tmp_path, [gold])
    assert _score(env, src.train_task(0), f"<answer>{reply}</answer>").components["strict"] == float(right)


def test_jsonl_split_and_sampling(tmp_path):
    """The leading eval_fraction is held out; each epoch of train_task visits every training
    task once, in an order that is a pure function of (seed, epoch)."""
    rows = [{"question": f"what is {i} + 1?", "answer": str(i + 1), "id": f"row{i}"} for i in range(10)]
    path = _jsonl(tmp_path, rows)
    src = JsonlMathSource("m", path, "sys", seed=3, eval_fraction=0.2)
    assert [t.id for t in src.eval_tasks()] == ["row0", "row1"]
    epoch0 = [src.train_task(i).id for i in range(8)]
    assert sorted(epoch0) == [f"row{i}" for i in range(2, 10)]
    again = JsonlMathSource("m", path, "sys", seed=3, eval_fraction=0.2)
    assert [again.train_task(i).id for i in range(16)] == [src.train_task(i).id for i in range(16)]
    assert src.train_task(0).prompt[0].content == "sys"


@pytest.mark.parametrize(
    "bad, line",
    [
        ('{"question": "1+1", "answer": ', 2),  # not JSON
        ('{"question": "1+1"}', 2),  # no answer
        ('["1+1", "2"]', 2),  # not an object
    ],
)
def test_jsonl_malformed_line_names_file_and_line(tmp_path, bad, line):
    """A malformed line raises TaskError naming the file and the line number."""
    path = _jsonl(tmp_path, [{"question": "2+2", "answer": "4"}, bad, {"question": "3+3", "answer": "6"}])
    with pytest.raises(TaskError) as info:
        JsonlMathSource("m", path, "", 0, 0.2)
    assert f"{path}:{line}" in str(info.value)


def test_jsonl_missing_or_empty_file_is_a_task_error(tmp_path):
    """No file, or a file without tasks, is a TaskError naming the file."""
    with pytest.raises(TaskError, match="nope.jsonl"):
        JsonlMathSource("m", tmp_path / "nope.jsonl", "", 0, 0.2)
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n\n")
    with pytest.raises(TaskError, match="empty.jsonl"):
        JsonlMathSource("m", empty, "", 0, 0.2)


def test_closeness_is_partial_credit_reported_beside_the_score_never_in_it(tmp_path):
    """With closeness on, a tagged number earns 1 / (1 + |answer - target|): 1 right, 0.5 one off,
    0.2 four off, 0.1 nine off (on a decimal target too); 0 without a tagged number, and for
    a target that is not a number. The score's value is what it is without closeness."""
    rows = [{"question": "12?", "answer": "12"}, {"question": "6.5?", "answer": "6.5"},
            {"question": "half?", "answer": "\\frac{1}{2}"}]
    src = JsonlMathSource("m", _jsonl(tmp_path, rows), "", seed=0, eval_fraction=0.0)
    plain, close = MathEnv("m", src, RewardWeights()), MathEnv("m", src, RewardWeights(), with_closeness=True)
    task = {t.target: t for t in (src.train_task(i) for i in range(3))}
    twelve, decimal, half = task["12"], task["6.5"], task["\\frac{1}{2}"]
    for reply, want in [("<answer>12</answer>", 1.0), ("<answer>13</answer>", 0.5), ("<answer>8</answer>", 0.2),
                        ("<answer>21</answer>", 0.1), ("<answer>-12</answer>", 1 / 25),
                        ("the answer is 12", 0.0),  # right leniently, but no tagged number to be near
                        ("<answer>twelve</answer>", 0.0)]:
        got = _score(close, twelve, reply)
        assert got.components["closeness"] == pytest.approx(want), reply
        assert got.value == _score(plain, twelve, reply).value, reply
        assert "closeness" not in _score(plain, twelve, reply).components
    assert _score(close, decimal, "<answer>6.4</answer>").components["closeness"] == pytest.approx(1 / 1.1)
    assert _score(close, decimal, "<answer>6.50</answer>").components["closeness"] == 1.0  # right by value
    assert _score(close, half, "<answer>0.5</answer>").components["closeness"] == 1.0  # right: math-verify says so
    assert _score(close, half, "<answer>0.4</answer>").components["closeness"] == 0.0  # a LaTeX target: no distance


def test_closeness_feeds_the_curriculums_partial_credit(tmp_path):
    """The math env's own scores through shaping {partial: 0.3, partial_key: closeness}: an
    all-wrong group is ranked by nearness (one off above nine off), where without closeness its
    replies all shape alike; a right reply gets the full 0.3."""
    from practicum.curriculum.shaping import Attempt, ShapingConfig, shape_group

    src = JsonlMathSource("m", _jsonl(tmp_path, [{"question": "12?", "answer": "12"}]), "", seed=0, eval_fraction=0.0)
    task = src.train_task(0)
    cfg = ShapingConfig(correctness=1.0, format=0.5, partial=0.3, partial_key="closeness")
    replies = ["<answer>13</answer>", "<answer>21</answer>", "<answer>12</answer>"]

    def shaped(env: MathEnv) -> list[float]:
        attempts = [Attempt(reply=r, tokens=5, score=_score(env, task, r)) for r in replies]
        return [x.total for x in shape_group(attempts, cfg, max_tokens=48)]

    near, far, right = shaped(MathEnv("m", src, RewardWeights(), with_closeness=True))
    assert near == pytest.approx(0.5 + 0.3 * 0.5) and far == pytest.approx(0.5 + 0.3 * 0.1)
    assert right == pytest.approx(1.0 + 0.5 + 0.3)
    assert shaped(MathEnv("m", src, RewardWeights()))[:2] == [0.5, 0.5]  # without it: nothing to rank by
