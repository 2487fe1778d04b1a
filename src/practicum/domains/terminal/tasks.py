"""Terminal task folders: the Harbor / terminal-bench 2 layout, loaded and checked.

A task is a folder::

    <name>/
      instruction.md             what the agent must do (it becomes the user message)
      task.toml                  Harbor's config: [agent] [verifier] [environment] [solution] [metadata]
      environment/               the build context (without a Dockerfile: files that seed the workspace)
        Dockerfile               optional; built into the task's image (practicum.envs.images)
        .practicum-setup.sh      optional, Practicum's extension: prepares the workspace once at reset
      solution/solve.sh          reference solution, run with bash in the workspace
      tests/test.sh              the verifier: copied to /tests after the agent is done; writes the reward

This module reads and checks folders; it runs nothing. The contract with the environment that
runs a task (``practicum.domains.terminal.env``), which :func:`check_task` checks statically:

1. **Reset.** With ``environment/Dockerfile``, the episode runs in the task's image (its
   ``COPY``/``ADD``/``RUN`` lines executed once at build time; :mod:`practicum.envs.images`), as root
   in a writable root filesystem. Without one, every file of ``environment/`` except
   ``docker-compose.y(a)ml`` and ``.practicum-setup.sh`` is copied to the workspace, which then
   becomes a git repository (unless the setup script made one) whose commit is the baseline of
   the episode's final ``git diff``. The workspace is :attr:`TerminalTask.workdir` (task.toml's
   ``[environment] workdir``, else the Dockerfile's last ``WORKDIR``, else ``/app``). If
   ``environment/.practicum-setup.sh`` exists it runs once with ``bash``, working directory =
   workdir, without network, before the agent starts; it is not copied into the workspace.
2. **Agent.** The agent works in the workspace within ``[agent] timeout_sec``.
3. **Verifier.** ``/tests`` and ``/logs/verifier`` are emptied (so a planted reward or helper is
   gone), ``tests/`` is copied to ``/tests``, and ``bash /tests/test.sh`` runs with working
   directory = workdir, ``[verifier] env`` in its environment, within ``[verifier] timeout_sec``.
   The reward is ``/logs/verifier/reward.txt`` (one number) or, if that file is absent,
   ``/logs/verifier/reward.json``: an object with a numeric ``"reward"`` (other numeric keys are
   components), or named rewards without ``"reward"`` (the reward is their mean; each is a
   component). :func:`parse_reward` reads it (:func:`read_reward` from a folder). Rewards lie in [0, 1].

Differences from Harbor (docs/terminal-tasks.md has the full list): images are built over this
machine's root filesystem, not pulled ``FROM`` their base; the verifier's bootstrap is served
offline; there is never network for the agent or the verifier, so ``allow_internet`` is not
honoured; GPUs and compose services are not supported, and :func:`check_task` says so;
``.practicum-setup.sh`` is ours.

A multi-step task (Harbor's ``[[steps]]``) keeps each step's files in ``steps/<name>/``
(``instruction.md``, ``tests/`` laid over the task's ``tests/``, ``solution/solve.sh``,
``workdir/`` with its ``setup.sh``); :class:`TaskStep` holds one, and the environment runs them
in order (docs/terminal-tasks.md, "Multi-step tasks").

Every field of Harbor's task.toml up to schema 1.4 is accepted (typed and validated here),
deprecated spellings included (``version``, ``memory``/``storage`` size strings); the ones
Practicum does not act on are listed, each with the reason, in :data:`UNUSED_HARBOR_FIELDS`. A
field Harbor does not have is a problem, so that a misspelt ``timeout_secs`` is never silently
replaced by a default. Scripts are checked for what bash would trip on (a CRLF line ending on a
command line, not one inside a here-document) and for network fetches other than the package
installs Practicum serves offline.
"""

from __future__ import annotations

import glob
import json
import math
import os
import posixpath
import re
import stat
import tomllib
from pathlib import Path
from typing import Any, Literal, get_args

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from practicum.envs.dockerfile import Copy, ImageRecipe, parse_dockerfile, substitute
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

UNUSED_HARBOR_FIELDS: dict[str, str] = {
    "agent.user": "the sandbox picks the user",
    "verifier.user": "the sandbox picks the user",
    "agent.network_mode": "sandboxes never have network",
    "agent.allowed_hosts": "sandboxes never have network",
    "verifier.network_mode": "sandboxes never have network",
    "verifier.allowed_hosts": "sandboxes never have network",
    "verifier.environment_mode": "the verifier always runs in the agent's sandbox, after the agent (Harbor's 'shared')",
    "verifier.environment": "there is no separate verifier sandbox to configure",
    "verifier.collect": "artifacts are not collected, so there is nothing to run before collecting them",
    "environment.build_timeout_sec": "the image build has no separate time limit",
    "environment.docker_image": "images are never pulled; the Dockerfile (or the local base) is used",
    "environment.gpu_types": "terminal sandboxes have no GPU",
    "environment.allow_internet": "sandboxes never have network",
    "environment.network_mode": "sandboxes never have network",
    "environment.allowed_hosts": "sandboxes never have network",
    "environment.mcp_servers": "MCP servers are not started (check_task warns)",
    "environment.healthcheck": "nothing is started that would need one (check_task warns)",
    "environment.skills_dir": "agents get their tools from Practicum, not from a skills folder",
    "solution.env": "read by run_reference only",
    "artifacts": "the episode keeps the workspace's git diff instead of collected files",
    "task": "registry package information",
    "source": "provenance only",
}
"""Harbor fields that are accepted and validated but not acted on, each with the reason."""

KNOWN_SCHEMA_VERSIONS = ("1.0", "1.1", "1.2", "1.3", "1.4")
NetworkMode = Literal["public", "no-network", "allowlist"]


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid")


class _Network(_Section):
    """Harbor's per-phase network policy (schema 1.3+): accepted, never honoured."""

    network_mode: NetworkMode | None = Field(default=None, description="Harbor: network policy. Not honoured: sandboxes never have network.")
    allowed_hosts: list[str] = Field(default_factory=list, description="Harbor: hosts allowed with network_mode = 'allowlist'. Not honoured.")

    @model_validator(mode="after")
    def _allowlist(self) -> Any:
        if self.allowed_hosts and self.network_mode not in (None, "allowlist"):
            raise ValueError(f"allowed_hosts needs network_mode = 'allowlist', not {self.network_mode!r}")
        return self


class AgentSpec(_Network):
    timeout_sec: float = Field(default=600.0, gt=0, description="Wall time the agent has for the whole episode.")
    user: str | int | None = Field(default=None, description="Harbor: OS user of the agent. Not used: the sandbox picks it.")


class SolutionSpec(_Section):
    env: dict[str, str] = Field(default_factory=dict, description="Environment variables given to solution/solve.sh.")


class Healthcheck(_Section):
    """Harbor's readiness check (Docker HEALTHCHECK's options). Not run."""

    command: str
    interval_sec: float = Field(default=5.0, ge=0)
    timeout_sec: float = Field(default=30.0, gt=0)
    start_period_sec: float = Field(default=0.0, ge=0)
    start_interval_sec: float = Field(default=5.0, ge=0)
    retries: int = Field(default=3, ge=1)


class McpServer(_Section):
    """One of Harbor's MCP servers offered to the agent. Not started."""

    name: str
    transport: Literal["sse", "streamable-http", "http", "stdio"] = "sse"
    url: str | None = None
    command: str | None = None
    args: list[str] = Field(default_factory=list)

    @model_validator(mode="after")
    def _endpoint(self) -> McpServer:
        if self.transport == "stdio" and not self.command:
            raise ValueError(f"MCP server {self.name!r}: transport 'stdio' needs a command")
        if self.transport != "stdio" and not self.url:
            raise ValueError(f"MCP server {self.name!r}: transport {self.transport!r} needs a url")
        return self


class TpuSpec(_Section):
    """Harbor's ``[environment.tpu]``. A task that asks for one cannot run here."""

    type: str
    topology: str = Field(pattern=r"^\d+x\d+(x\d+)?$", description="NxM or NxMxK chips.")


class EnvironmentSpec(_Network):
    cpus: int = Field(default=1, ge=1, description="CPU cores the task may use.")
    memory_mb: int = Field(default=2048, ge=1, description="Memory limit in MiB.")
    storage_mb: int = Field(default=10240, ge=1, description="Workspace size limit in MiB.")
    gpus: int = Field(default=0, ge=0, description="GPUs the task needs; Practicum's terminal sandboxes have none.")
    tpu: TpuSpec | None = Field(default=None, description="Harbor: a TPU slice; none here, so a task asking for one is refused.")
    workdir: str | None = Field(default=None, description="Where the workspace appears; overrides the Dockerfile's WORKDIR.")
    build_timeout_sec: float = Field(default=600.0, gt=0, description="Harbor: image build time. Not used.")
    docker_image: str | None = Field(default=None, description="Harbor: a prebuilt image. Not used.")
    gpu_types: list[str] | None = Field(default=None, description="Harbor: acceptable GPU types. Not used.")
    allow_internet: bool = Field(default=True, description="Harbor (deprecated for network_mode): network access. Not honoured.")
    mcp_servers: list[McpServer] = Field(default_factory=list, description="Harbor: MCP servers. Not started.")
    healthcheck: Healthcheck | None = Field(default=None, description="Harbor: readiness check. Not run.")
    skills_dir: str | None = Field(default=None, description="Harbor: agent skills folder in the environment. Not used.")
    os: str | None = Field(default=None, description="Harbor: target OS ('linux' or 'windows'). Only linux runs here.")
    env: dict[str, str] = Field(default_factory=dict, description="Environment variables of the agent's shell.")
    # Harbor's deprecated size strings ("2G", "512M"); converted to memory_mb / storage_mb.
    memory: str | None = Field(default=None, exclude=True, description="Deprecated Harbor field; use memory_mb.")
    storage: str | None = Field(default=None, exclude=True, description="Deprecated Harbor field; use storage_mb.")

    @field_validator("workdir")
    @classmethod
    def _absolute(cls, v: str | None) -> str | None:
        if v is not None and not v.startswith("/"):
            raise ValueError(f"{v!r} must be an absolute path")
        return posixpath.normpath(v) if v is not None else None

    @model_validator(mode="after")
    def _sizes(self) -> EnvironmentSpec:
        for old, new in (("memory", "memory_mb"), ("storage", "storage_mb")):
            size = getattr(self, old)
            if size is None:
                continue
            mb = _size_to_mb(size)
            if new in self.model_fields_set and getattr(self, new) != mb:
                raise ValueError(f"{old} = {size!r} and {new} = {getattr(self, new)} disagree; give {new} only")
            setattr(self, new, mb)
            setattr(self, old, None)
        return self


class CollectHook(_Section):
    """Harbor's ``[[verifier.collect]]``: a command run before artifacts are collected. Not run."""

    command: str
    service: str = "main"
    timeout_sec: float = Field(default=60.0, gt=0)
    user: str | int | None = None


class VerifierSpec(_Network):
    timeout_sec: float = Field(default=600.0, gt=0, description="Wall time of tests/test.sh.")
    env: dict[str, str] = Field(default_factory=dict, description="Environment variables given to tests/test.sh.")
    user: str | int | None = Field(default=None, description="Harbor: OS user of the verifier. Not used.")
    environment_mode: Literal["shared", "separate"] | None = Field(
        default=None, description="Harbor: verify in the agent's sandbox or a separate one. Always the agent's here.")
    environment: EnvironmentSpec | None = Field(default=None, description="Harbor: the separate verifier sandbox. Not used.")
    collect: list[CollectHook] = Field(default_factory=list, description="Harbor: commands run before collecting artifacts. Not run.")

    @model_validator(mode="after")
    def _mode(self) -> VerifierSpec:
        if self.environment_mode == "shared" and self.environment is not None:
            raise ValueError("environment_mode = 'shared' cannot have a [verifier.environment]")
        return self

    @property
    def separate(self) -> bool:
        """Whether Harbor would verify in a separate sandbox."""
        return self.environment_mode == "separate" or (self.environment_mode is None and self.environment is not None)


class Artifact(_Section):
    """One entry of Harbor's top-level ``artifacts`` (a bare string is its ``source``). Not collected."""

    source: str
    destination: str | None = None
    service: str | None = None
    exclude: list[str] = Field(default_factory=list)

    @model_validator(mode="before")
    @classmethod
    def _from_string(cls, data: Any) -> Any:
        return {"source": data} if isinstance(data, str) else data

    @model_validator(mode="after")
    def _contained(self) -> Artifact:
        for p in (self.source, self.destination):
            if p is not None and ".." in p.split("/"):
                raise ValueError(f"artifact path {p!r} must not contain '..'")
        if self.destination is not None and self.destination.startswith("/"):
            raise ValueError(f"artifact destination {self.destination!r} must be relative")
        return self


class StepAgentSpec(_Network):
    """``[steps.agent]``: unset values fall back to the task's ``[agent]``, as in Harbor."""

    timeout_sec: float | None = Field(default=None, gt=0, description="Wall time the agent has for this step.")
    user: str | int | None = Field(default=None, description="Harbor: OS user of the agent. Not used.")


class StepVerifierSpec(_Network):
    """``[steps.verifier]``: unset values fall back to the task's ``[verifier]``; ``env`` is laid
    over the task's."""

    timeout_sec: float | None = Field(default=None, gt=0, description="Wall time of this step's test.sh.")
    env: dict[str, str] = Field(default_factory=dict, description="Added to [verifier] env for this step's test.sh.")
    user: str | int | None = Field(default=None, description="Harbor: OS user of the verifier. Not used.")
    environment_mode: Literal["shared", "separate"] | None = Field(
        default=None, description="Harbor: verify in the agent's sandbox or a separate one. Always the agent's here.")
    environment: EnvironmentSpec | None = Field(default=None, description="Harbor: the separate verifier sandbox. Not used.")


STEP_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]*$")


class StepSpec(_Section):
    """One ``[[steps]]`` entry of a multi-step task (Harbor's StepConfig): its files are in
    ``steps/<name>/``."""

    name: str = Field(description="The step's folder under steps/.")
    agent: StepAgentSpec = Field(default_factory=StepAgentSpec)
    verifier: StepVerifierSpec = Field(default_factory=StepVerifierSpec)
    min_reward: float | dict[str, float] | None = Field(
        default=None, description="A gate: below it (the reward, or each named key) the episode stops after this step.")
    contributes_to_reward: bool = Field(default=True, description="False: the step gates but does not count in the roll-up.")
    healthcheck: Healthcheck | None = Field(default=None, description="Harbor: readiness check before the step. Not run.")
    artifacts: list[Artifact] = Field(default_factory=list, description="Harbor: files copied out after the step. Not collected.")

    @field_validator("name")
    @classmethod
    def _folder_name(cls, v: str) -> str:
        if not STEP_NAME.match(v) or v in (".", ".."):
            raise ValueError(f"step name {v!r} must be a plain folder name (letters, digits, '_', '.', '-')")
        return v

    @field_validator("min_reward")
    @classmethod
    def _in_unit(cls, v: float | dict[str, float] | None) -> float | dict[str, float] | None:
        for x in ([v] if isinstance(v, int | float) else (v or {}).values()):
            if not 0.0 <= x <= 1.0:
                raise ValueError(f"min_reward {x} must lie in [0, 1]")
        return v


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
    """``task.toml``: Harbor's fields and defaults, up to schema 1.4. ``[metadata]`` is free-form;
    Practicum reads ``difficulty``, ``category`` and ``tags`` from it when present."""

    version: str = Field(default="1.0", description="Schema version (Harbor 1.1+ spells it schema_version).")
    metadata: dict[str, Any] = Field(default_factory=dict, description="Free-form: difficulty, category, tags, author...")
    agent: AgentSpec = Field(default_factory=AgentSpec)
    verifier: VerifierSpec = Field(default_factory=VerifierSpec)
    environment: EnvironmentSpec = Field(default_factory=EnvironmentSpec)
    solution: SolutionSpec = Field(default_factory=SolutionSpec)
    artifacts: list[Artifact] = Field(default_factory=list, description="Harbor: files copied out after the agent. Not collected.")
    task: PackageInfo | None = Field(default=None, description="Harbor: registry package information. Not used.")
    source: str | None = Field(default=None, description="Harbor: where the task came from. Not used.")
    steps: list[StepSpec] = Field(default_factory=list, description="Harbor: a multi-step task's steps, in order.")
    multi_step_reward_strategy: Literal["mean", "final"] | None = Field(
        default=None, description="Harbor: how the steps' rewards roll up: 'mean' (the default) or 'final'.")

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


class TaskStep(BaseModel):
    """One step of a multi-step task, loaded: ``steps/<name>/`` with its ``instruction.md``,
    ``tests/`` (laid over the task's own ``tests/``), ``solution/`` and ``workdir/`` (files put in
    the workdir when the step begins; its ``setup.sh`` then runs there)."""

    model_config = ConfigDict(frozen=True)
    spec: StepSpec
    path: Path  # steps/<name>
    instruction: str
    test_files: list[str]  # relative to the step's tests/
    solution_files: list[str]  # relative to the step's solution/
    workdir_files: list[str]  # relative to the step's workdir/
    agent_timeout_s: float  # [steps.agent] timeout_sec, else [agent]'s
    verifier_timeout_s: float  # [steps.verifier] timeout_sec, else [verifier]'s

    @property
    def name(self) -> str:
        return self.spec.name

    @property
    def solution_script(self) -> Path | None:
        return self.path / "solution" / "solve.sh" if "solve.sh" in self.solution_files else None

    @property
    def setup_script(self) -> str | None:
        return "setup.sh" if "setup.sh" in self.workdir_files else None


class TerminalTask(BaseModel):
    """A loaded, checked task folder. Paths are absolute; file lists are relative POSIX paths.

    A multi-step task (Harbor's ``[[steps]]``) has ``steps``; its ``instruction`` is the first
    step's, and its own ``tests/`` (possibly empty) holds what every step's tests share."""

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
    build_context: Path | None = None  # the compose file's services.main.build.context; None: environment/
    compose_env: dict[str, str] = Field(default_factory=dict)  # the compose file's services.main.environment
    steps: list[TaskStep] = Field(default_factory=list)  # a multi-step task's steps, in order

    @property
    def reward_strategy(self) -> Literal["mean", "final"]:
        return self.spec.multi_step_reward_strategy or "mean"

    def scripts(self) -> list[tuple[str, Path]]:
        """(kind, path) of every shell script the task runs: ``solution``, ``test`` or ``setup``."""
        out = [("solution", self.solution_script)] if self.solution_script is not None else []
        out += [("test", self.path / "tests" / f) for f in self.test_files if f.endswith(".sh")]
        for s in self.steps:
            out += [("solution", s.solution_script)] if s.solution_script is not None else []
            out += [("test", s.path / "tests" / f) for f in s.test_files if f.endswith(".sh")]
            out += [("setup", s.path / "workdir" / f) for f in s.workdir_files if f.endswith(".sh")]
        return out

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
    :func:`check_task` finds (warnings do not stop loading). Its ``tests/`` and ``solution/``
    are hidden from sandbox sessions started afterwards (:mod:`practicum.sandbox.hidden`)."""
    task, problems = _inspect(Path(path))
    errors = [p for p in problems if p.severity == "error"]
    if errors or task is None:
        raise TaskError(f"task folder {path} is invalid:\n" + "\n".join(f"  {p}" for p in errors))
    _hide_answers(Path(path))
    return task


def _hide_answers(folder: Path) -> None:
    from practicum.sandbox.hidden import hide

    steps = sorted((folder / "steps").glob("*/")) if (folder / "steps").is_dir() else []
    hide(*(base / d for base in (folder, *steps) for d in ("tests", "solution") if (base / d).exists()))


def load_tasks(root: str | Path) -> list[TerminalTask]:
    """Load a folder of task folders (every subfolder with a task.toml, by name), or ``root``
    itself when it is a task folder. Errors of all tasks are reported together. Like
    :func:`load_task`, hides each task's tests and solution from later sandbox sessions."""
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
            _hide_answers(d)
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
    """The reward from the contents of reward.txt and reward.json (None: the file is absent).

    ``reward.json`` is either an object with a numeric ``"reward"`` (the reward; its other numeric
    keys become score components, as before), or, without a ``"reward"`` key, an object of named
    rewards, as Harbor's multi-reward verifiers write (``{"correctness": 1, "performance": 0}``):
    then every value must be a number in [0, 1], each is kept as a component, and the reward is
    their mean, so each named reward weighs the same.
    """
    if reward_txt is not None:
        raw = reward_txt.strip()
        try:
            value = float(raw)
        except ValueError:
            raise VerifierFailure(f"reward.txt holds {raw[:80]!r}, not a number") from None
        return Score(value=_unit(value, "reward.txt"), explanation="reward.txt")
    if reward_json is None:
        raise VerifierFailure("the verifier wrote no reward (neither reward.txt nor reward.json)")
    try:
        data = json.loads(reward_json)
    except (json.JSONDecodeError, RecursionError) as e:  # RecursionError: nested too deep
        raise VerifierFailure(f"reward.json is not JSON: {e}") from None
    if not isinstance(data, dict) or not data:
        raise VerifierFailure('reward.json must be an object: {"reward": 0.5} or named rewards such as '
                              '{"correctness": 1, "performance": 0}')
    if "reward" in data:
        if not _is_number(data["reward"]):
            raise VerifierFailure(f'reward.json: "reward" is {data["reward"]!r}; it must be a number')
        components = {k: float(v) for k, v in data.items() if k != "reward" and _is_number(v)}
        return Score(value=_unit(float(data["reward"]), "reward.json"), components=components,
                     explanation="reward.json")
    named: dict[str, float] = {}
    for key, v in data.items():
        if not _is_number(v):
            raise VerifierFailure(f"reward.json: the named reward {key!r} is {v!r}; every named reward must be a number")
        named[key] = _unit(float(v), f"reward.json {key!r}")
    return Score(value=sum(named.values()) / len(named), components=named,
                 explanation=f"reward.json: mean of {', '.join(named)}")


def _is_number(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool)


def _unit(value: float, source: str) -> float:
    if not math.isfinite(value) or not 0.0 <= value <= 1.0:
        raise VerifierFailure(f"{source}: reward {value} is outside [0, 1]")
    return value


# --- checking ------------------------------------------------------------------------------------

# Commands that fetch from a network the sandbox does not have, by their first words. Package
# installs (apt-get/apt, pip, uv, uvx) are not among them: Practicum serves them offline (the
# standard Terminal-Bench verifier bootstrap among them), and so is the uv installer fetched with
# curl or wget (_OFFLINE_URL); a git clone of a local folder needs no network.
_FETCHES = {"curl": "curl", "wget": "wget", "git clone": "git clone", "npm install": "npm install", "npm ci": "npm ci",
            "npm i": "npm install", "yarn add": "yarn add", "yarn install": "yarn install", "go get": "go get",
            "cargo install": "cargo install"}
_SEGMENT = re.compile(r"&&|\|\||[;|&()]|\$\(|`")
_URL = re.compile(r"""(?:https?|ftp)://[^\s'"|;&)]+""")
_OFFLINE_URL = re.compile(r"^https?://astral\.sh/uv/(?:[^/]+/)?install\.sh$|^https?://(?:localhost|127\.0\.0\.1|\[::1\])(?:[:/]|$)")
_REMOTE_GIT = re.compile(r"://|^[\w.-]+@[\w.-]+:")


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
        except OSError as e:
            err(tp, f"unreadable: {e.strerror or e}")
        else:
            spec = _validate_spec(raw, tp, err, warn)
    if spec is not None:
        _check_spec(spec, tp, err, warn)

    # instruction.md (a multi-step task's agent is given its steps' instead)
    multi_step = spec is not None and bool(spec.steps)
    instruction = "" if multi_step else _instruction(path / "instruction.md", err)

    # environment/
    env_dir = path / "environment"
    workdir = DEFAULT_WORKDIR
    env_files: list[str] = []
    dockerfile: Path | None = None
    build_context: Path | None = None
    compose_env: dict[str, str] = {}
    setup: Path | None = None
    if env_dir.exists() and not env_dir.is_dir():
        err(env_dir, "must be a folder of files that seed the workspace")
    elif env_dir.is_dir():
        files = _files(env_dir, problems)
        env_files = [f for f in files if f not in NOT_SEEDED]
        for compose in ("docker-compose.yaml", "docker-compose.yml"):
            if compose in files:
                build_context, compose_env = _compose_build(env_dir / compose, path, "Dockerfile" in files, err, warn)
        if "Dockerfile" in files:
            dockerfile = env_dir / "Dockerfile"
            try:
                recipe = parse_dockerfile(dockerfile.read_text(encoding="utf-8"))
            except (OSError, UnicodeDecodeError) as e:
                err(dockerfile, f"unreadable: {e}")
                recipe = None
            if recipe is not None:
                workdir = recipe.workdir or DEFAULT_WORKDIR
                for p in recipe.problems:
                    err(dockerfile, str(p))
                for c in _missing_copy_sources(recipe, build_context or env_dir):
                    err(dockerfile, c)
            if not workdir.startswith("/") or workdir == "/":
                err(dockerfile, f"WORKDIR {workdir!r}: the workspace needs an absolute folder other than /")
            elif any(workdir == r or workdir.startswith(r + "/") for r in RESERVED_DIRS):
                err(dockerfile, f"WORKDIR {workdir}: lies in a folder the environment mounts itself ({', '.join(RESERVED_DIRS)})")
        elif spec is not None and spec.environment.docker_image:
            warn(tp, "[environment] docker_image is not used: the task runs in Practicum's shared environment "
                     f"with the workspace at {DEFAULT_WORKDIR}")
        if SETUP_SCRIPT in files:
            setup = env_dir / SETUP_SCRIPT
            _check_script(setup, problems)
    # Harbor 1.4: task.toml's [environment] workdir wins over the Dockerfile's WORKDIR.
    if spec is not None and spec.environment.workdir is not None:
        workdir = spec.environment.workdir
        if workdir == "/":
            err(tp, "[environment] workdir = '/': the workspace needs an absolute folder other than /")
        elif _reserved(workdir):
            err(tp, f"[environment] workdir = {workdir!r}: lies in a folder the environment mounts itself "
                    f"({', '.join(RESERVED_DIRS)})")
    # solution/
    sol_dir = path / "solution"
    sol_files = _files(sol_dir, problems) if sol_dir.is_dir() else []
    if "solve.sh" in sol_files:
        _check_script(sol_dir / "solve.sh", problems)
    elif not multi_step:
        warn(sol_dir / "solve.sh", "missing: without a reference solution the task cannot be shown solvable")

    # tests/ (a multi-step task's: what its steps' tests are laid over)
    tests_dir = path / "tests"
    test_files = _files(tests_dir, problems) if tests_dir.is_dir() else []
    ts = tests_dir / "test.sh"
    if "test.sh" in test_files:
        _check_script(ts, problems)
    if not multi_step:
        if "test.sh" not in test_files:
            err(ts, "missing: the verifier that writes the reward")
        elif not _names_reward([tests_dir / f for f in test_files]):
            err(ts, f"writes no reward: nothing in tests/ names {VERIFIER_DIR}/reward.txt or reward.json")

    # steps/
    steps: list[TaskStep] = []
    if multi_step:
        assert spec is not None
        steps = _inspect_steps(path, spec, test_files, problems, err, warn)
        instruction = steps[0].instruction if steps else ""
    elif (path / "steps").is_dir():
        warn(path / "steps", "not used: task.toml declares no [[steps]], so this is a single-step task")

    if any(p.severity == "error" for p in problems) or spec is None:
        return None, problems
    task = TerminalTask(
        name=path.name, path=path, instruction=instruction, spec=spec, workdir=workdir,
        environment_files=env_files, setup_script=setup, solution_files=sol_files, test_files=test_files,
        dockerfile=dockerfile, build_context=build_context, compose_env=compose_env, steps=steps,
    )
    return task, problems


def _instruction(ip: Path, err: Any) -> str:
    """The text of an instruction.md ('' after reporting what is wrong with it)."""
    if not ip.is_file():
        err(ip, "missing: the instruction the agent is given")
        return ""
    try:
        text = ip.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        err(ip, "not UTF-8 text")
        return ""
    except OSError as e:
        err(ip, f"unreadable: {e.strerror or e}")
        return ""
    if not text.strip():
        err(ip, "empty: the agent would be given nothing to do")
    return text


def _names_reward(files: list[Path]) -> bool:
    return any(r in _text(f) for f in files for r in REWARD_FILES)


def _inspect_steps(path: Path, spec: TaskSpec, task_tests: list[str], problems: list[Problem],
                   err: Any, warn: Any) -> list[TaskStep]:
    """The steps of a multi-step task, each from ``steps/<name>/`` as Harbor lays them out:
    ``instruction.md`` (required), ``tests/`` over the task's ``tests/`` (a ``test.sh`` from one of
    them is required), ``solution/solve.sh`` and ``workdir/`` (optional)."""
    root = path / "steps"
    if not root.is_dir():
        err(root, f"missing: task.toml declares {len(spec.steps)} [[steps]], whose files live in steps/<name>/")
        return []
    names = [s.name for s in spec.steps]
    for dup in sorted({n for n in names if names.count(n) > 1}):
        err(path / "task.toml", f"[[steps]] name {dup!r} is given twice")
    extra = sorted(d.name for d in root.iterdir() if d.is_dir() and d.name not in names)
    if extra:
        warn(root, f"not a step of task.toml's [[steps]], so never run: {', '.join(extra)}")
    steps = []
    for s in spec.steps:
        d = root / s.name
        if not d.is_dir():
            err(d, f"missing: the folder of step {s.name!r}")
            continue
        instruction = _instruction(d / "instruction.md", err)
        tests = _files(d / "tests", problems) if (d / "tests").is_dir() else []
        solution = _files(d / "solution", problems) if (d / "solution").is_dir() else []
        workdir = _files(d / "workdir", problems) if (d / "workdir").is_dir() else []
        if "test.sh" in tests:
            _check_script(d / "tests" / "test.sh", problems)
        elif "test.sh" not in task_tests:
            err(d / "tests" / "test.sh", "missing, and the task's tests/ has none: nothing verifies this step")
        if not _names_reward([d / "tests" / f for f in tests] + [path / "tests" / f for f in task_tests]):
            err(d / "tests", f"writes no reward: nothing in this step's tests/ or the task's names "
                             f"{VERIFIER_DIR}/reward.txt or reward.json")
        if "solve.sh" in solution:
            _check_script(d / "solution" / "solve.sh", problems)
        else:
            warn(d / "solution" / "solve.sh", "missing: without a reference solution the step cannot be shown solvable")
        if "setup.sh" in workdir:
            _check_script(d / "workdir" / "setup.sh", problems)
        if s.healthcheck is not None:
            warn(path / "task.toml", f"[[steps]] {s.name!r}: healthcheck is not run by Practicum")
        if s.verifier.environment_mode == "separate" or s.verifier.environment is not None:
            warn(path / "task.toml", f"[[steps]] {s.name!r}: a separate verifier sandbox is not made; the step's "
                                     "tests run in the agent's sandbox")
        steps.append(TaskStep(
            spec=s, path=d, instruction=instruction, test_files=tests, solution_files=solution, workdir_files=workdir,
            agent_timeout_s=s.agent.timeout_sec or spec.agent.timeout_sec,
            verifier_timeout_s=s.verifier.timeout_sec or spec.verifier.timeout_sec))
    counted = [s for s in spec.steps if s.contributes_to_reward]
    if not counted:
        err(path / "task.toml", "[[steps]]: every step has contributes_to_reward = false, so nothing makes the reward")
    return steps


IGNORED_FIELD = "; ignored, as Harbor ignores it"


def _validate_spec(raw: dict[str, Any], tp: Path, err: Any, warn: Any) -> TaskSpec | None:
    """task.toml read as Harbor reads it: a field Harbor does not know is ignored there, so here
    it is a warning (a typo still shows), and the rest is validated without it; both
    ``version`` and ``schema_version`` (Harbor's older and newer names) take ``schema_version``."""
    if isinstance(raw.get("schema_version"), str) and "version" in raw:
        warn(tp, f"both version = {raw['version']!r} and schema_version = {raw['schema_version']!r}: "
                 "schema_version is read")
        raw = {k: v for k, v in raw.items() if k != "version"}
    for _ in range(2):  # the second pass only ever sees what the first did not take out
        try:
            return TaskSpec.model_validate(raw)
        except ValidationError as e:
            unknown = [p for p in e.errors() if p["type"] == "extra_forbidden"]
            if len(unknown) < len(e.errors()) or not unknown:
                for problem in e.errors():
                    if problem["type"] == "extra_forbidden":
                        warn(tp, _field_message(problem) + IGNORED_FIELD)
                    else:
                        err(tp, _field_message(problem))
                return None
            for problem in unknown:
                warn(tp, _field_message(problem) + IGNORED_FIELD)
                raw = _without(raw, list(problem["loc"]))
    return None


def _without(data: Any, loc: list[Any]) -> Any:
    """``data`` without the key at ``loc`` (a copy of each table on the way)."""
    if not loc or not isinstance(data, (dict, list)):
        return data
    head, *rest = loc
    if isinstance(data, list):
        return [(_without(v, rest) if i == head else v) for i, v in enumerate(data)]
    if not rest:
        return {k: v for k, v in data.items() if k != head}
    return {k: (_without(v, rest) if k == head else v) for k, v in data.items()}


# What Harbor's compose files interpolate, as Harbor sets it (inside the container)
HARBOR_COMPOSE_VARS = {"TEST_DIR": "/tests", "ENV_VERIFIER_LOGS_PATH": VERIFIER_DIR, "ENV_AGENT_LOGS_PATH": "/logs/agent"}


def _compose_build(compose: Path, task: Path, has_dockerfile: bool, err: Any,
                   warn: Any) -> tuple[Path | None, dict[str, str]]:
    """What of a task's compose file Practicum uses: the main service's ``build.context`` (Harbor
    sets ``CONTEXT_DIR`` to ``environment/``; tasks point it at the task folder to ``COPY app/``),
    which must stay inside the task folder, and its ``environment`` (Harbor's ``${TEST_DIR}`` and
    log paths filled in as Harbor fills them). Returns (the build context, or None for
    ``environment/``; the environment). Other services are not started (a warning)."""
    try:
        data = yaml.safe_load(compose.read_text(encoding="utf-8")) or {}
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as e:
        err(compose, f"not a readable compose file: {str(e).splitlines()[0]}")
        return None, {}
    services = data.get("services") if isinstance(data, dict) else None
    if not isinstance(services, dict) or not services:
        warn(compose, "compose services are not started by Practicum")
        return None, {}
    others = sorted(str(k) for k in services if k != "main")
    if others:
        warn(compose, f"compose services are not started by Practicum: {', '.join(others)}")
    main = services.get("main") if isinstance(services.get("main"), dict) else {}
    unused = sorted(str(k) for k in main if k not in ("build", "image", "command", "environment"))
    if unused:
        warn(compose, f"services.main: {', '.join(unused)} not used by Practicum (the image is built from "
                      "environment/Dockerfile and run with task.toml's limits)")
    env_dir = task / "environment"
    values = {"CONTEXT_DIR": str(env_dir), **HARBOR_COMPOSE_VARS}

    def fill(raw: str, where: str) -> str | None:
        out, missing = substitute(raw, values)  # compose interpolates as a Dockerfile does
        if missing:
            err(compose, f"{where} {raw!r}: {', '.join(sorted(set(missing)))} is not one of the variables "
                         f"Harbor sets ({', '.join(sorted(values))})")
            return None
        return out

    env: dict[str, str] = {}
    raw_env = main.get("environment") or {}
    pairs = (raw_env.items() if isinstance(raw_env, dict)
             else (str(x).partition("=")[::2] for x in raw_env) if isinstance(raw_env, list) else [])
    for k, v in pairs:
        value = fill(str(v if v is not None else ""), f"services.main.environment {k}:")
        if value is not None:
            env[str(k)] = value
    build = main.get("build")
    if isinstance(build, str):
        build = {"context": build}
    if not isinstance(build, dict) or "context" not in build:
        return None, env
    raw = str(build["context"])
    context_text = fill(raw, "services.main.build.context")
    if context_text is None:
        return None, env
    context = (env_dir / context_text).resolve()
    if context != task and task not in context.parents:
        err(compose, f"services.main.build.context {raw!r} leaves the task folder")
        return None, env
    dockerfile = fill(str(build.get("dockerfile", "")), "services.main.build.dockerfile")
    if dockerfile and (context / dockerfile).resolve() != (env_dir / "Dockerfile").resolve():
        err(compose, f"services.main.build.dockerfile {build['dockerfile']!r}: the task's image is built from "
                     "environment/Dockerfile")
    if not has_dockerfile:
        err(compose, "services.main.build names a build, but environment/ has no Dockerfile")
    return (None if context == env_dir.resolve() else context), env


def _reserved(workdir: str) -> bool:
    return any(workdir == r or workdir.startswith(r + "/") for r in RESERVED_DIRS)


def _check_spec(spec: TaskSpec, tp: Path, err: Any, warn: Any) -> None:
    """What task.toml asks for that cannot be given here (errors) or is silently not done (warnings)."""
    env = spec.environment
    if spec.version not in KNOWN_SCHEMA_VERSIONS:
        warn(tp, f"schema_version {spec.version!r}: Practicum knows Harbor's task schema {', '.join(KNOWN_SCHEMA_VERSIONS)}")
    if env.gpus > 0:
        err(tp, f"[environment] gpus = {env.gpus}: Practicum's terminal sandboxes have no GPU")
    if env.tpu is not None:
        err(tp, "[environment.tpu]: Practicum's terminal sandboxes have no TPU")
    if env.os not in (None, "linux"):
        err(tp, f"[environment] os = {env.os!r}: only linux tasks run here")
    if spec.multi_step_reward_strategy is not None and not spec.steps:
        warn(tp, "multi_step_reward_strategy is not used: the task has no [[steps]]")
    if env.mcp_servers:
        warn(tp, "[environment] mcp_servers are not started by Practicum")
    if env.healthcheck:
        warn(tp, "[environment] healthcheck is not run by Practicum")
    if spec.verifier.separate:
        warn(tp, "[verifier] a separate verifier sandbox is not made: tests/test.sh runs in the agent's "
                 "sandbox after the agent, with tests/ copied to /tests (the Python packages tests/Dockerfile "
                 "installs join the verifier's toolchain)")
    if spec.verifier.collect:
        warn(tp, "[[verifier.collect]] hooks are not run (artifacts are not collected)")


def _missing_copy_sources(recipe: ImageRecipe, context: Path) -> list[str]:
    """COPY/ADD sources that are not in the build context (the build would fail on them), in the
    image's stage and in the earlier stages it copies from."""
    out = []
    for stage in recipe.stages.values():
        out += [m for m in _missing_copy_sources(stage, context) if m not in out]
    for step in recipe.steps:
        # a tool image's files come from PyPI, a stage's from that stage
        if isinstance(step, Copy) and step.tool is None and step.stage is None:
            for src in step.sources:
                rel = src.lstrip("/") or "."
                found = glob.glob(rel, root_dir=context) if any(c in rel for c in "*?[") else os.path.lexists(context / rel)
                if not found:
                    out.append(f"line {step.line}: COPY source {src!r} is not in environment/ (the build context)")
    return out


def _field_message(problem: Any) -> str:
    """One pydantic error as ``[section] field: what is wrong``, with list entries as ``name[i]``."""
    loc = list(problem["loc"])
    dotted = ""
    for part in loc[1:] if _is_section(loc) else loc:
        dotted += f"[{part}]" if isinstance(part, int) else f"{'.' if dotted else ''}{part}"
    if _is_section(loc):
        where = f"[{loc[0]}] {dotted}"
    elif len(loc) == 1 and _is_section([*loc, ""]) and problem["type"] != "extra_forbidden":
        where = f"[{loc[0]}]"  # the table as a whole (a rule across its fields, or not a table)
    else:
        where = dotted or "(top level)"
    if problem["type"] == "extra_forbidden":
        model = _model_at(loc[:-1])
        names = [k for k in model.model_fields if k not in ("memory", "storage", *_Network.model_fields)]
        names += [k for k in _Network.model_fields if k in model.model_fields]  # inherited: last
        if model is TaskSpec:
            names.insert(0, "schema_version")
        return f"{where}: unknown field (Harbor's fields here: {', '.join(names)})"
    return f"{where}: {problem['msg'].removeprefix('Value error, ')}"


def _is_section(loc: list[Any]) -> bool:
    """Whether ``loc`` lies inside one of task.toml's ``[tables]``."""
    return len(loc) > 1 and loc[0] in ("agent", "verifier", "environment", "solution", "task")


def _model_at(loc: list[Any]) -> type[BaseModel]:
    """The model that holds the field at ``loc`` (list indices skipped); TaskSpec at the top."""
    model: type[BaseModel] = TaskSpec
    for part in loc:
        if isinstance(part, int):
            continue
        field = model.model_fields.get(str(part))
        nested = _submodel(field.annotation) if field else None
        if nested is None:
            return model
        model = nested
    return model


def _submodel(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in get_args(annotation):
        if (found := _submodel(arg)) is not None:
            return found
    return None


def _files(folder: Path, problems: list[Problem]) -> list[str]:
    """Regular files under ``folder``, relative, sorted; links that leave it and special files
    are problems (copying them would reach outside the task)."""
    out: list[str] = []
    root = folder.resolve()
    def unreadable(e: OSError) -> None:
        problems.append(Problem(file=Path(e.filename or folder), message=f"unreadable folder: {e.strerror or e}"))

    for dirpath, dirnames, filenames in os.walk(folder, onerror=unreadable, followlinks=False):
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
            try:
                mode = p.stat().st_mode
            except OSError as e:  # a dangling link, a file gone meanwhile
                problems.append(Problem(file=p, message=f"unreadable: {e.strerror or e}"))
                continue
            if not stat.S_ISREG(mode):
                problems.append(Problem(file=p, message="not a regular file"))
                continue
            if not os.access(p, os.R_OK):
                problems.append(Problem(file=p, message="unreadable: permission denied"))
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
    try:
        data = p.read_bytes()
    except OSError as e:
        problems.append(Problem(file=p, message=f"unreadable: {e.strerror or e}"))
        return
    text = data.decode("utf-8", errors="replace")
    if not text.strip():
        problems.append(Problem(file=p, message="empty script"))
        return
    for lineno, why in _bad_carriage_returns(text):
        problems.append(Problem(file=p, message=f"line {lineno} {why}"))
    first = text.splitlines()[0]
    if not first.startswith("#!"):
        problems.append(Problem(file=p, severity="warning", message="no #! line (it is run with bash)"))
    elif not re.search(r"\b(bash|sh)\b", first):
        problems.append(Problem(file=p, severity="warning", message=f"{first!r}: it is run with bash regardless"))
    if not p.stat().st_mode & stat.S_IXUSR:
        problems.append(Problem(file=p, severity="warning", message="not executable (chmod +x; it is run with bash)"))
    for lineno, line in enumerate(text.splitlines(), 1):
        fetch = _network_fetch(line.split("#", 1)[0] if not line.lstrip().startswith("#!") else "")
        if fetch is not None:
            problems.append(Problem(file=p, severity="warning", message=(
                f"line {lineno} seems to fetch from the network ({fetch!r}); sandboxes have none")))
            break


def _network_fetch(code: str) -> str | None:
    """The fetching command of a line of shell (see _FETCHES), or None."""
    for segment in _SEGMENT.split(code):
        words = segment.split()
        while words and (re.match(r"^\w+=", words[0]) or words[0] in ("sudo", "exec", "env", "time", "!")):
            words = words[1:]  # FOO=1 sudo curl ... is curl
        if not words:
            continue
        first = words[0].rsplit("/", 1)[-1]
        args = [w for w in words[1:] if not w.startswith("-")]
        name = _FETCHES.get(first) or _FETCHES.get(f"{first} {args[0]}" if args else "")
        if name is None:
            continue
        urls = _URL.findall(segment)
        if name in ("curl", "wget") and urls and all(_OFFLINE_URL.match(u) for u in urls):
            continue
        if name == "git clone" and not any(_REMOTE_GIT.search(a) for a in args[1:]):
            continue
        return name
    return None


# A CR is not a shell metacharacter: ``cat <<EOF\r`` makes "EOF\r" the delimiter, as bash does.
_HEREDOC = re.compile(r"""<<(-?)[ \t]*(?:'([^']*)'|"([^"]*)"|\\?([^ \t\n;&|<>()'"]+))""")


def _bad_carriage_returns(text: str) -> list[tuple[int, str]]:
    """The lines whose carriage return bash would trip on, with the reason.

    A CR before the newline of a command line becomes part of its last word (``$'\\r': command
    not found``, ``cd dir\\r``, a ``\\`` continuation that no longer continues). A CR inside
    data does no harm: here-document bodies, comments, and lines that end inside a quoted string.
    A here-document's terminator with a CR does not end it, unless the delimiter word carried the
    same CR. The shell grammar is approximated: quotes, comments, ``$((...))`` and here-documents.
    """
    bad: list[tuple[int, str]] = []
    pending: list[tuple[str, bool]] = []  # here-documents opened on the current line: (delimiter, <<-)
    body: tuple[str, bool] | None = None  # the here-document whose body we are in
    queue: list[tuple[str, bool]] = []
    quote = ""  # the quote a line ended inside, carried to the next
    for lineno, line in enumerate(text.split("\n"), 1):
        if body is not None:
            delim, strip_tabs = body
            candidate = line.lstrip("\t") if strip_tabs else line
            if candidate == delim:
                body = queue.pop(0) if queue else None
            elif candidate.endswith("\r") and candidate[:-1] == delim:
                bad.append((lineno, f"ends the here-document {delim!r} with a CRLF line ending: bash "
                                    "does not see the terminator, and the here-document swallows the rest"))
            continue
        quote, pending, comment = _scan(line, quote)
        absorbed = bool(pending) and pending[-1][0].endswith("\r")  # `cat <<EOF\r`: the CR is the delimiter's
        if line.endswith("\r") and not quote and not comment and not absorbed:
            bad.append((lineno, "has a CRLF line ending on a command line: bash would read the '\\r' "
                                "as part of the command (CRLF inside here-documents and quotes is fine)"))
        if pending:
            body, queue = pending[0], pending[1:]
    return bad


def _scan(line: str, quote: str) -> tuple[str, list[tuple[str, bool]], bool]:
    """Walk one line of shell: the quote still open at its end, the here-documents it opens, and
    whether it ends in a comment."""
    heredocs: list[tuple[str, bool]] = []
    i, n, arith = 0, len(line), 0
    while i < n:
        c = line[i]
        if quote:
            if c == "\\" and quote == '"':
                i += 2
                continue
            if c == quote:
                quote = ""
            i += 1
            continue
        if c == "\\":
            i += 2
            continue
        if c in "'\"`":
            quote = c
        elif c == "#" and (i == 0 or line[i - 1] in " \t;&|()"):
            return quote, heredocs, True  # a comment runs to the end of the line
        elif line.startswith("((", i):
            arith += 1
            i += 2
            continue
        elif line.startswith("))", i) and arith:
            arith -= 1
            i += 2
            continue
        elif line.startswith("<<<", i):
            i += 3
            continue
        elif line.startswith("<<", i) and not arith:
            m = _HEREDOC.match(line, i)
            if m:
                word = next(g for g in m.groups()[1:] if g is not None)
                heredocs.append((word.replace("\\", ""), m.group(1) == "-"))
                i = m.end()
                continue
        i += 1
    return quote, heredocs, False
