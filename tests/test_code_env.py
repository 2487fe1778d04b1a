"""The code domain: task files and their errors, reading code out of replies, and whole
single-turn and multi-turn episodes with a scripted engine, scored in real sandboxes."""

from __future__ import annotations

import asyncio
import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from practicum.cli_verify import verify_app
from practicum.domains.code.env import CodeDomain, CodeEnvConfig, CodeSource, extract_code
from practicum.domains.code.tasks import humaneval_tasks, load_tasks
from practicum.engines.base import SamplingParams
from practicum.engines.scripted import ScriptedEngine
from practicum.errors import TaskError
from practicum.records import EpisodeState
from practicum.rollout import run_episodes, run_groups
from practicum.verify import CodeVerifier

REPO = Path(__file__).resolve().parents[1]
TASKS = REPO / "tasks" / "code"
HACKS = Path(__import__("os").environ.get("PRACTICUM_SHARED", REPO.parent / "shared")) / "hostile" / "reward_hacks"
runner = CliRunner()


@pytest.fixture(scope="module")
def sandbox():
    from practicum.sandbox import get_sandbox

    return get_sandbox("auto")


# --- task files ------------------------------------------------------------------------------

def test_shipped_tasks_load_from_a_folder_of_files_and_task_folders():
    tasks = load_tasks(TASKS)
    ids = [t.id for t in tasks]
    assert "add_numbers" in ids and "easy/add" in ids and len(ids) == len(set(ids)) == 17
    folder = next(t for t in tasks if t.id == "add_numbers")
    assert set(folder.pytest_files()) == {"test_add_numbers.py"} and folder.test is not None
    assert folder.correct_solution is not None and "def add_numbers" in folder.correct_solution
    assert folder.examples[0].input == "add_numbers([1, 2, 3])"
    hidden = folder.hidden()
    assert hidden.prompt_code is None  # a prose prompt is not run before the tests
    easy = next(t for t in tasks if t.id == "easy/add")
    assert easy.hidden().prompt_code == easy.prompt and easy.hidden().check == easy.test


def test_the_reward_hack_task_shape_loads():
    (task,) = load_tasks(HACKS / "eq_always_true" / "task.json")
    assert task.id == "eq_always_true"
    assert task.entry_point == "add" and task.test and task.test_pytest and task.correct_solution
    assert set(task.hidden().pytest_files) == {"test_hidden.py"}


def test_humaneval_ships_all_164_problems_with_their_field_names_mapped():
    tasks = humaneval_tasks()
    assert len(tasks) == 164 and tasks[0].id == "HumanEval/0"
    assert all(t.test and "def check(" in t.test for t in tasks)
    assert tasks[0].correct_solution.startswith(tasks[0].prompt)


@pytest.mark.parametrize("content, message", [
    ('{"prompt": "x", "entry_point": "f", "test": "def check(c):\\n    assert c()\\n"}\nnot json\n', r"bad\.jsonl:2: not valid JSON"),
    ('{"prompt": "x", "test": "def check(c): pass"}\n', r"bad\.jsonl:1: invalid code task: entry_point: Field required"),
    ('{"prompt": "x", "entry_point": "f"}\n', r"bad\.jsonl:1: .*needs hidden tests"),
    ('{"prompt": "x", "entry_point": "f", "test": "def check(c):\\n  assert ("}\n', r"bad\.jsonl:1: .*not valid Python"),
    ('{"prompt": "x", "entry_point": "f", "test": "assert True"}\n', r"must define check\(candidate\)"),
    ('{"prompt": "x", "entry_point": "not a name", "test": "def check(c): pass"}\n', r"not a Python name"),
    ('{"prompt": "x", "entry_point": "f", "test": "def check(c): pass", "colour": 1}\n', r"colour: Extra inputs"),
    ('[1, 2]\n', r"bad\.jsonl:1: a code task must be a JSON object"),
    ('{"id": "a", "prompt": "x", "entry_point": "f", "test": "def check(c): pass"}\n' * 2, r"task id 'a' occurs twice"),
    ("\n\n", r"bad\.jsonl: no tasks"),
])
def test_malformed_task_files_raise_task_errors_naming_the_file(tmp_path, content, message):
    path = tmp_path / "bad.jsonl"
    path.write_text(content)
    with pytest.raises(TaskError, match=message) as e:
        load_tasks(path)
    assert str(path) in str(e.value)


def test_malformed_task_folders_and_paths(tmp_path):
    with pytest.raises(TaskError, match="no such task file"):
        load_tasks(tmp_path / "missing.json")
    with pytest.raises(TaskError, match="no code tasks"):
        load_tasks(tmp_path)
    folder = tmp_path / "t1"
    folder.mkdir()
    (folder / "task.json").write_text("{broken")
    with pytest.raises(TaskError, match=re.escape(str(folder / "task.json")) + ": not valid JSON"):
        load_tasks(tmp_path)
    (folder / "task.json").write_text(json.dumps({"prompt": "p", "entry_point": "f"}))
    (folder / "tests").mkdir()
    (folder / "tests" / "test_f.py").write_text("def test_x(:\n")
    with pytest.raises(TaskError, match=r"task\.json: .*test_f\.py is not valid Python"):
        load_tasks(folder)
    (folder / "tests" / "test_f.py").write_bytes(b"\xff\xfe not utf-8")
    with pytest.raises(TaskError, match=r"test_f\.py: cannot read it"):
        load_tasks(folder)
    (folder / "tests" / "test_f.py").write_text("def test_x():\n    assert f() == 1\n")
    (folder / "task.json").write_text(json.dumps({"prompt": "p", "entry_point": "f", "tests": ["a.py"]}))
    with pytest.raises(TaskError, match="'tests' must be an object"):
        load_tasks(folder)


# --- replies -----------------------------------------------------------------------------------

def test_extract_code_prefers_the_block_defining_the_entry_point():
    reply = "Here:\n```python\ndef f(x):\n    return x\n```\nUsage:\n```python\nprint(f(1))\n```"
    assert extract_code(reply, "f") == "def f(x):\n    return x\n"
    assert extract_code("```\na = 1\n```\n```py\nb = 2\n```") == "a = 1\n\n\nb = 2\n"
    assert extract_code("def f(x):\n    return x\n") == "def f(x):\n    return x"
    assert extract_code("```python\ndef f(x):\n    return x", "f") == "def f(x):\n    return x"  # cut off
    assert extract_code("<submit>def f(): return 1</submit>", "f") == "def f(): return 1"


# --- episodes ----------------------------------------------------------------------------------

def _domain(sandbox, mode: str = "single", **env) -> CodeDomain:
    tasks = [t for t in load_tasks(TASKS / "easy.jsonl") if t.id in ("easy/add", "easy/square")]
    system = "Write Python."
    source = CodeSource("code", tasks, system, seed=0, eval_fraction=0.0)
    return CodeDomain("code", source, sandbox, CodeVerifier(sandbox), CodeEnvConfig(mode=mode, **env))  # type: ignore[arg-type]


def test_single_turn_groups_score_each_reply(sandbox):
    dom = _domain(sandbox)
    task = next(t for t in (dom.source.train_task(i) for i in range(2)) if t.id == "easy/add")
    replies = [
        "```python\ndef add(a, b):\n    return a + b\n```",
        "def add(a, b):\n    return a - b",
        "    return a + b",  # a completion of the prompt's stub
        "I cannot do that.",
    ]
    engine = ScriptedEngine(lambda prompt, i: replies[i])
    (group,) = asyncio.run(run_groups([task], 4, lambda t: dom.make_env(), engine, SamplingParams(max_new_tokens=200)))
    rewards = group.rewards
    assert rewards[0] == 1.0 and rewards[2] == 1.0 and rewards[3] == 0.0
    assert rewards[1] == pytest.approx(1 / 4)  # add(0, 0) == 0 passes either way
    assert all(e.state == EpisodeState.done and e.info.flags == [] for e in group.episodes)
    assert "Complete this Python function" in task.prompt[-1].content and "```python" in task.prompt[-1].content


def call(name: str, **args) -> str:
    import json

    return f"<tool_call>{json.dumps({'name': name, 'arguments': args})}</tool_call>"


def test_multi_turn_attempt_error_fix_submit(sandbox):
    """The model runs code, sees the NameError, fixes it, checks the output, submits."""
    dom = _domain(sandbox, "multi")
    task = next(t for t in (dom.source.train_task(i) for i in range(2)) if t.id == "easy/add")
    seen: list[str] = []

    def reply(prompt: str, i: int) -> str:
        seen.append(prompt)
        if "NameError" not in prompt:
            return call("python", code="print(add(1, 2))")
        if "stdout:\n3" not in prompt:
            return call("python", code="def add(a, b):\n    return a + b\nprint(add(1, 2))")
        return "It works.\n" + call("submit", answer="```python\ndef add(a, b):\n    return a + b\n```")

    engine = ScriptedEngine(reply)
    closed = []
    env = dom.make_env()
    real_close = env.close

    async def close():
        closed.append(env.runner.session is not None)
        await real_close()

    env.close = close  # type: ignore[method-assign]
    (ep,) = asyncio.run(run_episodes([task], lambda t: env, engine, SamplingParams(max_new_tokens=300), max_turns=5))
    assert ep.state == EpisodeState.done and ep.reward == 1.0, ep.score
    assert len(ep.turns) == 3 and ep.info.tool_calls == {"python": 2, "submit": 1}
    assert ep.info.extra["failed_runs"] == 1 and ep.info.tool_error_count == 0  # a failing run is not a bad call
    tool = [m.content for m in ep.messages if m.role == "tool"]
    assert "NameError" in tool[0] and "exit code 0" in tool[1] and "stdout:\n3" in tool[1]
    assert closed == [True] and env.runner.session is None  # the episode's session was opened and closed
    # two tool runs and the verifier's test run(s) are charged to the episode (practicum.sandbox.meter)
    assert ep.info.sandbox_runs >= 3, ep.info
    ids, mask, _ = ep.training_sequence()
    assert sum(mask) == sum(len(t.completion_ids) for t in ep.turns)  # tool output is context only


def test_multi_turn_run_limit_and_replies_without_code(sandbox):
    dom = _domain(sandbox, "multi", max_runs=1)
    task = dom.source.train_task(0)
    script = ["Hmm.", call("python", code="print(1)"), call("python", code="print(2)"),
              call("submit", answer="def nothing(): pass")]
    engine = ScriptedEngine(lambda prompt, i: script[i])
    (ep,) = asyncio.run(run_episodes([task], lambda t: dom.make_env(), engine, SamplingParams(max_new_tokens=100),
                                     max_turns=6))
    tool = [m.content for m in ep.messages if m.role == "tool"]
    assert "No tool call found" in tool[0] and "stdout:\n1" in tool[1] and "used all 1 runs" in tool[2]
    assert ep.info.tool_errors == {"no_call": 1, "tool_failed": 1}
    assert ep.state == EpisodeState.done and ep.reward == 0.0 and len(ep.turns) == 4


def test_a_multi_turn_episode_that_never_submits_ends_at_the_turn_limit(sandbox):
    dom = _domain(sandbox, "multi")
    engine = ScriptedEngine(lambda prompt, i: call("python", code="print('still thinking')"))
    (ep,) = asyncio.run(run_episodes([dom.source.train_task(0)], lambda t: dom.make_env(), engine,
                                     SamplingParams(max_new_tokens=100), max_turns=2))
    assert ep.reward == 0.0 and ep.errors[0].kind == "turn_limit"


# --- the command line --------------------------------------------------------------------------

def test_cli_scores_a_task_folder_answer_as_json(tmp_path):
    answer = tmp_path / "answer.py"
    answer.write_text("def add_numbers(numbers):\n    return sum(numbers)\n")
    result = runner.invoke(verify_app, ["code", "--task", str(TASKS / "add_numbers"), "--answer", str(answer), "--json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    assert out["value"] == 1.0 and out["flags"] == [] and out["explanation"].startswith("9/9 hidden tests passed")
    assert out["components"]["test:test_add_numbers.py::test_sums[numbers1-0]"] == 1.0


def test_cli_human_output_and_reply_files(tmp_path):
    reply = tmp_path / "reply.md"
    reply.write_text("Sure:\n```python\ndef add(a, b):\n    return a * b\n```\n")
    result = runner.invoke(verify_app, ["code", "--task", str(TASKS / "easy.jsonl"), "--id", "easy/add",
                                        "--answer", str(reply)])
    assert result.exit_code == 0, result.output
    assert "score 0.250" in result.output and "flags: none" in result.output


def test_cli_errors(tmp_path):
    answer = tmp_path / "a.py"
    answer.write_text("x = 1\n")
    several = runner.invoke(verify_app, ["code", "--task", str(TASKS / "easy.jsonl"), "--answer", str(answer)])
    assert several.exit_code == 2 and "holds 16 tasks; choose one with --id" in " ".join(several.output.split())
    missing = runner.invoke(verify_app, ["code", "--task", str(tmp_path / "nope.json"), "--answer", str(answer)])
    assert missing.exit_code == 2 and "no such task file" in missing.output
    no_answer = runner.invoke(verify_app, ["code", "--task", str(TASKS / "add_numbers"), "--answer", str(tmp_path / "x.py")])
    assert no_answer.exit_code == 2 and "cannot read answer" in no_answer.output


# --- configs -----------------------------------------------------------------------------------

def test_a_config_builds_the_code_domain_with_a_pool(write_yaml):
    from practicum.config import load_config
    from practicum.domains import build_domain

    path = write_yaml({"domains": [{"name": "code", "env": "code", "source": {"kind": "tasks", "path": str(TASKS)},
                                    "options": {"mode": "multi", "scoring": "all", "concurrency": 2}}]})
    cfg = load_config(path)
    dom = build_domain(cfg.domains[0], seed=0, base_dir=cfg.base_dir)
    assert isinstance(dom, CodeDomain) and dom.config.mode == "multi" and dom.verifier.config.scoring == "all"
    assert len(dom.source.eval_tasks()) == 3 and "python tool" in dom.source.train_task(0).prompt[0].content
    task = next(t for t in dom.source.eval_tasks() if t.id == "easy/add")
    engine = ScriptedEngine(lambda p, i: call("submit", answer="def add(a, b):\n    return a + b"))

    pools = []

    async def run():
        pools.append(dom.sandbox.pool())
        try:
            return await run_groups([task], 2, lambda t: dom.make_env(), engine, SamplingParams(max_new_tokens=300),
                                    max_turns=2)
        finally:
            await dom.close()

    (group,) = asyncio.run(run())
    assert group.rewards == [1.0, 1.0]
    assert pools[0].started >= 2 and pools[0]._closed and pools[0].idle == 0
    (again,) = asyncio.run(run())  # a new event loop gets a new pool
    assert again.rewards == [1.0, 1.0] and pools[1] is not pools[0]


@pytest.mark.parametrize("domain, message", [
    ({"name": "c", "env": "code", "source": {"kind": "reasoning_gym", "dataset": "chain_sum"}},
     "domains.0.source.kind: Input should be 'humaneval', 'tasks' or 'jsonl'"),
    ({"name": "c", "env": "code", "source": {"kind": "tasks"}}, "domains.0.source: tasks sources need 'path'"),
    ({"name": "m", "env": "math", "source": {"kind": "humaneval"}}, "domains.0.source.kind: Input should be 'reasoning_gym' or 'jsonl'"),
    ({"name": "c", "env": "code", "source": {"kind": "humaneval"}, "options": {"mode": "both"}}, "domains.0.options.mode"),
    ({"name": "c", "env": "code", "options": {"concurency": 2}}, "domains.0.options.concurency: unknown field of env 'code'"),
    ({"name": "c", "env": "code", "code": {"mode": "multi"}}, "'code:' moved to options:"),
    ({"name": "c", "env": "cod"}, "domains.0.env: unknown env 'cod'; the installed domains are: code, "),
])
def test_code_config_errors_name_the_field(write_yaml, domain, message):
    from practicum.config import load_config
    from practicum.errors import ConfigError

    with pytest.raises(ConfigError, match=re.escape(message)):
        load_config(write_yaml({"domains": [domain]}))


def test_humaneval_domain_from_config(write_yaml):
    from practicum.config import load_config
    from practicum.domains import build_domain

    cfg = load_config(write_yaml({"domains": [{"name": "he", "env": "code", "source": {"kind": "humaneval", "eval_fraction": 0.25},
                                               "eval_size": 10}]}))
    dom = build_domain(cfg.domains[0], seed=0)
    assert len(dom.source.eval_tasks()) == 10 and dom.source.eval_tasks()[0].id == "HumanEval/0"
    assert {dom.source.train_task(i).id for i in range(123)} == {f"HumanEval/{i}" for i in range(41, 164)}


def test_the_training_loop_runs_on_the_code_domain(tmp_path, tiny_model_path, write_yaml):
    """`train` end to end on the code domain (multi-turn, tiny random model): rollouts are
    verified in sandboxes, stored, trained on, and the run's sandboxes are closed at the end."""
    from practicum.config import load_config
    from practicum.loop import train
    from practicum.store import Store

    path = write_yaml({
        "run": {"name": "code", "dir": str(tmp_path / "run"), "steps": 2, "checkpoint_every": 2},
        "model": {"name": str(tiny_model_path), "engine_dtype": "float32"},
        "domains": [{"name": "code", "env": "code", "source": {"kind": "tasks", "path": str(TASKS / "easy.jsonl"),
                                                                 "eval_fraction": 0.25},
                     "options": {"mode": "multi", "concurrency": 2}, "eval_size": 2}],
        "rollout": {"prompts_per_step": 2, "group_size": 2, "max_new_tokens": 8, "max_turns": 2},
        "trainer": {"autocast_dtype": "none"},
        "eval": {"max_new_tokens": 8},
    })
    result = train(load_config(path), log=lambda line: None)
    assert result.steps_done == 2 and result.before is not None and result.after is not None
    assert result.after.per_domain["code"]["n"] == 2.0
    store = Store(result.run_dir / "store.sqlite")
    try:
        groups = store.groups(kind="train")
    finally:
        store.close()
    assert len(groups) == 4 and all(0.0 <= m["code/reward"] <= 1.0 for m in result.history)
    episodes = [e for g in groups for e in g.episodes]
    assert all(e.domain == "code" and e.score is not None and e.turns for e in episodes)
    assert all(e.info.end_reason == "done" or e.errors for e in episodes)  # verified, or ended at the turn limit


def test_loading_code_tasks_hides_their_files_from_later_sandboxes(monkeypatch, tmp_path):
    from practicum.sandbox import hidden

    monkeypatch.setattr(hidden, "_hidden", set())
    f = tmp_path / "mine.jsonl"
    f.write_text(json.dumps({"prompt": "def f(x):\n    \"\"\"x + 1\"\"\"\n", "entry_point": "f",
                             "test": "def check(candidate):\n    assert candidate(1) == 2\n"}) + "\n")
    load_tasks(f)
    assert hidden.registered() == (str(f.resolve()),)
