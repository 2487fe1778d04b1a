"""Terminal task folders: the Harbor / terminal-bench 2 layout, loaded and checked.

A task is a folder::

    <name>/
      instruction.md             what the agent must do (it becomes the user message)
      task.toml                  Harbor's config: [agent] [verifier] [environment] [solution] [metadata]
      environment/               files that seed the workspace
        Dockerfile               optional; only its WORKDIR is read (default /app); it is never built
        .practicum-setup.sh      optional, Practicum's extension: prepares the workspace once at reset
      solution/solve.sh          reference solution, run with bash in the workspace
      tests/test.sh              the verifier: copied to /tests after the agent is done; writes the reward

This module reads and checks folders; it runs nothing. The contract with the environment that
runs a task (``practicum.envs.terminal``), which :func:`check_task` checks statically:

1. **Reset.** Every file of ``environment/`` except ``Dockerfile``, ``docker-compose.y(a)ml`` and
   ``.practicum-setup.sh`` is copied to the workspace, which appears at :attr:`TerminalTask.workdir`
   (the Dockerfile's last ``WORKDIR``, default ``/app``). If ``environment/.practicum-setup.sh``
   exists it runs once with ``bash``, working directory = workdir, without network, before the
   agent starts; it is not copied into the workspace. It is how a task ships state that plain
   files cannot carry: git history (branches to merge, commits to revert), file modes, generated
   data. Then, unless the workspace already is a git repository (the setup script made one, with
   its own history), the environment runs ``git init`` and commits everything: that commit is
   the baseline of the episode's final ``git diff``.
2. **Agent.** The agent works in the workspace within ``[agent] timeout_sec``.
3. **Verifier.** ``/tests`` and ``/logs/verifier`` are emptied (so a planted reward or helper is
   gone), ``tests/`` is copied to ``/tests``, and ``bash /tests/test.sh`` runs with working
   directory = workdir, ``[verifier] env`` in its environment, within ``[verifier] timeout_sec``.
   The reward is ``/logs/verifier/reward.txt`` (one number) or, if that file is absent,
   ``/logs/verifier/reward.json`` (an object with a numeric ``"reward"``; other numeric keys are
   components); :func:`parse_reward` reads it (:func:`read_reward` from a folder). The reward must lie in [0, 1].

Differences from Harbor (docs/terminal-tasks.md has the full list): the Dockerfile is not built,
so a task runs unchanged only where it needs nothing beyond the shared environment (python3,
pytest, git, coreutils, bash, sed/awk/grep, make, gcc); ``environment/`` is copied to the
workdir as a whole instead of through the Dockerfile's COPY lines; there is never network, so
``allow_internet`` is not honoured; GPUs, prebuilt images, compose services and multi-step
tasks are not supported, and :func:`check_task` says so; ``.practicum-setup.sh`` is ours.

Every Harbor field is accepted (typed and validated here); the ones Practicum does not act on
are listed in :data:`UNUSED_HARBOR_FIELDS`. A field Harbor does not have is a problem, so that
a misspelt ``timeout_secs`` is never silently replaced by a default.
"""

from __future__ import annotations

import json
import math
import os
import posixpath
import re
import stat
import tomllib
from pathlib import Path
from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from practicum.errors import TaskError, VerifierFailure
from practicum.records import Message, Score, Task

DEFAULT_WORKDIR = "/app"
SETUP_SCRIPT = ".practicum-setup.sh"
# Files of environment/ that describe the container rather than seed the workspace.
NOT_SEEDED = frozenset({"Dockerfile", "docker-compose.yaml", "docker-compose.yml", SETUP_SCRIPT})
REWARD_FILES = ("reward.txt", "reward.json")
VERIFIER_DIR = "/logs/verifier"
# A workspace there would hide or be hidden by what the environment mounts itself.
RESERVED_DIRS = ("/tests", "/logs", "/oracle", "/solution", "/proc", "/sys", "/dev")

UNUSED_HARBOR_FIELDS = (
    "agent.user", "verifier.user", "environment.build_timeout_sec", "environment.docker_image",
    "environment.gpu_types", "environment.allow_internet", "environment.network_mode",
    "environment.allowed_hosts", "environment.mcp_servers", "environment.healthcheck",
    "environment.skills_dir", "environment.os", "solution.env", "task", "source",
)


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


class AgentSpec(_Section):
    timeout_sec: float = Field(default=600.0, gt=0, description="Wall time the agent has for the whole episode.")
    user: str | int | None = Field(default=None, description="Harbor: OS user of the agent. Not used: the sandbox picks it.")


class VerifierSpec(_Section):
    timeout_sec: float = Field(default=600.0, gt=0, description="Wall time of tests/test.sh.")
    env: dict[str, str] = Field(default_factory=dict, description="Environment variables given to tests/test.sh.")
    user: str | int | None = Field(default=None, description="Harbor: OS user of the verifier. Not used.")


class SolutionSpec(_Section):
    env: dict[str, str] = Field(default_factory=dict, description="Environment variables given to solution/solve.sh.")


class EnvironmentSpec(_Section):
    cpus: int = Field(default=1, ge=1, description="CPU cores the task may use.")
    memory_mb: int = Field(default=2048, ge=1, description="Memory limit in MiB.")
    storage_mb: int = Field(default=10240, ge=1, description="Workspace size limit in MiB.")
    gpus: int = Field(default=0, ge=0, description="GPUs the task needs; Practicum's terminal sandboxes have none.")
    build_timeout_sec: float = Field(default=600.0, gt=0, description="Harbor: image build time. Not used: nothing is built.")
    docker_image: str | None = Field(default=None, description="Harbor: a prebuilt image. Not used.")
    gpu_types: list[str] | None = Field(default=None, description="Harbor: acceptable GPU types. Not used.")
    allow_internet: bool = Field(default=True, description="Harbor: network access. Not honoured: sandboxes never have network.")
    network_mode: str | None = Field(default=None, description="Harbor: network policy. Not honoured.")
    allowed_hosts: list[str] = Field(default_factory=list, description="Harbor: network allow-list. Not honoured.")
    mcp_servers: list[dict[str, Any]] = Field(default_factory=list, description="Harbor: MCP servers. Not started.")
    healthcheck: dict[str, Any] | None = Field(default=None, description="Harbor: readiness check. Not run.")
    skills_dir: str | None = Field(default=None, description="Harbor: agent skills folder. Not used.")
    os: str | None = Field(default=None, description="Harbor: target OS. Only linux runs here.")
    env: dict[str, str] = Field(default_factory=dict, description="Environment variables of the agent's shell.")
    # Harbor's deprecated size strings ("2G", "512M"); converted to memory_mb / storage_mb.
    memory: str | None = Field(default=None, exclude=True, description="Deprecated Harbor field; use memory_mb.")
    storage: str | None = Field(default=None, exclude=True, description="Deprecated Harbor field; use storage_mb.")

    @model_validator(mode="after")
    def _sizes(self) -> EnvironmentSpec:
        if self.memory is not None:
            self.memory_mb, self.memory = _size_to_mb(self.memory), None
        if self.storage is not None:
            self.storage_mb, self.storage = _size_to_mb(self.storage), None
        return self


class Author(_Section):
    name: str
    email: str | None = None


class PackageInfo(_Section):
    """Harbor's ``[task]`` section (registry package information). Not used."""

    name: str
    description: str = ""
    authors: list[Author] = Field(default_factory=list)
    keywords: list[str] = Field(default_factory=list)


class TaskSpec(_Section):
    """``task.toml``: Harbor's fields and defaults. ``[metadata]`` is free-form; Practicum reads
    ``difficulty``, ``category`` and ``tags`` from it when present."""

    version: str = Field(default="1.0", description="Schema version (Harbor also spells it schema_version).")
    metadata: dict[str, Any] = Field(default_factory=dict, description="Free-form: difficulty, category, tags, author...")
    agent: AgentSpec = Field(default_factory=AgentSpec)
    verifier: VerifierSpec = Field(default_factory=VerifierSpec)
    environment: EnvironmentSpec = Field(default_factory=EnvironmentSpec)
    solution: SolutionSpec = Field(default_factory=SolutionSpec)
    task: PackageInfo | None = Field(default=None, description="Harbor: registry package information. Not used.")
    source: str | None = Field(default=None, description="Harbor: where the task came from. Not used.")

    @model_validator(mode="before")
    @classmethod
    def _schema_version(cls, data: Any) -> Any:
        if isinstance(data, dict) and "schema_version" in data:
            if "version" in data:
                raise ValueError("give either version or schema_version, not both")
            data = dict(data)
            data["version"] = data.pop("schema_version")
        return data


def _size_to_mb(size: str) -> int:
    s = size.strip().upper()
    factor = {"G": 1024.0, "M": 1.0, "K": 1 / 1024}.get(s[-1:])
    try:
        if factor is None:
            raise ValueError
        return max(1, int(float(s[:-1]) * factor))
    except ValueError:
        raise ValueError(f"size {size!r} must look like '2G', '512M' or '1024K'") from None


class Problem(BaseModel):
    """One thing wrong with a task folder. ``error``: the task cannot be run as written;
    ``warning``: it runs, but not as its author may expect."""

    model_config = ConfigDict(frozen=True)
    file: Path  # the file (or folder) at fault
    message: str
    severity: Literal["error", "warning"] = "error"

    def __str__(self) -> str:
        return f"{self.file}: {'warning: ' if self.severity == 'warning' else ''}{self.message}"


class TerminalTask(BaseModel):
    """A loaded, checked task folder. Paths are absolute; file lists are relative POSIX paths."""

    model_config = ConfigDict(frozen=True)
    name: str  # the folder's name
    path: Path
    instruction: str
    spec: TaskSpec
    workdir: str  # where the workspace appears inside the sandbox
    environment_files: list[str]  # seed files, relative to environment/ (NOT_SEEDED excluded)
    setup_script: Path | None  # environment/.practicum-setup.sh
    solution_files: list[str]  # relative to solution/
    test_files: list[str]  # relative to tests/
    dockerfile: Path | None

    @property
    def environment_dir(self) -> Path:
        return self.path / "environment"

    @property
    def solution_script(self) -> Path | None:
        p = self.path / "solution" / "solve.sh"
        return p if "solve.sh" in self.solution_files else None

    @property
    def test_script(self) -> Path:
        return self.path / "tests" / "test.sh"

    @property
    def agent_timeout_s(self) -> float:
        return self.spec.agent.timeout_sec

    @property
    def verifier_timeout_s(self) -> float:
        return self.spec.verifier.timeout_sec

    @property
    def difficulty(self) -> str | None:
        d = self.spec.metadata.get("difficulty")
        return str(d) if d is not None else None

    @property
    def category(self) -> str | None:
        c = self.spec.metadata.get("category")
        return str(c) if c is not None else None

    @property
    def tags(self) -> list[str]:
        t = self.spec.metadata.get("tags", [])
        return [str(x) for x in t] if isinstance(t, list) else []

    def to_task(self, domain: str = "terminal") -> Task:
        """The :class:`~practicum.records.Task` record: the instruction is the prompt; the folder,
        which holds the hidden tests, travels in metadata and is never shown to the model."""
        return Task(
            id=f"{domain}/{self.name}", domain=domain,
            prompt=[Message(role="user", content=self.instruction)],
            metadata={"task_dir": str(self.path), "workdir": self.workdir, "difficulty": self.difficulty,
                      "category": self.category, "tags": self.tags,
                      "agent_timeout_s": self.agent_timeout_s, "verifier_timeout_s": self.verifier_timeout_s},
        )


# --- reading -------------------------------------------------------------------------------------


def load_task(path: str | Path) -> TerminalTask:
    """Load one task folder. Raises :class:`~practicum.errors.TaskError` listing every error
    :func:`check_task` finds (warnings do not stop loading)."""
    task, problems = _inspect(Path(path))
    errors = [p for p in problems if p.severity == "error"]
    if errors or task is None:
        raise TaskError(f"task folder {path} is invalid:\n" + "\n".join(f"  {p}" for p in errors))
    return task


def load_tasks(root: str | Path) -> list[TerminalTask]:
    """Load a folder of task folders (every subfolder with a task.toml, by name), or ``root``
    itself when it is a task folder. Errors of all tasks are reported together."""
    root = Path(root)
    if not root.is_dir():
        raise TaskError(f"{root}: not a folder of terminal tasks")
    if (root / "task.toml").exists():
        return [load_task(root)]
    dirs = sorted(d for d in root.iterdir() if d.is_dir() and not d.name.startswith(".") and (d / "task.toml").exists())
    if not dirs:
        raise TaskError(f"{root}: no task folders (subfolders with a task.toml) found")
    tasks, errors = [], []
    for d in dirs:
        task, problems = _inspect(d)
        errs = [p for p in problems if p.severity == "error"]
        errors += errs
        if task is not None and not errs:
            tasks.append(task)
    if errors:
        raise TaskError(f"{len(errors)} problem(s) in {root}:\n" + "\n".join(f"  {p}" for p in errors))
    return tasks


def check_task(path: str | Path) -> list[Problem]:
    """Every problem of a task folder, each naming its file; an empty list means the task is
    sound as far as can be told without running it."""
    return _inspect(Path(path))[1]


def read_reward(verifier_dir: str | Path) -> Score:
    """The reward a test.sh left in ``verifier_dir`` (the host side of /logs/verifier).

    ``reward.txt`` wins when both files exist, as in Harbor. A missing, unreadable or
    out-of-range reward is the task's failure on this episode: :class:`VerifierFailure`.
    """
    d = Path(verifier_dir)
    txt, js = d / "reward.txt", d / "reward.json"
    return parse_reward(txt.read_text(errors="replace") if txt.is_file() else None,
                        js.read_text(errors="replace") if js.is_file() else None)


def parse_reward(reward_txt: str | None, reward_json: str | None) -> Score:
    """The reward from the contents of reward.txt and reward.json (None: the file is absent)."""
    if reward_txt is not None:
        raw = reward_txt.strip()
        try:
            value = float(raw)
        except ValueError:
            raise VerifierFailure(f"reward.txt holds {raw[:80]!r}, not a number") from None
        return Score(value=_unit(value, "reward.txt"), explanation="reward.txt")
    if reward_json is not None:
        try:
            data = json.loads(reward_json)
        except json.JSONDecodeError as e:
            raise VerifierFailure(f"reward.json is not JSON: {e}") from None
        if not isinstance(data, dict) or not _is_number(data.get("reward")):
            raise VerifierFailure('reward.json must be an object with a numeric "reward"')
        components = {k: float(v) for k, v in data.items() if k != "reward" and _is_number(v)}
        return Score(value=_unit(float(data["reward"]), "reward.json"), components=components,
                     explanation="reward.json")
    raise VerifierFailure("the verifier wrote no reward (neither reward.txt nor reward.json)")


def _is_number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _unit(value: float, source: str) -> float:
    if not math.isfinite(value) or not 0.0 <= value <= 1.0:
        raise VerifierFailure(f"{source}: reward {value} is outside [0, 1]")
    return value


def read_workdir(dockerfile_text: str) -> tuple[str, list[str]]:
    """The final stage's WORKDIR of a Dockerfile (default /app) and what stopped it being read.

    Relative WORKDIRs join the previous one; ``$VAR`` and ``${VAR}`` resolve from earlier ARG and
    ENV defaults. Nothing else of the Dockerfile is interpreted.
    """
    workdir: str | None = None
    variables: dict[str, str] = {}
    complaints: list[str] = []
    for lineno, line in _dockerfile_lines(dockerfile_text):
        word, _, rest = line.partition(" ")
        word, rest = word.upper(), rest.strip()
        if word == "FROM":
            workdir = None  # a new stage starts from its base image's working directory
        elif word in ("ARG", "ENV"):
            for key, value in _assignments(rest, word):
                variables[key] = _substitute(value, variables)[0]
        elif word == "WORKDIR":
            value, missing = _substitute(rest.strip("\"'"), variables)
            if missing:
                complaints.append(f"line {lineno}: WORKDIR uses {', '.join(sorted(missing))}, which no earlier ARG or ENV sets")
                continue
            workdir = posixpath.normpath(posixpath.join(workdir or "/", value))
    return workdir or DEFAULT_WORKDIR, complaints


def _dockerfile_lines(text: str) -> list[tuple[int, str]]:
    out: list[tuple[int, str]] = []
    buf, start = "", 0
    for i, raw in enumerate(text.splitlines(), 1):
        s = raw.strip()
        if not buf and (not s or s.startswith("#")):
            continue
        if not buf:
            start = i
        if s.endswith("\\"):
            buf += s[:-1] + " "
            continue
        buf += s
        out.append((start, buf.strip()))
        buf = ""
    if buf.strip():
        out.append((start, buf.strip()))
    return out


def _assignments(rest: str, word: str) -> list[tuple[str, str]]:
    if "=" not in rest.split(" ", 1)[0]:
        if word == "ENV" and " " in rest:  # legacy form: ENV KEY value with spaces
            k, v = rest.split(" ", 1)
            return [(k, v.strip().strip("\"'"))]
        return [] if word == "ENV" else [(rest, "")]
    pairs = []
    for tok in re.findall(r'(\w+)=("[^"]*"|\'[^\']*\'|\S*)', rest):
        pairs.append((tok[0], tok[1].strip("\"'")))
    return pairs


def _substitute(value: str, variables: dict[str, str]) -> tuple[str, set[str]]:
    missing: set[str] = set()

    def repl(m: re.Match[str]) -> str:
        name = m.group(1) or m.group(2)
        if name in variables and variables[name] != "":
            return variables[name]
        missing.add(name)
        return m.group(0)

    return re.sub(r"\$\{(\w+)\}|\$(\w+)", repl, value), missing


# --- checking ------------------------------------------------------------------------------------

_NETWORK = re.compile(
    r"\b(curl|wget|pip3? install|python3? -m pip install|uv (?:pip|add|sync|run)|uvx|apt(?:-get)? install"
    r"|npm (?:install|ci)|git clone)\b"
)


def _inspect(path: Path) -> tuple[TerminalTask | None, list[Problem]]:
    problems: list[Problem] = []

    def err(file: Path, msg: str) -> None:
        problems.append(Problem(file=file, message=msg))

    def warn(file: Path, msg: str) -> None:
        problems.append(Problem(file=file, message=msg, severity="warning"))

    if not path.is_dir():
        err(path, "not a task folder (no such directory)")
        return None, problems
    path = path.resolve()

    # instruction.md
    instruction = ""
    ip = path / "instruction.md"
    if not ip.is_file():
        err(ip, "missing: the instruction the agent is given")
    else:
        try:
            instruction = ip.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            err(ip, "not UTF-8 text")
        else:
            if not instruction.strip():
                err(ip, "empty: the agent would be given nothing to do")

    # task.toml
    spec: TaskSpec | None = None
    tp = path / "task.toml"
    if not tp.is_file():
        err(tp, "missing: Harbor's task config ([agent] and [verifier] timeout_sec, [environment] limits)")
    else:
        try:
            raw = tomllib.loads(tp.read_text(encoding="utf-8"))
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as e:
            err(tp, f"not valid TOML: {e}")
        else:
            try:
                spec = TaskSpec.model_validate(raw)
            except ValidationError as e:
                for problem in e.errors():
                    err(tp, _field_message(problem))
    if spec is not None:
        if spec.environment.gpus > 0:
            err(tp, f"[environment] gpus = {spec.environment.gpus}: Practicum's terminal sandboxes have no GPU")
        if spec.environment.mcp_servers:
            warn(tp, "[environment] mcp_servers are not started by Practicum")
        if spec.environment.healthcheck:
            warn(tp, "[environment] healthcheck is not run by Practicum")
        if spec.environment.os not in (None, "linux"):
            err(tp, f"[environment] os = {spec.environment.os!r}: only linux tasks run here")

    # environment/
    env_dir = path / "environment"
    workdir = DEFAULT_WORKDIR
    env_files: list[str] = []
    dockerfile: Path | None = None
    setup: Path | None = None
    if env_dir.exists() and not env_dir.is_dir():
        err(env_dir, "must be a folder of files that seed the workspace")
    elif env_dir.is_dir():
        files = _files(env_dir, problems)
        env_files = [f for f in files if f not in NOT_SEEDED]
        if "Dockerfile" in files:
            dockerfile = env_dir / "Dockerfile"
            workdir, complaints = read_workdir(dockerfile.read_text(encoding="utf-8", errors="replace"))
            for c in complaints:
                err(dockerfile, c)
            if not workdir.startswith("/") or workdir == "/":
                err(dockerfile, f"WORKDIR {workdir!r}: the workspace needs an absolute folder other than /")
            elif any(workdir == r or workdir.startswith(r + "/") for r in RESERVED_DIRS):
                err(dockerfile, f"WORKDIR {workdir}: lies in a folder the environment mounts itself ({', '.join(RESERVED_DIRS)})")
        elif spec is not None and spec.environment.docker_image:
            warn(tp, "[environment] docker_image is not used: the task runs in Practicum's shared environment "
                     f"with the workspace at {DEFAULT_WORKDIR}")
        for compose in ("docker-compose.yaml", "docker-compose.yml"):
            if compose in files:
                warn(env_dir / compose, "compose services are not started by Practicum")
        if SETUP_SCRIPT in files:
            setup = env_dir / SETUP_SCRIPT
            _check_script(setup, problems)
    if (path / "steps").is_dir():
        err(path / "steps", "multi-step tasks are not supported")

    # solution/
    sol_dir = path / "solution"
    sol_files = _files(sol_dir, problems) if sol_dir.is_dir() else []
    if "solve.sh" in sol_files:
        _check_script(sol_dir / "solve.sh", problems)
    else:
        warn(sol_dir / "solve.sh", "missing: without a reference solution the task cannot be shown solvable")

    # tests/
    tests_dir = path / "tests"
    test_files = _files(tests_dir, problems) if tests_dir.is_dir() else []
    ts = tests_dir / "test.sh"
    if "test.sh" not in test_files:
        err(ts, "missing: the verifier that writes the reward")
    else:
        _check_script(ts, problems)
        texts = [_text(tests_dir / f) for f in test_files]
        if not any(r in t for t in texts for r in REWARD_FILES):
            err(ts, f"writes no reward: nothing in tests/ names {VERIFIER_DIR}/reward.txt or reward.json")

    if any(p.severity == "error" for p in problems) or spec is None:
        return None, problems
    task = TerminalTask(
        name=path.name, path=path, instruction=instruction, spec=spec, workdir=workdir,
        environment_files=env_files, setup_script=setup, solution_files=sol_files, test_files=test_files,
        dockerfile=dockerfile,
    )
    return task, problems


def _field_message(problem: Any) -> str:
    loc = [str(x) for x in problem["loc"]]
    if loc and loc[0] in TaskSpec.model_fields and loc[0] != "metadata" and (len(loc) > 1 or problem["type"] != "extra_forbidden"):
        where = f"[{loc[0]}] {'.'.join(loc[1:])}".rstrip()
    else:
        where = ".".join(loc) or "(top level)"
    if problem["type"] == "extra_forbidden":
        model = _section_model(loc[0]) if len(loc) > 1 else TaskSpec
        known = ", ".join(k for k in model.model_fields if k not in ("memory", "storage"))
        return f"{where}: unknown field (Harbor's fields here: {known})"
    return f"{where}: {problem['msg']}"


def _section_model(section: str) -> type[BaseModel]:
    field = TaskSpec.model_fields.get(section)
    for t in (field.annotation, *get_args(field.annotation)) if field else ():
        if isinstance(t, type) and issubclass(t, BaseModel):
            return t
    return TaskSpec


def _files(folder: Path, problems: list[Problem]) -> list[str]:
    """Regular files under ``folder``, relative, sorted; links that leave it and special files
    are problems (copying them would reach outside the task)."""
    out: list[str] = []
    root = folder.resolve()
    for dirpath, dirnames, filenames in os.walk(folder, followlinks=False):
        d = Path(dirpath)
        for name in sorted(dirnames + filenames):
            p = d / name
            if p.is_symlink():
                target = p.resolve()
                if target != root and root not in target.parents:
                    problems.append(Problem(file=p, message=f"symbolic link leaves the task folder ({os.readlink(p)})"))
                    continue
                if target.is_dir():
                    problems.append(Problem(file=p, message="symbolic link to a folder: ship the folder itself"))
                    continue
            elif name in dirnames:
                continue
            mode = p.stat().st_mode
            if not stat.S_ISREG(mode):
                problems.append(Problem(file=p, message="not a regular file"))
                continue
            out.append(p.relative_to(folder).as_posix())
    return sorted(out)


def _text(p: Path, limit: int = 1 << 20) -> str:
    try:
        with p.open("rb") as f:
            return f.read(limit).decode("utf-8", errors="replace")
    except OSError:
        return ""


def _check_script(p: Path, problems: list[Problem]) -> None:
    data = p.read_bytes()
    text = data.decode("utf-8", errors="replace")
    if not text.strip():
        problems.append(Problem(file=p, message="empty script"))
        return
    if b"\r\n" in data:
        problems.append(Problem(file=p, message="has CRLF line endings: bash would fail on '\\r'"))
    first = text.splitlines()[0]
    if not first.startswith("#!"):
        problems.append(Problem(file=p, severity="warning", message="no #! line (it is run with bash)"))
    elif not re.search(r"\b(bash|sh)\b", first):
        problems.append(Problem(file=p, severity="warning", message=f"{first!r}: it is run with bash regardless"))
    if not p.stat().st_mode & stat.S_IXUSR:
        problems.append(Problem(file=p, severity="warning", message="not executable (chmod +x; it is run with bash)"))
    for lineno, line in enumerate(text.splitlines(), 1):
        code = line.split("#", 1)[0] if not line.lstrip().startswith("#!") else ""
        m = _NETWORK.search(code)
        if m and "--no-index" not in code:
            problems.append(Problem(file=p, severity="warning", message=(
                f"line {lineno} seems to fetch from the network ({m.group(0)!r}); sandboxes have none")))
            break
