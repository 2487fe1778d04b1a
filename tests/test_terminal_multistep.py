"""Harbor's multi-step tasks (``[[steps]]`` in task.toml, ``steps/<name>/``), loaded and run in
the real sandbox: each step's instruction reaches the agent in turn, each step's tests (over the
task's shared ``tests/``) score it when the agent submits, a ``min_reward`` gate stops the
episode, and the steps' rewards roll up by ``multi_step_reward_strategy`` as Harbor's do."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path

import pytest

from practicum.domains.terminal.env import TerminalDomain, run_answer, run_reference
from practicum.domains.terminal.tasks import check_task, load_task
from practicum.engines.base import SamplingParams
from practicum.engines.scripted import ScriptedEngine
from practicum.records import EpisodeState
from practicum.rollout import run_episodes

REWARD = "mkdir -p /logs/verifier\n"
# the task's shared tests/: a helper every step's test.sh sources from /tests
COMMON = "reward() { mkdir -p /logs/verifier; echo \"$1\" > /logs/verifier/reward.txt; }\n"


def write(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
        (root / rel).chmod(0o755)
    return root


def three_steps(root: Path, head: str = "", first: str = "min_reward = 1.0\n", dockerfile: str | None = None) -> Path:
    """A three-step task: write a file, append what the step's set-up left, count its lines."""
    files = {
        "task.toml": head + "[agent]\ntimeout_sec = 120\n[verifier]\ntimeout_sec = 30\n"
                     f"[[steps]]\nname = '01-write'\n{first}"
                     "[[steps]]\nname = '02-append'\n[steps.agent]\ntimeout_sec = 60\n"
                     "[steps.verifier]\nenv = { WANT = '42' }\n"
                     "[[steps]]\nname = '03-count'\n",
        "tests/common.sh": COMMON,
        "steps/01-write/instruction.md": "Write the word hello into out.txt.\n",
        "steps/01-write/solution/solve.sh": "#!/bin/bash\necho hello > out.txt\n",
        "steps/01-write/tests/test.sh": "#!/bin/bash\n. /tests/common.sh\n"
                                        "[ \"$(cat out.txt 2>/dev/null)\" = hello ] && reward 1 || reward 0\n",
        "steps/02-append/instruction.md": "Append the content of data.txt to out.txt as its second line.\n",
        "steps/02-append/workdir/setup.sh": "#!/bin/bash\necho 42 > data.txt\n",
        "steps/02-append/solution/solve.sh": "#!/bin/bash\ncat data.txt >> out.txt\n",
        # the step's env is laid over [verifier]'s; /tests holds no file of step 1's
        "steps/02-append/tests/test.sh": "#!/bin/bash\n. /tests/common.sh\n"
                                         "[ \"$(sed -n 2p out.txt)\" = \"$WANT\" ] && [ ! -e /tests/leftover ] "
                                         "&& reward 1 || reward 0\n",
        "steps/03-count/instruction.md": "Write the number of lines of out.txt into count.txt.\n",
        "steps/03-count/solution/solve.sh": "#!/bin/bash\nwc -l < out.txt > count.txt\n",
        "steps/03-count/tests/test.sh": "#!/bin/bash\n" + REWARD +
                                        "n=$(cat count.txt 2>/dev/null | tr -d ' ')\n"
                                        "if [ \"$n\" = 2 ]; then echo '{\"reward\": 1, \"lines\": 1}' > /logs/verifier/reward.json\n"
                                        "else echo '{\"reward\": 0}' > /logs/verifier/reward.json; fi\n",
    }
    if dockerfile is not None:
        files["environment/Dockerfile"] = dockerfile
    return write(root, files)


def domain_of(task_dir: Path) -> TerminalDomain:
    return TerminalDomain("terminal", task_dir.parent)


def runs(task_dir: Path):
    d = domain_of(task_dir)
    (t,) = d.source.eval_tasks()

    async def both():
        return await run_reference(d, t, True), await run_reference(d, t, False)

    return asyncio.run(both())


def call(name: str, **args) -> str:
    return f"<tool_call>{json.dumps({'name': name, 'arguments': args})}</tool_call>"


# --- loading -------------------------------------------------------------------------------------


def test_a_multi_step_task_loads_its_steps_with_harbors_fallbacks(tmp_path):
    t = load_task(three_steps(tmp_path / "ms"))
    assert [s.name for s in t.steps] == ["01-write", "02-append", "03-count"]
    assert t.instruction == "Write the word hello into out.txt.\n"  # the first step's; no root instruction.md needed
    assert [s.agent_timeout_s for s in t.steps] == [120, 60, 120]  # [steps.agent] else [agent]
    assert [s.verifier_timeout_s for s in t.steps] == [30, 30, 30]
    assert t.steps[1].workdir_files == ["setup.sh"] and t.steps[1].setup_script == "setup.sh"
    assert t.steps[0].spec.min_reward == 1.0 and t.reward_strategy == "mean"
    assert t.test_files == ["common.sh"]  # the task's shared tests/, without a test.sh of its own
    assert ("setup", t.steps[1].path / "workdir" / "setup.sh") in t.scripts()
    assert [p for p in check_task(t.path) if p.severity == "error"] == []


def test_loading_hides_every_steps_tests_and_solution_from_later_sandboxes(tmp_path, monkeypatch):
    from practicum.sandbox import hidden

    monkeypatch.setattr(hidden, "_hidden", set())
    d = three_steps(tmp_path / "ms").resolve()
    load_task(d)
    want = {str(d / "tests")} | {str(d / "steps" / s / sub) for s in ("01-write", "02-append", "03-count")
                                 for sub in ("tests", "solution")}
    assert set(hidden.registered()) == want


@pytest.mark.parametrize(("change", "expected"), [
    (lambda d: (d / "steps" / "03-count" / "tests" / "test.sh").unlink(), "nothing verifies this step"),
    (lambda d: (d / "steps" / "02-append" / "instruction.md").unlink(), "missing: the instruction the agent is given"),
    (lambda d: shutil.rmtree(d / "steps" / "01-write"), "missing: the folder of step '01-write'"),
    (lambda d: (d / "task.toml").write_text((d / "task.toml").read_text().replace("'03-count'", "'01-write'")),
     "name '01-write' is given twice"),
    (lambda d: (d / "task.toml").write_text((d / "task.toml").read_text().replace(
        "name = '03-count'\n", "name = '03-count'\ncontributes_to_reward = false\n").replace(
        "name = '02-append'\n", "name = '02-append'\ncontributes_to_reward = false\n").replace(
        "min_reward = 1.0\n", "contributes_to_reward = false\n")), "nothing makes the reward"),
])
def test_what_a_multi_step_task_cannot_do_without_is_an_error(tmp_path, change, expected):
    d = three_steps(tmp_path / "ms")
    change(d)
    found = [p.message for p in check_task(d) if p.severity == "error"]
    assert any(expected in m for m in found), found


def test_a_step_field_harbor_does_not_have_is_a_warning_and_an_unlisted_folder_is_named(tmp_path):
    d = three_steps(tmp_path / "ms", first="min_reward = 1.0\ndependencies = []\n")
    (d / "steps" / "04-extra").mkdir()
    found = check_task(d)
    assert [p for p in found if p.severity == "error"] == []
    warnings = [p.message for p in found if p.severity == "warning"]
    assert any("steps[0].dependencies: unknown field (Harbor's fields here: name, agent, verifier, min_reward" in m
               for m in warnings), warnings
    assert any("never run: 04-extra" in m for m in warnings), warnings


# --- running -------------------------------------------------------------------------------------


def test_the_reference_solves_every_step_and_the_untouched_workspace_stops_at_the_first_gate(tmp_path):
    ref, untouched = runs(three_steps(tmp_path / "tasks" / "ms"))
    assert ref.failed_step is None and ref.score is not None and ref.score.value == 1.0, ref
    assert {k: ref.score.components[k] for k in ("step:01-write", "step:02-append", "step:03-count")} == \
        {"step:01-write": 1.0, "step:02-append": 1.0, "step:03-count": 1.0}
    assert ref.score.components["lines"] == pytest.approx(1 / 3)  # a key only step 3 wrote: the others count 0
    # nothing done: step 1 scores 0 < its min_reward 1.0, so steps 2 and 3 never begin
    assert untouched.score is not None and untouched.score.value == 0.0
    assert set(k for k in untouched.score.components if k.startswith("step:")) == {"step:01-write"}


def test_an_agent_is_given_each_step_in_turn_and_the_steps_roll_up(tmp_path):
    """A scripted agent through the rollout loop: step 1 done, then step 2's instruction arrives
    as a user message, with its set-up's data.txt in place and /tests empty (step 1's tests are
    gone, a file planted there is removed before step 2's run); step 3 left undone. Mean 2/3."""
    d = three_steps(tmp_path / "tasks" / "ms")
    domain = domain_of(d)
    (task,) = domain.source.eval_tasks()
    assert task.prompt[0].content.startswith("This task has 3 steps, given one at a time. Step 1 of 3:")
    script = [
        call("bash", command="echo hello > out.txt"),
        call("submit"),
        call("bash", command="ls -A /tests | wc -l; cat data.txt; touch /tests/leftover"),
        call("bash", command="cat data.txt >> out.txt"),
        call("submit"),
        call("bash", command="echo 7 > count.txt"),
        call("submit"),
    ]
    engine = ScriptedEngine(lambda prompt, i: script[i])
    [ep] = asyncio.run(run_episodes([task], lambda t: domain.make_env(), engine, SamplingParams(max_new_tokens=500),
                                    max_turns=20))
    assert ep.state == EpisodeState.done, ep.errors
    users = [m.content for m in ep.messages if m.role == "user"]
    assert len(users) == 3
    assert users[1].startswith("Step 1 is done. Step 2 of 3:\n\nAppend the content of data.txt")
    assert users[2].startswith("Step 2 is done. Step 3 of 3:")
    tool = [m.content for m in ep.messages if m.role == "tool"]
    assert tool[1].splitlines()[1:] == ["0", "42"]  # nothing in /tests; the step's set-up ran
    assert ep.reward == pytest.approx(2 / 3)
    steps = ep.info.extra["steps"]
    assert [(s["step"], s["reward"], s["end"]) for s in steps] == [
        ("01-write", 1.0, "submit"), ("02-append", 1.0, "submit"), ("03-count", 0.0, "submit")]
    assert "count.txt" in ep.info.extra["git_diff"]


def test_final_takes_the_last_verified_step_and_a_gate_that_stops_early_is_recorded(tmp_path):
    d = three_steps(tmp_path / "tasks" / "ms", head="multi_step_reward_strategy = 'final'\n",
                    first="min_reward = { reward = 1.0 }\n")
    domain = domain_of(d)
    (task,) = domain.source.eval_tasks()
    script = [call("bash", command="echo hullo > out.txt"), call("submit")]
    engine = ScriptedEngine(lambda prompt, i: script[i])
    [ep] = asyncio.run(run_episodes([task], lambda t: domain.make_env(), engine, SamplingParams(max_new_tokens=500),
                                    max_turns=10))
    assert ep.state == EpisodeState.done and ep.reward == 0.0
    assert len(ep.info.extra["steps"]) == 1
    assert "scored below its min_reward" in ep.info.extra["stopped"]
    ref, _ = runs(d)
    assert ref.score is not None and ref.score.value == 1.0 and "final step's reward" in ref.score.explanation


def test_a_rollout_limit_ends_the_episode_with_the_steps_verified_so_far(tmp_path):
    d = three_steps(tmp_path / "tasks" / "ms")
    domain = domain_of(d)
    (task,) = domain.source.eval_tasks()
    script = [call("bash", command="echo hello > out.txt"), call("submit"), call("bash", command="true"),
              call("bash", command="true")]
    engine = ScriptedEngine(lambda prompt, i: script[i])
    [ep] = asyncio.run(run_episodes([task], lambda t: domain.make_env(), engine, SamplingParams(max_new_tokens=500),
                                    max_turns=3))
    assert ep.info.end_reason == "turn_limit"
    assert [s["step"] for s in ep.info.extra["steps"]] == ["01-write", "02-append"]
    assert ep.reward == pytest.approx(0.5)  # step 1 right, step 2 (cut by the limit) wrong; step 3 never began
    assert ep.info.extra["stopped"] == "a rollout limit"


def test_a_step_that_does_not_count_gates_but_is_left_out_of_the_mean(tmp_path):
    d = three_steps(tmp_path / "tasks" / "ms", first="min_reward = 1.0\ncontributes_to_reward = false\n")
    domain = domain_of(d)
    (task,) = domain.source.eval_tasks()
    answer = "echo hello > out.txt\n"  # `verify terminal`: the script runs at step 1, then every step is verified
    result = asyncio.run(run_answer(domain, task, answer))
    assert result.score is not None and result.score.value == 0.0  # steps 2 and 3 count, and neither was done
    assert result.score.components["step:01-write"] == 1.0


def test_a_failing_step_setup_is_the_episodes_environment_failure(tmp_path):
    d = three_steps(tmp_path / "tasks" / "ms")
    (d / "steps" / "02-append" / "workdir" / "setup.sh").write_text("#!/bin/bash\necho broken >&2; exit 3\n")
    ref, _ = runs(d)
    assert ref.failed_step == "setup" and "step '02-append': workdir/setup.sh failed" in ref.output, ref


def test_a_multi_step_task_in_its_own_image(tmp_path, monkeypatch):
    """Container mode (a Dockerfile): the same steps, set-up and gates over the task's image."""
    monkeypatch.setenv("PRACTICUM_HOME", str(tmp_path / "home"))
    d = three_steps(tmp_path / "tasks" / "ms", dockerfile="FROM debian:12-slim\nWORKDIR /app\nRUN echo seed > /app/seed.txt\n")
    ref, untouched = runs(d)
    assert ref.score is not None and ref.score.value == 1.0, ref
    assert untouched.score is not None and untouched.score.value == 0.0, untouched
