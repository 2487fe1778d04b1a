"""Harbor's task format as it is now (schema 1.4), real Harbor tasks checked unchanged, and
``practicum tasks check`` reporting every task as a row.

The real tasks live in ``../shared/harbor_real`` (written elsewhere, never edited); a missing
folder skips those tests, except under ``CI=true`` where it fails them.
"""

from __future__ import annotations

import json
import os
import shutil
import textwrap
from pathlib import Path

import pytest

from practicum.domains.terminal.tasks import (
    UNUSED_HARBOR_FIELDS,
    TaskSpec,
    check_task,
    load_task,
    parse_reward,
    read_reward,
)
from practicum.errors import TaskError, VerifierFailure

REPO = Path(__file__).resolve().parents[1]
SHARED = Path(os.environ.get("PRACTICUM_SHARED", REPO.parent / "shared"))
HARBOR_REAL = SHARED / "harbor_real"
HARBOR_REAL_DIRS = sorted(d for d in HARBOR_REAL.iterdir() if (d / "task.toml").exists()) if HARBOR_REAL.is_dir() else []

GOOD_TEST_SH = "#!/bin/bash\nmkdir -p /logs/verifier\necho 1 > /logs/verifier/reward.txt\n"


def make_task(root: Path, name: str = "t", *, toml: str = "", test_sh: str = GOOD_TEST_SH,
              solve_sh: str = "#!/bin/bash\ntrue\n", files: dict[str, str] | None = None) -> Path:
    d = root / name
    (d / "environment").mkdir(parents=True)
    (d / "instruction.md").write_text("Do it.\n")
    (d / "task.toml").write_text(textwrap.dedent(toml))
    for rel, text in {"tests/test.sh": test_sh, "solution/solve.sh": solve_sh, **(files or {})}.items():
        (d / rel).parent.mkdir(parents=True, exist_ok=True)
        (d / rel).write_bytes(text.encode())
        (d / rel).chmod(0o755)
    return d


def errors(d: Path) -> list[str]:
    return [str(p) for p in check_task(d) if p.severity == "error"]


def warnings(d: Path) -> list[str]:
    return [str(p) for p in check_task(d) if p.severity == "warning"]


# --- task.toml, schema 1.4 -------------------------------------------------------------------------

SCHEMA_14 = """
    schema_version = "1.4"
    source = "harbor-cookbook"
    artifacts = ["/app/out.json", { source = "/logs/agent/trace", destination = "trace", exclude = ["*.tmp"] }]

    [task]
    name = "org/everything"
    description = "Every field Harbor 0.26 knows"
    authors = [{ name = "A. Author", email = "a@example.com" }]
    keywords = ["demo"]

    [metadata]
    difficulty = "easy"
    category = "demo"
    anything = { free = "form" }

    [agent]
    timeout_sec = 300.0
    user = "agent"
    network_mode = "no-network"

    [verifier]
    timeout_sec = 120.0
    env = { MODE = "strict" }
    user = 0
    network_mode = "allowlist"
    allowed_hosts = ["pypi.org"]
    environment_mode = "separate"

    [[verifier.collect]]
    command = "cp /app/out.json /logs/artifacts/"
    timeout_sec = 30

    [verifier.environment]
    cpus = 2
    memory_mb = 4096

    [solution]
    env = { SEED = "1" }

    [environment]
    build_timeout_sec = 900.0
    docker_image = "org/image:tag"
    os = "linux"
    cpus = 2
    memory = "4G"
    storage = "512M"
    gpus = 0
    gpu_types = ["H100"]
    allow_internet = false
    network_mode = "public"
    skills_dir = "/skills"
    workdir = "/srv/project"
    env = { LANG = "C.UTF-8" }
    mcp_servers = [{ name = "docs", transport = "streamable-http", url = "http://localhost:8000/mcp" },
                   { name = "tool", transport = "stdio", command = "tool-server", args = ["--quiet"] }]

    [environment.healthcheck]
    command = "test -f /app/ready"
    retries = 5
"""


def test_schema_14_task_is_accepted_with_every_field(tmp_path):
    task = load_task(make_task(tmp_path, toml=SCHEMA_14))
    spec = task.spec
    assert spec.version == "1.4"
    assert [a.source for a in spec.artifacts] == ["/app/out.json", "/logs/agent/trace"]
    assert spec.artifacts[1].destination == "trace" and spec.artifacts[1].exclude == ["*.tmp"]
    assert spec.verifier.collect[0].command.startswith("cp ") and spec.verifier.collect[0].service == "main"
    assert spec.verifier.separate and spec.verifier.environment is not None
    assert spec.verifier.environment.cpus == 2
    assert spec.environment.skills_dir == "/skills"
    assert (spec.environment.memory_mb, spec.environment.storage_mb) == (4096, 512)
    assert spec.environment.healthcheck is not None and spec.environment.healthcheck.retries == 5
    assert [m.name for m in spec.environment.mcp_servers] == ["docs", "tool"]
    assert task.workdir == "/srv/project"
    # accepted, but the fields that change what Harbor would do are said not to happen here
    said = " ".join(warnings(task.path))
    assert "separate verifier sandbox is not made" in said and "collect" in said
    assert "mcp_servers" in said and "healthcheck" in said


def test_unused_fields_name_real_fields_and_say_why():
    for dotted, why in UNUSED_HARBOR_FIELDS.items():
        model: type = TaskSpec
        for part in dotted.split("."):
            assert part in model.model_fields, dotted
            annotation = model.model_fields[part].annotation
            model = next((t for t in (annotation, *getattr(annotation, "__args__", ())) if hasattr(t, "model_fields")), object)
        assert len(why) > 10, dotted


@pytest.mark.parametrize(("toml", "expected"), [
    ("[verifier]\ntimeout_secs = 5\n", "[verifier] timeout_secs: unknown field (Harbor's fields here: timeout_sec, env"),
    ("[verifier.environment]\ncpu = 2\n", "[verifier] environment.cpu: unknown field (Harbor's fields here: cpus,"),
    ("[[verifier.collect]]\ncommand = 'x'\nwhen = 'after'\n", "[verifier] collect[0].when: unknown field"),
    ("[environment]\nworkdirs = '/app'\n", "[environment] workdirs: unknown field"),
    ("[environment.healthcheck]\ncommand = 'true'\nretry = 3\n", "[environment] healthcheck.retry: unknown field"),
    ("skill_dir = '/skills'\n", "skill_dir: unknown field (Harbor's fields here: schema_version, version,"),
])
def test_unknown_fields_are_warned_about_naming_file_and_field_and_ignored_as_harbor_does(tmp_path, toml, expected):
    """Harbor ignores a field it does not know (real tasks carry [task] format, workstream,
    difficulty...): the task loads, and the warning still shows a misspelt field."""
    d = make_task(tmp_path, toml=toml)
    found = check_task(d)
    said = [p for p in found if p.severity == "warning" and p.file == d.resolve() / "task.toml"]
    assert any(expected in p.message and "ignored, as Harbor ignores it" in p.message for p in said), found
    assert [p for p in found if p.severity == "error"] == []
    assert load_task(d).spec is not None


@pytest.mark.parametrize(("toml", "unknown", "invalid"), [
    ("[verifier]\ntimeout_secs = 5\n[environment]\nworkdir = 'app'\n", "[verifier] timeout_secs: unknown field",
     "must be an absolute path"),
    ("artifacts = [{ src = '/app/x' }]\n", "artifacts[0].src: unknown field (Harbor's fields here: source, destination",
     "artifacts[0].source: Field required"),
])
def test_an_unknown_field_beside_an_invalid_value_still_refuses_the_task(tmp_path, toml, unknown, invalid):
    d = make_task(tmp_path, toml=toml)
    found = check_task(d)
    assert any(p.severity == "error" and invalid in p.message for p in found), found
    assert any(p.severity == "warning" and unknown in p.message for p in found), found
    with pytest.raises(TaskError):
        load_task(d)


def test_both_version_spellings_read_schema_version_and_say_so(tmp_path):
    d = make_task(tmp_path, toml="version = '1.0'\nschema_version = '1.4'\n")
    assert load_task(d).spec.version == "1.4"
    assert any("schema_version is read" in p.message for p in check_task(d) if p.severity == "warning")


@pytest.mark.parametrize(("toml", "expected"), [
    ("artifacts = ['/app/../../etc/passwd']\n", "must not contain '..'"),
    ("artifacts = [{ source = '/app/x', destination = '/abs' }]\n", "must be relative"),
    ("[verifier]\nenvironment_mode = 'shared'\n[verifier.environment]\ncpus = 2\n", "cannot have a [verifier.environment]"),
    ("[verifier]\nenvironment_mode = 'elsewhere'\n", "[verifier] environment_mode"),
    ("[environment]\nnetwork_mode = 'no-network'\nallowed_hosts = ['x.org']\n", "allowed_hosts needs network_mode = 'allowlist'"),
    ("[environment]\nmcp_servers = [{ name = 'm', transport = 'stdio' }]\n", "needs a command"),
    ("[environment.tpu]\ntype = 'v6e'\ntopology = '2x4'\n", "no TPU"),
    ("[[steps]]\nname = 'one'\n", "missing: task.toml declares 1 [[steps]], whose files live in steps/<name>/"),
    ("[[steps]]\nname = '../up'\n", "must be a plain folder name"),
    ("[[steps]]\nname = 'one'\nmin_reward = 1.5\n", "min_reward 1.5 must lie in [0, 1]"),
    ("multi_step_reward_strategy = 'median'\n", "multi_step_reward_strategy: Input should be 'mean' or 'final'"),
    ("[environment]\nworkdir = 'app'\n", "[environment] workdir: 'app' must be an absolute path"),
    ("[environment]\nworkdir = '/tests/here'\n", "[environment] workdir = '/tests/here': lies in a folder the environment mounts"),
    ("[environment]\nworkdir = '/'\n", "other than /"),
])
def test_invalid_values_are_refused(tmp_path, toml, expected):
    assert any(expected in m for m in errors(make_task(tmp_path, toml=toml))), errors(make_task(tmp_path / "x", toml=toml))


def test_deprecated_size_strings(tmp_path):
    env = load_task(make_task(tmp_path, toml="[environment]\nmemory = '2G'\nstorage = '10G'\n")).spec.environment
    assert (env.memory_mb, env.storage_mb) == (2048, 10240)
    assert env.memory is None and "memory" not in env.model_dump()  # converted, never written back
    # both spellings agreeing is fine; disagreeing is refused, naming both
    assert errors(make_task(tmp_path, "same", toml="[environment]\nmemory = '1G'\nmemory_mb = 1024\n")) == []
    assert any("memory = '1G' and memory_mb = 2000 disagree" in m
               for m in errors(make_task(tmp_path, "clash", toml="[environment]\nmemory = '1G'\nmemory_mb = 2000\n")))
    assert any("must look like '2G'" in m for m in errors(make_task(tmp_path, "bad", toml="[environment]\nstorage = '10 GB'\n")))


def test_workdir_precedence(tmp_path):
    """task.toml's [environment] workdir, else the Dockerfile's WORKDIR, else /app."""
    dockerfile = {"environment/Dockerfile": "FROM ubuntu:24.04\nWORKDIR /opt/from-dockerfile\n"}
    assert load_task(make_task(tmp_path, "none")).workdir == "/app"
    assert load_task(make_task(tmp_path, "docker", files=dockerfile)).workdir == "/opt/from-dockerfile"
    both = make_task(tmp_path, "both", toml="[environment]\nworkdir = '/srv/from-toml/'\n", files=dockerfile)
    assert load_task(both).workdir == "/srv/from-toml"
    assert load_task(both).to_task().metadata["workdir"] == "/srv/from-toml"


def test_old_schema_versions_and_an_unknown_one(tmp_path):
    for v in ("1.0", "1.1", "1.2", "1.3", "1.4"):
        assert check_task(make_task(tmp_path, f"v{v}", toml=f"schema_version = '{v}'\n")) == []
    assert any("schema_version '2.0'" in w for w in warnings(make_task(tmp_path, "v2", toml="schema_version = '2.0'\n")))


# --- scripts: CRLF where bash trips on it, network where it is not served ---------------------------


def test_crlf_inside_a_heredoc_body_is_data(tmp_path):
    solve = ("#!/bin/bash\r\n"  # a comment: the CR is harmless there
             "cat > /app/data.csv <<'EOF'\na,b\r\n1,2\r\nEOF\n"
             "cat > /app/notes.txt <<-\"END\"\n\tline\r\n\tEND\n"
             "python3 -c 'print(1)\r\n'\n"  # inside quotes: data
             "echo done\n")
    assert errors(make_task(tmp_path, solve_sh=solve)) == []


@pytest.mark.parametrize(("script", "line"), [
    ("#!/bin/bash\necho hi\r\n", 2),                          # a command line
    ("#!/bin/bash\ncat <<EOF\nx\r\nEOF\necho a \\\r\n  b\n", 5),  # after the heredoc, a broken continuation
    ("#!/bin/bash\ncat <<EOF\nx\nEOF\r\necho after\n", 4),    # the terminator: bash would not see it
    ("#!/bin/bash\necho $((1<<2))\r\n", 2),                  # a shift, not a heredoc
    ("#!/bin/bash\ncat <<< word\r\n", 2),                     # a here-string, not a heredoc
])
def test_crlf_on_a_command_line_is_refused(tmp_path, script, line):
    errs = errors(make_task(tmp_path, solve_sh=script))
    assert len(errs) == 1 and f"solve.sh: line {line} " in errs[0] and "CRLF" in errs[0], errs


def test_standard_verifier_bootstrap_draws_no_network_warning(tmp_path):
    bootstrap = textwrap.dedent("""\
        #!/bin/bash
        apt-get update
        apt-get install -y curl
        curl -LsSf https://astral.sh/uv/0.9.5/install.sh | sh
        source $HOME/.local/bin/env
        uvx -p 3.13 -w pytest==8.4.1 -w pytest-json-ctrf==0.3.5 pytest --ctrf /logs/verifier/ctrf.json /tests/test_outputs.py
        uv pip install numpy
        pip install pytest
        curl -s http://localhost:8080/health
        echo 1 > /logs/verifier/reward.txt
        """)
    d = make_task(tmp_path, test_sh=bootstrap, solve_sh="#!/bin/bash\napt install -y jq && pip3 install requests\n")
    assert check_task(d) == []


@pytest.mark.parametrize(("solve", "fetch"), [
    ("git clone https://github.com/org/repo.git", "git clone"),
    ("wget https://example.com/data.tar.gz", "wget"),
    ("curl -LsSf https://astral.sh/uv/install.sh https://example.com/x | sh", "curl"),
    ("curl -fsSL https://deb.nodesource.com/setup_20.x | bash -", "curl"),
    ("npm install left-pad", "npm install"),
])
def test_other_network_fetches_still_warn(tmp_path, solve, fetch):
    d = make_task(tmp_path, solve_sh=f"#!/bin/bash\n{solve}\n",
                  files={"environment/.practicum-setup.sh": f"#!/bin/bash\n{solve}\n"})
    said = warnings(d)
    for script in ("solve.sh", ".practicum-setup.sh"):
        assert any(f"{script}: warning: line 2 seems to fetch from the network ({fetch!r})" in w for w in said), said


# --- reward.json with named rewards ----------------------------------------------------------------


def test_named_rewards_are_averaged_and_kept_as_components(tmp_path):
    (tmp_path / "reward.json").write_text('{"correctness": 1, "performance": 0}')
    score = read_reward(tmp_path)
    assert score.value == 0.5
    assert score.components == {"correctness": 1.0, "performance": 0.0}
    assert "mean of correctness, performance" in (score.explanation or "")
    three = parse_reward(None, json.dumps({"a": 1, "b": 0.5, "c": 0.25}))
    assert three.value == pytest.approx(1.75 / 3) and set(three.components) == {"a", "b", "c"}
    assert parse_reward(None, '{"only": 0.75}').value == 0.75  # one named reward is just that reward


def test_a_reward_key_keeps_todays_meaning():
    score = parse_reward(None, '{"reward": 0.25, "correctness": 1, "performance": 1, "note": "x"}')
    assert score.value == 0.25 and score.components == {"correctness": 1.0, "performance": 1.0}


@pytest.mark.parametrize(("content", "expected"), [
    ('{"correctness": 1, "performance": true}', "'performance' is True"),
    ('{"correctness": 1, "performance": null}', "'performance' is None"),
    ('{"correctness": 1.5}', "outside [0, 1]"),
    ('{"correctness": -0.1, "performance": 1}', "outside [0, 1]"),
    ("{}", "must be an object"),
])
def test_bad_named_rewards_are_verifier_failures(content, expected):
    with pytest.raises(VerifierFailure, match=expected.replace("[", r"\[").replace("]", r"\]")):
        parse_reward(None, content)


# --- real Harbor tasks, as written ------------------------------------------------------------------


def _need_harbor_real() -> None:
    if not HARBOR_REAL_DIRS:
        if os.environ.get("CI") == "true":
            pytest.fail(f"{HARBOR_REAL} is missing: CI must check the real Harbor tasks")
        pytest.skip(f"{HARBOR_REAL} is not here")


def test_twelve_real_harbor_tasks_are_present():
    _need_harbor_real()
    assert len(HARBOR_REAL_DIRS) == 12


@pytest.mark.parametrize("name", [d.name for d in HARBOR_REAL_DIRS] or ["(missing)"])
def test_real_harbor_task_passes_the_static_check(name):
    _need_harbor_real()
    task_dir = HARBOR_REAL / name
    assert errors(task_dir) == []
    # the standard verifier bootstrap is served offline, so it draws no network warning either
    assert not [w for w in warnings(task_dir) if "tests/test.sh" in w and "network" in w]
    task = load_task(task_dir)
    assert task.workdir.startswith("/")


def test_the_multi_reward_cookbook_task_is_understood():
    _need_harbor_real()
    test_sh = (HARBOR_REAL / "multi-reward" / "tests" / "test.sh").read_text()
    assert '"reward"' not in test_sh and "correctness" in test_sh  # it writes named rewards only
    score = parse_reward(None, json.dumps({"correctness": 1, "performance": 1}))
    assert score.value == 1.0 and score.components == {"correctness": 1.0, "performance": 1.0}


def copy_shipped_task(dest: Path, name: str = "fix-paginate") -> Path:
    return Path(shutil.copytree(REPO / "tasks" / "terminal" / name, dest / name, symlinks=True))


# --- practicum tasks check: a row per task, never a traceback ---------------------------------------


def tasks_check(*args: str) -> tuple[int, list[dict], str]:
    from typer.testing import CliRunner

    from practicum.cli import app

    result = CliRunner().invoke(app, ["tasks", "check", *args])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert "Traceback" not in result.output
    records = [json.loads(line) for line in result.stdout.splitlines() if line.startswith("{")]
    return result.exit_code, records, result.output


def test_tasks_check_reports_every_task_as_a_row(tmp_path):
    copy_shipped_task(tmp_path)
    make_task(tmp_path, "broken-toml", toml="[agent\ntimeout_sec = 1\n")
    no_test = make_task(tmp_path, "no-test-sh")
    (no_test / "tests" / "test.sh").unlink()
    (no_test / "tests" / "check.py").write_text("open('/logs/verifier/reward.txt', 'w').write('1')\n")
    code, records, _ = tasks_check(str(tmp_path), "--json")
    assert code == 1
    assert all(list(r) == ["task", "reference", "untouched", "verdict", "reason"] for r in records)
    by_task = {r["task"]: r for r in records}
    assert list(by_task) == ["broken-toml", "fix-paginate", "no-test-sh"]
    assert by_task["fix-paginate"] == {"task": "fix-paginate", "reference": None, "untouched": None,
                                       "verdict": "ok", "reason": None}
    assert by_task["broken-toml"]["verdict"] == "invalid"
    assert by_task["broken-toml"]["reason"].startswith("task.toml: not valid TOML")
    assert by_task["no-test-sh"]["verdict"] == "invalid"
    assert "tests/test.sh: missing: the verifier that writes the reward" in by_task["no-test-sh"]["reason"]


def test_tasks_check_text_output_and_unreadable_files(tmp_path):
    d = make_task(tmp_path, "dangling")
    (d / "environment" / "data.csv").symlink_to("gone.csv")  # inside the task, pointing nowhere
    make_task(tmp_path, "crlf", solve_sh="#!/bin/bash\necho \x1b[2Jhi\r\n")
    code, _, out = tasks_check(str(tmp_path))
    assert code == 1
    assert "invalid dangling" in out and "environment/data.csv: unreadable" in out
    assert "invalid crlf" in out and "solution/solve.sh: line 2 has a CRLF line ending" in out
    assert "2 task(s): 2 invalid" in out


@pytest.mark.parametrize(("setup", "expected"), [
    (lambda p: p, "no task folders: it is empty"),
    (lambda p: (p / "README.md").write_text("x") and p, "no task folders: it holds no task.toml and no subfolders"),
    (lambda p: p / "nowhere", "no such folder"),
    (lambda p: (p / "file.txt").write_text("x") and p / "file.txt", "not a folder"),
])
def test_tasks_check_says_why_a_folder_has_no_tasks(tmp_path, setup, expected):
    code, records, out = tasks_check(str(setup(tmp_path)), "--json")
    assert code == 2 and records == [] and expected in out


def test_tasks_check_points_at_nested_task_folders(tmp_path):
    copy_shipped_task(tmp_path / "terminal")
    code, records, _ = tasks_check(str(tmp_path), "--json")
    assert code == 1 and records[0]["verdict"] == "invalid"
    assert "it holds task folders (fix-paginate)" in records[0]["reason"]


def test_tasks_check_runs_solutions_and_says_why_one_fails(tmp_path):
    """In the sandbox: the good task scores 1/0; a reference that does nothing scores 0, and the
    reason carries the verifier's last lines and the solution's; a task without solve.sh is said to have none."""
    copy_shipped_task(tmp_path)
    lazy = copy_shipped_task(tmp_path / "x")
    shutil.move(lazy, tmp_path / "lazy-reference")
    (tmp_path / "lazy-reference" / "solution" / "solve.sh").write_text("#!/bin/bash\necho nothing to do\n")
    bare = copy_shipped_task(tmp_path / "y")
    shutil.move(bare, tmp_path / "no-reference")
    shutil.rmtree(tmp_path / "no-reference" / "solution")
    shutil.rmtree(tmp_path / "x")
    shutil.rmtree(tmp_path / "y")
    code, records, _ = tasks_check(str(tmp_path), "--run-solutions", "--json")
    assert code == 1
    by_task = {r["task"]: r for r in records}
    assert by_task["fix-paginate"] == {"task": "fix-paginate", "reference": 1.0, "untouched": 0.0,
                                       "verdict": "ok", "reason": None}
    lazy_row = by_task["lazy-reference"]
    assert (lazy_row["verdict"], lazy_row["reference"], lazy_row["untouched"]) == ("fail", 0.0, 0.0)
    assert lazy_row["reason"].startswith("reference scored 0.00, below 1; the verifier's last lines:\n")
    assert len(lazy_row["reason"].splitlines()) > 1
    assert lazy_row["reason"].endswith("solve.sh's last lines:\nnothing to do")  # what the solution printed
    assert by_task["no-reference"]["verdict"] == "no-solution"
    assert by_task["no-reference"]["reason"].startswith("no solution/solve.sh")


def test_task_output_cannot_rewrite_the_report():
    from practicum.cli import _printable

    assert _printable("ok\x1b[2J\x1b[1A\rverdict: ok\n\tnext") == "ok\\x1b[2J\\x1b[1A\\rverdict: ok\n\tnext"
