"""The terminal environment, end to end in the real sandbox: every shipped task's reference
solution scores 1 and its untouched workspace 0; a scripted agent works through tool errors
with a persistent shell and solves a task; the embedded model runs a multi-turn episode."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from practicum.domains.terminal.env import TerminalDomain, run_reference
from practicum.engines.base import SamplingParams
from practicum.engines.scripted import ScriptedEngine
from practicum.errors import EnvironmentFailure
from practicum.records import EpisodeState
from practicum.rollout import run_episodes

TASKS = Path(__file__).resolve().parents[1] / "tasks" / "terminal"
DOMAIN = TerminalDomain("terminal", TASKS)
BY_NAME = {t.id.split("/", 1)[1]: t for t in DOMAIN.source.eval_tasks()}


def test_at_least_25_tasks_ship():
    """The issue asks for at least 25 terminal tasks."""
    assert len(BY_NAME) >= 25


@pytest.mark.parametrize("name", sorted(BY_NAME))
def test_reference_scores_1_and_untouched_scores_0(name):
    """The task's own reference solution passes its hidden tests; doing nothing does not."""

    async def both():
        return await run_reference(DOMAIN, BY_NAME[name], True), await run_reference(DOMAIN, BY_NAME[name], False)

    ref, untouched = asyncio.run(both())
    assert ref.score is not None and ref.score.value == 1.0, ref
    assert untouched.score is not None and untouched.score.value == 0.0, untouched


def test_verify_terminal_scores_an_answer_script_and_rejects_a_non_task(tmp_path):
    """`practicum verify terminal`: the reference solve.sh as the answer scores 1, a script that
    does nothing scores 0, and a folder that is not a task is a clear error."""
    from practicum.domains import default_context, get_plugin
    from practicum.errors import TaskError

    plugin = get_plugin("terminal")
    task = plugin.load_task(TASKS / "fix-leap-years")
    solve = (TASKS / "fix-leap-years" / "solution" / "solve.sh").read_text()
    assert task.metadata["reference"] == solve

    async def both():
        ctx = default_context()
        return await plugin.verify(task, solve, ctx), await plugin.verify(task, "true\n", ctx)

    right, nothing = asyncio.run(both())
    assert right.score.components == {"reward": 1.0} and nothing.score.value == 0.0
    with pytest.raises(TaskError, match=f"{tmp_path}: not a terminal task folder"):
        plugin.load_task(tmp_path)


def call(name: str, **args) -> str:
    return f"<tool_call>{json.dumps({'name': name, 'arguments': args})}</tool_call>"


def test_scripted_agent_recovers_from_errors_and_solves_a_task():
    """A scripted agent reads a missing file (tool error), sends broken JSON (malformed call),
    relies on the shell keeping its directory and exports between calls, fixes the
    permissions task with bash, and submits: score 1, errors counted, the final git diff
    stored, the sandbox closed."""
    fix = ("chmod 755 deploy.sh rotate-logs.sh && chmod 644 lib.sh && cd .. && chmod 700 secrets "
           "&& chmod 600 secrets/* && chmod 775 data/uploads")
    script = [
        call("read_file", path="NO_SUCH_FILE.txt"),
        '<tool_call>{"name": "bash", "arguments": {"command": "ls"</tool_call>',
        call("bash", command="cd scripts && export MARK=kept"),
        call("bash", command='pwd && echo "mark=$MARK"'),
        call("bash", command=fix),
        call("submit"),
    ]
    engine = ScriptedEngine(lambda prompt, i: script[i])
    envs = []

    def make(task):
        envs.append(DOMAIN.make_env())
        return envs[-1]

    [ep] = asyncio.run(run_episodes([BY_NAME["fix-permissions"]], make, engine,
                                    SamplingParams(max_new_tokens=2000), max_turns=10))
    assert ep.state == EpisodeState.done, ep.errors
    assert ep.reward == 1.0, ep.score
    assert ep.info.end_reason == "done"
    assert ep.info.tool_errors == {"tool_failed": 1, "malformed": 1}
    tool_msgs = [m.content for m in ep.messages if m.role == "tool"]
    assert "no such file" in tool_msgs[0].lower() or "not found" in tool_msgs[0].lower()
    assert "/app/scripts" in tool_msgs[3] and "mark=kept" in tool_msgs[3]  # cwd and exports persisted
    assert "old mode" in ep.info.extra["git_diff"] or "new mode" in ep.info.extra["git_diff"]
    assert envs[0].session is None  # closed


def test_tests_are_invisible_to_the_agent_and_planted_rewards_are_ignored():
    """During the episode /tests is empty; a reward file the agent plants is deleted before
    the verifier runs, so an untouched workspace still scores 0."""
    script = [
        call("bash", command="ls -A /tests | wc -l; mkdir -p /logs/verifier; echo 1 > /logs/verifier/reward.txt; "
                             "echo 'exit 0' > /tests/test.sh"),
        call("submit"),
    ]
    engine = ScriptedEngine(lambda prompt, i: script[i])
    [ep] = asyncio.run(run_episodes([BY_NAME["fix-permissions"]], lambda t: DOMAIN.make_env(), engine,
                                    SamplingParams(max_new_tokens=2000), max_turns=4))
    first = [m.content for m in ep.messages if m.role == "tool"][0]
    assert first.splitlines()[1].strip() == "0"  # nothing in /tests while the agent works
    assert ep.reward == 0.0


@pytest.mark.slow
def test_embedded_model_runs_a_multi_turn_terminal_episode():
    """The real embedded model drives a few turns of a terminal task: whatever it writes (tool
    calls or not), the episode ends cleanly with a score and its turns' tokens are trainable."""
    from practicum.engines.hf import HFEngine
    from practicum.models import resolve_model

    engine = HFEngine(resolve_model("smollm2-135m-instruct"))
    [ep] = asyncio.run(run_episodes([BY_NAME["fix-permissions"]], lambda t: DOMAIN.make_env(), engine,
                                    SamplingParams(max_new_tokens=64, temperature=1.0, seed=0), max_turns=3))
    assert ep.state in (EpisodeState.done, EpisodeState.failed)
    assert ep.score is not None and 0.0 <= ep.reward <= 1.0
    assert 1 <= len(ep.turns) <= 3
    ids, mask, _ = ep.training_sequence()
    assert [i for i, m in zip(ids, mask) if m] == [i for t in ep.turns for i in t.completion_ids]


PIP_BOOTSTRAPS = {
    # the verifier installs pytest with pip, then runs it through the interpreter (public Harbor tasks)
    "pip3": "pip3 install --no-cache-dir --break-system-packages pytest==8.4.1 >/dev/null 2>&1\n",
    "python-m-pip": "python3 -m pip install --break-system-packages -q pytest==8.4.1 2>/dev/null || true\n",
}


def _task(root: Path, files: dict[str, str]) -> TerminalDomain:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
        (root / rel).chmod(0o755)
    return TerminalDomain("terminal", root.parent)


def _reference_and_untouched(domain: TerminalDomain):
    (t,) = domain.source.eval_tasks()

    async def both():
        return await run_reference(domain, t, True), await run_reference(domain, t, False)

    return asyncio.run(both())


def test_packages_the_solution_and_the_tests_install_are_fetched_ahead_and_install_offline(tmp_path, monkeypatch):
    """A TB2 solution `apt-get update && apt-get install -y primer3` / `pip install grpcio`, and a
    test.sh `apt-get install -y expect`: Harbor's container fetches them at run time; here the
    agent and the verifier have no network, so the image build downloads (never installs) what
    the task's scripts name, and the real installs then work offline. The untouched workspace
    has neither package; an install of a package nobody named fails at once (pip has no index)."""
    monkeypatch.setenv("PRACTICUM_HOME", str(tmp_path / "home"))
    files = {
        "instruction.md": "Write a figlet banner of 'hi' to /app/banner.txt and pyfiglet's to /app/banner2.txt.\n",
        "task.toml": "[verifier]\ntimeout_sec = 120\n[agent]\ntimeout_sec = 300\n",
        # the usual last line of an apt-get RUN: apt then knows no package until it is updated
        "environment/Dockerfile": "FROM ubuntu:24.04\nWORKDIR /app\nRUN rm -rf /var/lib/apt/lists/*\n",
        "solution/solve.sh": "#!/bin/bash\nset -e\napt-get update && apt-get install -y figlet\npip install pyfiglet\n"
                             "figlet -w 200 hi > /app/banner.txt\n"
                             "python3 -c 'import pyfiglet; print(pyfiglet.figlet_format(\"hi\"))' > /app/banner2.txt\n"
                             "start=$(date +%s); pip install tinydb >/dev/null 2>&1 && exit 3; "
                             "[ $(( $(date +%s) - start )) -lt 5 ] || exit 4\n",
        "tests/test.sh": "#!/bin/bash\nmkdir -p /logs/verifier\napt-get update && apt-get install -y sl\n"
                         "if [ -x /usr/games/sl ] && [ -s /app/banner.txt ] && figlet -w 200 hi | cmp -s - /app/banner.txt "
                         "&& grep -q '_' /app/banner2.txt; then echo 1 > /logs/verifier/reward.txt; "
                         "else echo 0 > /logs/verifier/reward.txt; fi\n",
    }
    domain = _task(tmp_path / "tasks" / "fetched-ahead", files)
    ref, untouched = _reference_and_untouched(domain)
    assert ref.failed_step is None and ref.score is not None and ref.score.value == 1.0, ref
    assert untouched.score is not None and untouched.score.value == 0.0, untouched


def test_a_verifier_that_pip_installs_the_projects_requirements_gets_them_offline(tmp_path, monkeypatch):
    """A public Harbor task's tests run `python3 -m pip install -r service/requirements.txt`, a
    file the project ships and the solution rewrites with a here-document. The build fetches
    what both name ahead; the verifier's pip stand-in, whose toolchain lacks them, hands the
    install to the image's pip, which installs them offline. Untouched, the requirement the
    solution adds is missing and the import fails."""
    monkeypatch.setenv("PRACTICUM_HOME", str(tmp_path / "home"))
    files = {
        "instruction.md": "Add termcolor 2.4.0 to /app/service/requirements.txt.\n",
        "task.toml": "[verifier]\ntimeout_sec = 120\n",
        "environment/Dockerfile": "FROM python:3.11-slim\nWORKDIR /app\nCOPY service /app/service\n",
        "environment/service/requirements.txt": "iniconfig==2.0.0  # what the project had\n",
        "solution/solve.sh": "#!/bin/bash\ncat > /app/service/requirements.txt <<'EOF'\niniconfig==2.0.0\ntermcolor==2.4.0\nEOF\n",
        "tests/test.sh": "#!/bin/bash\nmkdir -p /logs/verifier\ncd /app && python3 -m pip install -r service/requirements.txt "
                         "&& python3 -c 'import termcolor, iniconfig' "
                         "&& echo 1 > /logs/verifier/reward.txt || echo 0 > /logs/verifier/reward.txt\n",
    }
    domain = _task(tmp_path / "tasks" / "project-requirements", files)
    ref, untouched = _reference_and_untouched(domain)
    assert ref.failed_step is None and ref.score is not None and ref.score.value == 1.0, ref
    assert untouched.score is not None and untouched.score.value == 0.0, untouched


def test_a_separate_verifiers_python_packages_reach_the_verifier(tmp_path, monkeypatch):
    """Harbor's `environment_mode = "separate"`: the verifier runs in an image built from
    tests/Dockerfile, whose `uv pip install pytest-json-ctrf` gives test.sh's `pytest --ctrf`. No
    separate sandbox is made here; the packages its RUN lines install join the verifier's
    toolchain (public math-modelling tasks failed with "unrecognized arguments: --ctrf")."""
    monkeypatch.setenv("PRACTICUM_HOME", str(tmp_path / "home"))
    files = {
        "instruction.md": "Write 42 to /app/answer.txt.\n",
        "task.toml": "[verifier]\ntimeout_sec = 120\nenvironment_mode = 'separate'\n",
        "environment/Dockerfile": "FROM python:3.12-slim\nWORKDIR /app\n",
        "solution/solve.sh": "#!/bin/bash\necho 42 > /app/answer.txt\n",
        "tests/Dockerfile": "FROM python:3.12-slim\nRUN uv venv /opt/venv && \\\n    uv pip install --python /opt/venv/bin/python "
                            "pytest==8.4.1 pytest-json-ctrf==0.3.5\nCOPY . /tests/\n",
        "tests/test_outputs.py": "def test_answer():\n    assert open('/app/answer.txt').read().strip() == '42'\n",
        "tests/test.sh": "#!/bin/bash\nmkdir -p /logs/verifier\npytest --ctrf /logs/verifier/ctrf.json /tests/test_outputs.py "
                         "&& [ -s /logs/verifier/ctrf.json ] && echo 1 > /logs/verifier/reward.txt || echo 0 > /logs/verifier/reward.txt\n",
    }
    domain = _task(tmp_path / "tasks" / "separate-verifier", files)
    ref, untouched = _reference_and_untouched(domain)
    assert ref.failed_step is None and ref.score is not None and ref.score.value == 1.0, ref
    assert untouched.score is not None and untouched.score.value == 0.0, untouched


def test_an_agent_that_fills_the_containers_disk_is_a_verifier_failure_not_a_crash(tmp_path, monkeypatch):
    """A solution that fills the writable layer (a TB2 reference building Caffe did, within its
    1 GiB): the tests cannot be copied in. That is the episode's recorded verifier failure; it
    had escaped as an OSError and stopped `tasks check`."""
    monkeypatch.setenv("PRACTICUM_HOME", str(tmp_path / "home"))
    files = {
        "instruction.md": "Fill the disk.\n",
        "task.toml": "[environment]\nstorage_mb = 48\n[verifier]\ntimeout_sec = 60\n",
        "environment/Dockerfile": "FROM ubuntu:24.04\nWORKDIR /app\n",
        "solution/solve.sh": "#!/bin/bash\nhead -c 200M /dev/zero > /app/fill; "
                             "for i in $(seq 1 20000); do echo x > /app/f$i || break; done; exit 0\n",
        "tests/test_outputs.py": "def test_x():\n    assert True\n" + "# padding\n" * 2000,
        "tests/test.sh": "#!/bin/bash\nmkdir -p /logs/verifier\necho 1 > /logs/verifier/reward.txt\n",
    }
    domain = _task(tmp_path / "tasks" / "disk-filler", files)
    ref, untouched = _reference_and_untouched(domain)
    assert ref.failed_step == "verifier" and ref.score is not None and ref.score.value == 0.0, ref
    assert "the tests could not be put in place" in ref.score.explanation and "No space left" in ref.score.explanation
    assert untouched.score is not None and untouched.score.value == 1.0  # the disk was full only where the solution filled it


def test_a_task_whose_scripts_became_unreadable_is_an_environment_failure(tmp_path, monkeypatch):
    """solve.sh removed after the task was loaded (a task folder edited under a running job): the
    episode's reset fails as an environment failure naming it, instead of an OSError that ends the run."""
    monkeypatch.setenv("PRACTICUM_HOME", str(tmp_path / "home"))
    domain = _task(tmp_path / "tasks" / "vanishing", {
        "instruction.md": "x\n", "task.toml": "[verifier]\ntimeout_sec = 30\n",
        "environment/Dockerfile": "FROM ubuntu:24.04\nWORKDIR /app\n",
        "solution/solve.sh": "#!/bin/bash\ntrue\n",
        "tests/test.sh": "#!/bin/bash\nmkdir -p /logs/verifier; echo 1 > /logs/verifier/reward.txt\n"})
    (t,) = domain.source.eval_tasks()
    (tmp_path / "tasks" / "vanishing" / "solution" / "solve.sh").unlink()
    env = domain.make_env()
    with pytest.raises(EnvironmentFailure, match="cannot read its scripts"):
        asyncio.run(env.reset(t))


def test_a_server_the_agent_leaves_running_is_there_for_the_verifier(tmp_path, monkeypatch):
    """"Start a server on 127.0.0.1:8080 and keep it running" (a public Harbor task): in container
    mode what the agent starts in the background lives on to be probed, as in Harbor's container."""
    monkeypatch.setenv("PRACTICUM_HOME", str(tmp_path / "home"))
    domain = _task(tmp_path / "tasks" / "serve-health", {
        "instruction.md": "Serve /app on 127.0.0.1:8080 and keep the server running.\n",
        "task.toml": "[verifier]\ntimeout_sec = 60\n",
        "environment/Dockerfile": "FROM debian:12-slim\nWORKDIR /app\nRUN echo ok > /app/health\n",
        # Harbor's compose: the main service's environment reaches the agent and the verifier
        "environment/docker-compose.yaml": "services:\n  main:\n    environment:\n      - TEST_DIR=${TEST_DIR}\n",
        "solution/solve.sh": "#!/bin/bash\nnohup python3 -m http.server 8080 --bind 127.0.0.1 --directory /app "
                             ">/tmp/server.log 2>&1 &\nfor i in $(seq 50); do python3 -c \"import urllib.request as u; "
                             "u.urlopen('http://127.0.0.1:8080/health')\" 2>/dev/null && break; sleep 0.1; done\n",
        "tests/test.sh": "#!/bin/bash\nmkdir -p /logs/verifier\n[ \"$TEST_DIR\" = /tests ] && python3 -c \"import urllib.request as u; "
                         "assert u.urlopen('http://127.0.0.1:8080/health', timeout=5).read() == b'ok\\n'\" "
                         "&& echo 1 > /logs/verifier/reward.txt || echo 0 > /logs/verifier/reward.txt\n",
    })
    ref, untouched = _reference_and_untouched(domain)
    assert ref.score is not None and ref.score.value == 1.0, ref
    assert untouched.score is not None and untouched.score.value == 0.0, untouched


@pytest.mark.parametrize("how", sorted(PIP_BOOTSTRAPS))
def test_a_verifier_that_pip_installs_pytest_then_runs_python_m_pytest(tmp_path, monkeypatch, how):
    """`pip install pytest` then `python3 -m pytest` (no network in the verifier): the install is
    served from the verifier toolchain and the interpreter then imports it - the reference
    scores 1 and the untouched workspace 0."""
    monkeypatch.setenv("PRACTICUM_HOME", str(tmp_path / "home"))
    task = tmp_path / "tasks" / "pip-bootstrap"
    files = {
        "instruction.md": "Write 42 to /app/answer.txt.\n",
        "task.toml": "[verifier]\ntimeout_sec = 120\n",
        "environment/Dockerfile": "FROM debian:12-slim\nWORKDIR /app\n",
        "solution/solve.sh": "#!/bin/bash\necho 42 > /app/answer.txt\n",
        "tests/test_outputs.py": "def test_answer():\n    assert open('/app/answer.txt').read().strip() == '42'\n",
        "tests/test.sh": "#!/bin/bash\nmkdir -p /logs/verifier\n" + PIP_BOOTSTRAPS[how]
                         + "python3 -m pytest -q /tests/test_outputs.py && echo 1 > /logs/verifier/reward.txt "
                           "|| echo 0 > /logs/verifier/reward.txt\n",
    }
    ref, untouched = _reference_and_untouched(_task(task, files))
    assert ref.score is not None and ref.score.value == 1.0, ref
    assert untouched.score is not None and untouched.score.value == 0.0, untouched
