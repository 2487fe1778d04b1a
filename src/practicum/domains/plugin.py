"""The domain plugin contract: what a package implements to add a domain to Practicum.

A domain plugin is one object, registered under the ``practicum.domains`` entry-point group
(``[project.entry-points."practicum.domains"]`` in its ``pyproject.toml``, value
``module:object``); the entry point's name is the ``env:`` value a run config uses. The
built-in domains (math, code, terminal, gym...) are registered exactly the same way, so a
third-party domain is a peer of theirs (docs/domains.md walks through one).

The plugin declares:

* ``name``, ``about``: the ``env:`` value and one line for ``practicum envs list``;
* ``options_model``: a pydantic model of its own settings, the ``options:`` mapping of a domain
  section (and ``source:``, handed to it as ``options.source`` when the model has a ``source``
  field). It is validated when the config loads, and its errors name the config file and the
  field (``domains.0.options.mode``);
* ``components``: the headline score components its verifier reports (training's per-domain
  metrics show these, and no generic code names any domain's components);
* ``tools``: the names of the tools its environment offers (``()`` for a single-turn domain).

and implements:

* ``build(section, options, ctx)``: the :class:`~practicum.envs.base.Domain` a config section
  describes (a task source and an environment factory);
* ``load_task(path)``: one task from a task file, for ``practicum verify DOMAIN --task``; a bad
  file raises :class:`~practicum.errors.TaskError` naming the file (and the field);
* ``verify(task, answer, ctx)``: score one answer to one task, the way training scores an
  episode, as a :class:`Verdict`.

Shared resources are handed to the plugin in a :class:`BuildContext` (the seed, where relative
paths resolve, the cache folder, the sandbox backend and a sandbox pool factory); a plugin never
wires its own.

Conventions that the ``envs`` commands rely on: a task's ``metadata["reference"]``, where
present, is a reference answer that ``verify`` scores 1 (``practicum envs show`` prints and
scores it); and ``build`` with a section that sets nothing but ``name`` and ``env`` and the
options model's defaults gives the plugin's default task set, or raises
:class:`~practicum.errors.ConfigError` saying what it needs.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from practicum.envs.base import Domain
from practicum.errors import TaskError
from practicum.records import Message, Score, Task

M = TypeVar("M", bound=BaseModel)

if TYPE_CHECKING:
    from practicum.config import DomainSection

__all__ = ["BuildContext", "DomainPlugin", "Options", "SourceOptions", "Verdict", "preamble", "read_task_json",
           "parse_task", "resolve_path", "section_prompt", "task_target", "validation_summary"]


@dataclass
class BuildContext:
    """What a plugin is handed to build a domain or verify an answer."""

    seed: int = 0  # the run's seed: task sampling must be a pure function of (seed, index)
    base_dir: Path = Path(".")  # folder of the config file: relative paths resolve against it
    home: Path = field(default_factory=lambda: _home())  # PRACTICUM_HOME: caches go under home / "data" / <plugin>
    sandbox: str = "auto"  # sandbox backend name for domains that run code (`practicum doctor` lists them)
    # A sandbox pool factory: ``sessions(limits=None, size=4, backend=None)`` returns a pool of
    # warm sessions of ``backend`` (default: ``sandbox``), one per running event loop
    # (:class:`practicum.sandbox.LoopPool`); the domain closes it in its ``close()``.
    sessions: Callable[..., Any] | None = None
    run_dir: Path | None = None  # the run's folder when training or evaluating: per-run files (renders) go there

    def data_dir(self, plugin: str) -> Path:
        """The cache folder of one plugin (created on first use by the plugin)."""
        return self.home / "data" / plugin


@dataclass
class Verdict:
    """One verified answer: the score training would give it, and what looked suspicious."""

    score: Score  # value in [0, 1], components, explanation
    flags: list[str] = field(default_factory=list)  # informative hack/suspicion flags, e.g. "hardcoded_values"

    def to_json(self) -> dict[str, Any]:
        return {"value": self.score.value, "components": self.score.components,
                "explanation": self.score.explanation, "flags": self.flags}


@runtime_checkable
class DomainPlugin(Protocol):
    """A domain, as a package registers it (see the module docstring)."""

    name: str  # the `env:` value in a config and the entry-point name
    about: str  # one line for `practicum envs list`
    options_model: type[BaseModel]  # the plugin's own settings: a domain section's `options:` mapping
    components: tuple[str, ...]  # headline score components (metrics show these)
    tools: tuple[str, ...]  # tool names its environment offers (() for single-turn)

    def build(self, section: DomainSection, options: Any, ctx: BuildContext) -> Domain:
        """The domain a config section describes; ``options`` is ``options_model`` validated."""
        ...

    def load_task(self, path: Path) -> Task:
        """One task from a task file (``practicum verify DOMAIN --task``); a bad file raises
        :class:`~practicum.errors.TaskError` naming the file and the field."""
        ...

    async def verify(self, task: Task, answer: str, ctx: BuildContext) -> Verdict:
        """Score one answer to one task, as training would."""
        ...


# --- building blocks for plugins ----------------------------------------------------------------

class Options(BaseModel):
    """A base for options models: unknown fields are errors, so a typo never falls back to a default."""

    model_config = ConfigDict(extra="forbid")


class SourceOptions(Options):
    """The common shape of a domain's ``source:`` section. A plugin narrows ``kind`` to the kinds
    it takes (a ``Literal``) and documents them."""

    kind: str = Field(..., description="Where tasks come from; each domain lists the kinds it takes (docs/domains.md).")
    dataset: str | None = Field(None, description="reasoning_gym: generator name, e.g. chain_sum.")
    params: dict[str, Any] = Field(default_factory=dict, description="reasoning_gym: generator parameters.")
    path: str | None = Field(None, description="jsonl/tasks: task file or folder (relative paths resolve against the config file).")
    eval_fraction: float = Field(0.2, ge=0, lt=1, description="jsonl/tasks: leading fraction of the tasks held out for evaluation.")

    @model_validator(mode="after")
    def _needs(self) -> SourceOptions:
        if self.kind == "reasoning_gym" and not self.dataset:
            raise ValueError("reasoning_gym sources need 'dataset'")
        if self.kind in ("jsonl", "tasks") and not self.path:
            raise ValueError(f"{self.kind} sources need 'path'")
        return self


def resolve_path(path: str | Path, base_dir: str | Path) -> Path:
    """A path from a config file: relative paths resolve against the config's folder."""
    p = Path(path)
    return p if p.is_absolute() else Path(base_dir) / p


def preamble(system_prompt: str | None, examples: list[tuple[str, str]] | None) -> list[Message]:
    """The messages before a task's question: the system prompt, then worked examples as earlier
    user/assistant turns (few-shot)."""
    out = [Message(role="system", content=system_prompt)] if system_prompt else []
    for question, reply in examples or []:
        out += [Message(role="user", content=question), Message(role="assistant", content=reply)]
    return out


def section_prompt(section: DomainSection, default_system_prompt: str) -> tuple[str, list[tuple[str, str]]]:
    """A config section's system prompt (else the domain's default) and its worked examples as
    ``(question, reply)`` pairs: what :func:`preamble` takes."""
    system = default_system_prompt if section.system_prompt is None else section.system_prompt
    return system, [(e.question, e.reply) for e in section.examples]


def held_out(section: DomainSection, size: int | None, default_size: int, seed: int | None = None,
             default_seed: int | None = None) -> tuple[int, int | None]:
    """The held-out set's size and seed for a domain whose plugin has its own defaults: the
    plugin's option if the user set one, else the section's ``eval_size`` / ``eval_seed`` if the
    user set those (they mean the same for every domain), else the plugin's defaults."""
    given = section.model_fields_set
    n = size if size is not None else section.eval_size if "eval_size" in given else default_size
    s = seed if seed is not None else section.eval_seed if "eval_seed" in given else default_seed
    return n, s


def parse_task(data: Any, model: type[M], where: str, what: str) -> M:
    """One task object of a task file read as the plugin's ``model``; anything else raises
    TaskError naming ``where`` (the file, and line) and the fields at fault."""
    if not isinstance(data, dict):
        raise TaskError(f"{where}: a {what} task must be a JSON object, got {type(data).__name__}")
    try:
        return model.model_validate(data)
    except ValidationError as e:
        raise TaskError(f"{where}: invalid {what} task: {validation_summary(e)}") from None


def task_target(task: Task, model: type[M], what: str) -> M:
    """A task's ``target`` read as the plugin's key ``model``; one that is not raises TaskError
    naming the task and the field (a task built elsewhere, or a stored task of an older format)."""
    try:
        return model.model_validate(task.target)
    except ValidationError as e:
        raise TaskError(f"task {task.id}: its target is not {what}: {validation_summary(e)}") from None


def read_task_json(path: Path) -> Any:
    """A task file's JSON; an unreadable file or bad JSON raises TaskError naming the file."""
    try:
        return json.loads(Path(path).read_text())
    except OSError as e:
        raise TaskError(f"cannot read task file {path}: {e.strerror}") from None
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as e:  # RecursionError: nested too deep
        raise TaskError(f"{path}: not valid JSON ({e})") from None


def validation_summary(e: ValidationError) -> str:
    """A pydantic error as ``field: message`` pairs."""
    return "; ".join(f"{'.'.join(str(x) for x in err['loc']) or 'task'}: {err['msg'].removeprefix('Value error, ')}"
                     for err in e.errors())


def _home() -> Path:
    from practicum.models import practicum_home

    return practicum_home()

