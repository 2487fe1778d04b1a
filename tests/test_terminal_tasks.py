"""Terminal task folders: every shipped task is sound, and malformed folders produce problems that
name the file at fault.

These checks are static. Running each shipped task's reference solution (reward 1) and an
untouched workspace (reward 0) needs the sandboxed terminal environment; during development
``tools/run_task_locally.py`` does it as root in a mount namespace.
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path

import pytest

from practicum.domains.terminal.tasks import (
    DEFAULT_WORKDIR,
    TaskSpec,
    check_task,
    load_task,
    load_tasks,
    read_reward,
)
from practicum.errors import TaskError, VerifierFailure

REPO = Path(__file__).resolve().parents[1]
SHIPPED = REPO / "tasks" / "terminal"
SHIPPED_DIRS = sorted(d for d in SHIPPED.iterdir() if (d / "task.toml").exists())
PYTEST_VERIFIED = [d for d in SHIPPED_DIRS if (d / "tests" / "test_outputs.py").exists()]

GOOD_TEST_SH = "#!/bin/bash\nset -u\nmkdir -p /logs/verifier\necho 1 > /logs/verifier/reward.txt\n"


def make_task(root: Path, name: str = "t", *, toml: str | None = None, instruction: str | None = "Do it.\n",
              test_sh: str | None = GOOD_TEST_SH, solve_sh: str | None = "#!/bin/bash\ntrue\n",
              files: dict[str, str] | None = None) -> Path:
    """A minimal valid task folder; each argument replaces (None: omits) one part of it."""
    d = root / name
    d.mkdir(parents=True)
    if instruction is not None:
        (d / "instruction.md").write_text(instruction)
    (d / "task.toml").write_text(toml if toml is not None else "[agent]\ntimeout_sec = 60.0\n")
    (d / "environment").mkdir()
    (d / "environment" / "main.py").write_text("print('hi')\n")
    for rel, text in (files or {}).items():
        (d / rel).parent.mkdir(parents=True, exist_ok=True)
        (d / rel).write_text(text)
    for rel, script in (("tests/test.sh", test_sh), ("solution/solve.sh", solve_sh)):
        if script is not None:
            (d / rel).parent.mkdir(exist_ok=True)
            (d / rel).write_text(script)
            (d / rel).chmod(0o755)
    return d


def messages(problems, severity="error") -> list[str]:
    return [str(p) for p in problems if p.severity == severity]


# --- the shipped tasks -----------------------------------------------------------------------------


def test_enough_varied_tasks_ship():
    assert len(SHIPPED_DIRS) >= 25
    tasks = load_tasks(SHIPPED)
    assert [t.name for t in tasks] == [d.name for d in SHIPPED_DIRS]
    categories = {t.category for t in tasks}
    assert {"debugging", "feature", "build", "shell", "git", "refactoring", "data"} <= categories
    assert all(t.difficulty in ("easy", "medium", "hard") for t in tasks)


@pytest.mark.parametrize("task_dir", SHIPPED_DIRS, ids=[d.name for d in SHIPPED_DIRS])
def test_shipped_task_has_no_problem(task_dir: Path):
    assert [str(p) for p in check_task(task_dir)] == []
    task = load_task(task_dir)
    assert task.solution_script is not None
    assert task.workdir.startswith("/")
    # the verifier writes its reward itself, at the end, and never asks for the network
    test_sh = task.test_script.read_text()
    assert "/logs/verifier" in test_sh and "reward.txt" in test_sh
    for script in [task.test_script, task.solution_script] + ([task.setup_script] if task.setup_script else []):
        assert script.stat().st_mode & stat.S_IXUSR, script
    # nothing the agent must not see is seeded into the workspace
    assert not any(f.startswith(("tests/test_outputs", "solution/")) for f in task.environment_files)


@pytest.mark.parametrize("task_dir", PYTEST_VERIFIED, ids=[d.name for d in PYTEST_VERIFIED])
def test_shipped_pytest_verifiers_expect_the_right_count(task_dir: Path):
    """A verifier that counts its tests must count what its test file holds (parametrised
    cases included), or the reference solution could never score 1."""
    test_sh = (task_dir / "tests" / "test.sh").read_text()
    m = re.search(r'junit\.xml" (\d+) <<', test_sh)
    assert m, "test.sh does not check the number of tests that ran"
    source = (task_dir / "tests" / "test_outputs.py").read_text()
    plain = len(re.findall(r"^def test_", source, re.M))
    assert plain <= int(m.group(1)), "fewer tests expected than the file defines"
    if "parametrize" not in source:
        assert plain == int(m.group(1))


# --- malformed folders -----------------------------------------------------------------------------


def test_minimal_task_loads_with_harbor_defaults(tmp_path):
    task = load_task(make_task(tmp_path, toml=""))
    assert task.workdir == DEFAULT_WORKDIR == "/app"
    assert (task.agent_timeout_s, task.verifier_timeout_s) == (600.0, 600.0)
    env = task.spec.environment
    assert (env.cpus, env.memory_mb, env.storage_mb, env.gpus) == (1, 2048, 10240, 0)
    assert task.environment_files == ["main.py"]
    assert task.test_files == ["test.sh"] and task.solution_files == ["solve.sh"]
    assert task.instruction == "Do it.\n"


def test_harbor_example_toml_is_accepted(tmp_path):
    """The example task.toml of Harbor's documentation (both schema generations)."""
    old = """version = "1.0"
[metadata]
author_name = "Steve Jobs"
author_email = "steve@apple.com"
difficulty = "easy"
category = "programming"
tags = ["trivial"]
[verifier]
timeout_sec = 120.0
[agent]
timeout_sec = 120.0
[environment]
build_timeout_sec = 600.0
cpus = 1
memory_mb = 2048
storage_mb = 10240
"""
    new = """schema_version = "1.1"
[task]
name = "org/hello"
description = "A short description of the task"
authors = [{ name = "Steve Jobs", email = "steve@apple.com" }]
keywords = ["trivial", "programming"]
[metadata]
category = "programming"
[verifier]
timeout_sec = 120.0
env = { API_KEY = "sk-test-123" }
user = "root"
[agent]
timeout_sec = 90.0
user = "agent"
[solution]
env = { API_KEY = "sk-test-123" }
[environment]
build_timeout_sec = 600.0
docker_image = "some-org/some-name:some-tag"
cpus = 2
memory = "4G"
allow_internet = false
"""
    a = load_task(make_task(tmp_path, "old", toml=old))
    assert (a.spec.version, a.verifier_timeout_s, a.difficulty, a.tags) == ("1.0", 120.0, "easy", ["trivial"])
    d = make_task(tmp_path, "new", toml=new)
    b = load_task(d)
    assert (b.spec.version, b.agent_timeout_s, b.spec.environment.cpus) == ("1.1", 90.0, 2)
    assert b.spec.environment.memory_mb == 4096  # Harbor's deprecated size string, converted
    assert b.spec.verifier.env == {"API_KEY": "sk-test-123"}
    assert any("docker_image is not used" in m for m in messages(check_task(d), "warning"))


def test_every_problem_is_reported_with_its_file(tmp_path):
    d = make_task(tmp_path, instruction="  \n", test_sh=None, solve_sh=None,
                  toml="[agent]\ntimeout_secs = 10\n[verifier]\ntimeout_sec = -1\n[environment]\ncpus = 'two'\n")
    problems = check_task(d)
    by_file = {(p.file.relative_to(d.resolve()).as_posix(), p.severity) for p in problems}
    assert {("instruction.md", "error"), ("task.toml", "error"), ("tests/test.sh", "error"),
            ("solution/solve.sh", "warning")} <= by_file
    text = "\n".join(messages(problems))
    assert "[agent] timeout_secs: unknown field" in "\n".join(messages(problems, "warning"))  # Harbor ignores it
    assert "[verifier] timeout_sec: Input should be greater than 0" in text
    assert "[environment] cpus:" in text
    with pytest.raises(TaskError) as e:
        load_task(d)
    assert str(e.value).count("\n") >= 4  # all four errors, not only the first


@pytest.mark.parametrize(("toml", "expected"), [
    ("[agent\ntimeout_sec = 1", "not valid TOML"),
    ("[environment]\ngpus = 1\n", "no GPU"),
    ("[environment]\nmemory = 'lots'\n", "must look like '2G'"),
    ('[environment]\nos = "windows"\n', "only linux"),
    ("[metadata\n", "not valid TOML"),
])
def test_bad_task_toml(tmp_path, toml, expected):
    d = make_task(tmp_path, toml=toml)
    errors = [p for p in check_task(d) if p.severity == "error"]
    assert errors and all(p.file == d.resolve() / "task.toml" for p in errors)
    assert any(expected in p.message for p in errors), [p.message for p in errors]


@pytest.mark.parametrize(("toml", "expected"), [
    ("timeout_sec = 5\n", "timeout_sec: unknown field (Harbor's fields here: schema_version, version, metadata"),
    ("[task]\nname = 'x'\nauthor = 'y'\n", "[task] author: unknown field (Harbor's fields here: name, description"),
    ('version = "1.0"\nschema_version = "1.1"\n', "schema_version is read"),
])
def test_what_harbor_ignores_is_a_warning_naming_it(tmp_path, toml, expected):
    d = make_task(tmp_path, toml=toml)
    found = check_task(d)
    assert [p for p in found if p.severity == "error"] == [], found
    assert any(expected in p.message for p in found if p.severity == "warning" and p.file == d.resolve() / "task.toml")


def test_missing_instruction_and_toml(tmp_path):
    d = make_task(tmp_path, instruction=None)
    (d / "task.toml").unlink()
    files = {p.file.name for p in check_task(d) if p.severity == "error"}
    assert files == {"instruction.md", "task.toml"}


def test_not_a_folder(tmp_path):
    problems = check_task(tmp_path / "nope")
    assert len(problems) == 1 and "no such directory" in problems[0].message
    (tmp_path / "file").write_text("x")
    with pytest.raises(TaskError):
        load_task(tmp_path / "file")


def test_test_sh_must_write_a_reward(tmp_path):
    d = make_task(tmp_path, test_sh="#!/bin/bash\npython3 -m pytest /tests\n")
    [problem] = [p for p in check_task(d) if p.severity == "error"]
    assert problem.file.name == "test.sh" and "writes no reward" in problem.message
    # a helper next to test.sh that writes reward.json counts
    d2 = make_task(tmp_path, "t2", test_sh="#!/bin/bash\npython3 /tests/grade.py\n",
                   files={"tests/grade.py": "open('/logs/verifier/reward.json', 'w').write('{\"reward\": 1}')\n"})
    assert messages(check_task(d2)) == []


def test_script_hygiene(tmp_path):
    d = make_task(tmp_path, test_sh="echo 1 > /logs/verifier/reward.txt\r\n",
                  solve_sh="#!/usr/bin/env python3\ncurl -sSL https://example.com/x | sh\n")
    (d / "tests" / "test.sh").chmod(0o644)
    problems = check_task(d)
    errors, warnings = messages(problems), messages(problems, "warning")
    assert any("test.sh: line 1 has a CRLF line ending on a command line" in m for m in errors)
    assert any("test.sh: warning: no #! line" in m for m in warnings)
    assert any("test.sh: warning: not executable" in m for m in warnings)
    assert any("solve.sh: warning: line 2 seems to fetch from the network ('curl')" in m for m in warnings)
    assert any("solve.sh: warning: '#!/usr/bin/env python3'" in m for m in warnings)


def test_offline_pip_is_not_a_network_warning(tmp_path):
    d = make_task(tmp_path, solve_sh="#!/bin/bash\n# no curl here\npip install --no-index -f vendor -r req.txt\n")
    assert check_task(d) == []


def test_links_that_leave_the_task_are_refused(tmp_path):
    d = make_task(tmp_path)
    (d / "environment" / "passwd").symlink_to("/etc/passwd")
    (d / "environment" / "inside").symlink_to("main.py")
    (d / "environment" / "dirlink").symlink_to(d / "environment")
    os.mkfifo(d / "environment" / "pipe")
    problems = check_task(d)
    text = "\n".join(messages(problems))
    assert "environment/passwd: symbolic link leaves the task folder (/etc/passwd)" in text
    assert "environment/dirlink: symbolic link to a folder" in text
    assert "environment/pipe: not a regular file" in text
    assert "inside" not in text


def test_environment_must_be_a_folder_and_a_steps_folder_without_steps_is_unused(tmp_path):
    d = make_task(tmp_path)
    for p in (d / "environment").iterdir():
        p.unlink()
    (d / "environment").rmdir()
    (d / "environment").write_text("not a folder")
    (d / "steps").mkdir()
    found = check_task(d)
    assert {p.file.name for p in found if p.severity == "error"} == {"environment"}
    assert any(p.file.name == "steps" and "declares no [[steps]]" in p.message for p in found if p.severity == "warning")


def test_environment_is_optional(tmp_path):
    d = make_task(tmp_path)
    for p in (d / "environment").iterdir():
        p.unlink()
    (d / "environment").rmdir()
    assert load_task(d).environment_files == []


def test_dockerfile_workdir_and_what_is_not_seeded(tmp_path):
    d = make_task(tmp_path, files={
        "environment/Dockerfile": "FROM python:3.11-slim\nARG BASE=/srv\n# a comment\nWORKDIR ${BASE}/shop\nCOPY . .\n",
        "environment/.practicum-setup.sh": "#!/bin/bash\ngit init -q\n",
        "environment/docker-compose.yaml": "services: {}\n",
    })
    (d / "environment" / ".practicum-setup.sh").chmod(0o755)
    task = load_task(d)
    assert task.workdir == "/srv/shop"
    assert task.environment_files == ["main.py"]
    assert task.setup_script == d.resolve() / "environment" / ".practicum-setup.sh"
    assert task.dockerfile is not None
    assert messages(check_task(d), "warning") == [
        f"{d.resolve()}/environment/docker-compose.yaml: warning: compose services are not started by Practicum"]


@pytest.mark.parametrize(("dockerfile", "expected"), [
    ("FROM x\nWORKDIR $NOWHERE/app\n", "WORKDIR uses NOWHERE"),
    ("FROM x\nWORKDIR /tests\n", "lies in a folder the environment mounts itself"),
    ("FROM x\nWORKDIR /logs/app\n", "lies in a folder the environment mounts itself"),
    ("FROM x\nWORKDIR /\n", "absolute folder other than /"),
    ("FROM x\nCOPY missing.txt /app/\n", "COPY source 'missing.txt' is not in environment/"),
    ("FROM x\nCOPY --from=build /a /b\n", "line 2: COPY --from=build: copying from another image"),
    ("FROM x\nADD https://example.com/a.tgz /opt/\n", "fetching a URL"),
])
def test_bad_workdir(tmp_path, dockerfile, expected):
    d = make_task(tmp_path, files={"environment/Dockerfile": dockerfile})
    [problem] = [p for p in check_task(d) if p.severity == "error"]
    assert problem.file.name == "Dockerfile" and expected in problem.message


def test_dockerfile_workdir_rules():
    from practicum.envs.dockerfile import parse_dockerfile

    def workdir(text: str) -> str | None:
        return parse_dockerfile(text).workdir

    assert workdir("FROM a\n") is None  # the task then uses /app
    assert workdir("FROM a\nWORKDIR /x\nWORKDIR y/../z\n") == "/x/z"
    assert workdir("FROM a AS build\nWORKDIR /build\nFROM b\n") is None  # last stage counts
    assert workdir("FROM a\nENV ROOT=/opt \\\n    OTHER=1\nWORKDIR $ROOT/app\n") == "/opt/app"
    assert workdir("from a\nworkdir /lower\n") == "/lower"
    assert workdir('FROM a\nWORKDIR "/quoted dir"\n') == "/quoted dir"


def test_load_tasks(tmp_path):
    root = tmp_path / "tasks"
    make_task(root, "b")
    make_task(root, "a")
    (root / "notes").mkdir()  # a folder without task.toml is not a task
    assert [t.name for t in load_tasks(root)] == ["a", "b"]
    assert [t.name for t in load_tasks(root / "a")] == ["a"]
    make_task(root, "c", test_sh=None)
    make_task(root, "d", instruction="")
    with pytest.raises(TaskError) as e:
        load_tasks(root)
    assert "c/tests/test.sh" in str(e.value) and "d/instruction.md" in str(e.value)
    with pytest.raises(TaskError, match="no task folders"):
        load_tasks(tmp_path / "tasks" / "notes")


def test_to_task_record(tmp_path):
    task = load_task(make_task(tmp_path, "hello", toml='[metadata]\ndifficulty = "easy"\ncategory = "shell"\n'))
    record = task.to_task()
    assert record.id == "terminal/hello" and record.domain == "terminal"
    assert [(m.role, m.content) for m in record.prompt] == [("user", "Do it.\n")]
    assert record.metadata["workdir"] == "/app" and record.metadata["category"] == "shell"
    assert record.target is None  # the hidden tests stay in the folder


def test_spec_rejects_unknown_sections():
    with pytest.raises(ValueError):
        TaskSpec.model_validate({"agents": {}})


# --- rewards ---------------------------------------------------------------------------------------


def test_read_reward(tmp_path):
    (tmp_path / "reward.txt").write_text("0.75\n")
    assert read_reward(tmp_path).value == 0.75
    (tmp_path / "reward.json").write_text('{"reward": 0.1}')
    assert read_reward(tmp_path).value == 0.75  # reward.txt wins, as in Harbor
    (tmp_path / "reward.txt").unlink()
    (tmp_path / "reward.json").write_text('{"reward": 1, "tests_passed": 0.5, "note": "x", "flag": true}')
    score = read_reward(tmp_path)
    assert score.value == 1.0 and score.components == {"tests_passed": 0.5}


@pytest.mark.parametrize(("name", "content", "expected"), [
    ("reward.txt", "pass", "not a number"),
    ("reward.txt", "1.5", "outside [0, 1]"),
    ("reward.txt", "nan", "outside [0, 1]"),
    ("reward.json", "{bad", "not JSON"),
    ("reward.json", '{"reward": true}', '"reward" is True; it must be a number'),
    ("reward.json", "[1]", "must be an object"),
    ("reward.json", "{}", "must be an object"),
    ("reward.json", '{"correctness": 1, "note": "fast"}', "named reward 'note' is 'fast'"),
    ("reward.json", '{"correctness": 1, "speed": 2}', "reward.json 'speed': reward 2.0 is outside [0, 1]"),
])
def test_bad_rewards_are_verifier_failures(tmp_path, name, content, expected):
    (tmp_path / name).write_text(content)
    with pytest.raises(VerifierFailure, match=re.escape(expected)):
        read_reward(tmp_path)


def test_no_reward(tmp_path):
    with pytest.raises(VerifierFailure, match="wrote no reward"):
        read_reward(tmp_path)


def test_loading_a_task_hides_its_tests_and_solution_from_later_sandboxes(monkeypatch):
    from practicum.domains.terminal.tasks import load_task, load_tasks
    from practicum.sandbox import hidden

    monkeypatch.setattr(hidden, "_hidden", set())
    folder = REPO / "tasks" / "terminal" / "fix-leap-years"
    load_task(folder)
    assert set(hidden.registered()) == {str((folder / "tests").resolve()), str((folder / "solution").resolve())}
    monkeypatch.setattr(hidden, "_hidden", set())
    n = len(load_tasks(REPO / "tasks" / "terminal"))
    assert len(hidden.registered()) == 2 * n and all(p.endswith(("/tests", "/solution")) for p in hidden.registered())


def test_a_reward_json_nested_past_the_parsers_depth_is_a_verifier_failure(tmp_path):
    (tmp_path / "reward.json").write_text("[" * 5000 + "]" * 5000)
    with pytest.raises(VerifierFailure, match="not JSON"):
        read_reward(tmp_path)


COMPOSE_TASK_ROOT = """services:
  main:
    build:
      context: ${CONTEXT_DIR}/..
      dockerfile: ${CONTEXT_DIR}/Dockerfile
    image: ${MAIN_IMAGE_NAME}
    environment:
      - TEST_DIR=${TEST_DIR}
  cache:
    image: redis:7
"""


def test_a_compose_build_context_is_the_image_build_context(tmp_path):
    """Harbor tasks that COPY from the task folder set the main service's build context to
    ${CONTEXT_DIR}/..: the static check finds the sources there and the build uses that context."""
    d = make_task(tmp_path, files={"environment/Dockerfile": "FROM ubuntu:24.04\nWORKDIR /app\nCOPY app/ /app/\n",
                                   "environment/docker-compose.yaml": COMPOSE_TASK_ROOT, "app/main.py": "print(1)\n"})
    task = load_task(d)
    assert task.build_context == d.resolve()
    assert task.compose_env == {"TEST_DIR": "/tests"}  # Harbor's variables, filled in as Harbor fills them
    said = messages(check_task(d), "warning")
    assert any("not started by Practicum: cache" in m for m in said) and not any("services.main:" in m for m in said)
    no_app = make_task(tmp_path, "no-app", files={"environment/Dockerfile": "FROM ubuntu:24.04\nCOPY app/ /app/\n"})
    assert any("COPY source 'app/' is not in environment/" in m for m in messages(check_task(no_app)))


@pytest.mark.parametrize(("context", "expected"), [
    ("${CONTEXT_DIR}/../..", "leaves the task folder"),
    ("${HOME}", "HOME is not one of the variables Harbor sets"),
])
def test_a_compose_build_context_outside_the_task_or_on_other_variables_is_refused(tmp_path, context, expected):
    d = make_task(tmp_path, files={"environment/Dockerfile": "FROM ubuntu:24.04\n",
                                   "environment/docker-compose.yaml": f"services:\n  main:\n    build:\n      context: {context}\n"})
    assert any(expected in m for m in messages(check_task(d))), messages(check_task(d))


def test_a_compose_environment_on_a_variable_harbor_does_not_set_is_refused(tmp_path):
    compose = "services:\n  main:\n    environment:\n      LOGS: ${HOST_VERIFIER_LOGS_PATH}\n      MODE: fast\n"
    d = make_task(tmp_path, files={"environment/Dockerfile": "FROM ubuntu:24.04\n", "environment/docker-compose.yaml": compose})
    assert any("HOST_VERIFIER_LOGS_PATH is not one of the variables Harbor sets" in m for m in messages(check_task(d)))
