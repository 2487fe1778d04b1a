"""The geometry domain's task source, its single-turn environment, and the renders of answers.

The model sees the system prompt (how to answer, and the ``cad`` API: the docstring of
:mod:`practicum.domains.geometry.cad`) and a task's prompt with the list of what is checked;
it replies with one program. :class:`GeometryVerifier` runs it in a sandbox and measures the
part it exports.

Episode info (``Observation.info``, kept in ``Episode.info``): ``flags`` (the program's hack
patterns, :func:`~practicum.domains.geometry.verifier.program_flags`), ``geometry`` (the outcome,
each constraint's result and what was measured: :meth:`GeometryVerdict.info`) and ``render``:
the path of a PNG of the exported part (:func:`practicum.render3d.render_png`), written under
the domain's render folder when renders are on and a mesh was read.
"""

from __future__ import annotations

import ast
import asyncio
import hashlib
from pathlib import Path
from typing import Any

from practicum.domains.geometry.tasks import TIERS, GeometryTask, Tier, draw, eval_set, user_message
from practicum.domains.geometry.verifier import CAD_SOURCE, GeometryVerdict, GeometryVerifier
from practicum.domains.plugin import task_target
from practicum.envs.base import Observation, cycle_index
from practicum.errors import TaskError
from practicum.records import Message, Task
from practicum.tools import Tool

EVAL_SIZE, EVAL_SEED = 20, 4321  # the held-out set when neither the options nor the section set one


def cad_doc() -> str:
    """The ``cad`` module's docstring, read from its source (manifold3d is not imported)."""
    return ast.get_docstring(ast.parse(CAD_SOURCE.read_text())) or ""


SYSTEM_PROMPT = (
    "You are a mechanical CAD engineer. Build the part the user describes with a short Python program that "
    "uses the cad module below, and end it with export(part). Reply with the whole program in one ```python "
    "code block. Units are millimetres; Z is up.\n\n" + cad_doc()
)


def to_task(t: GeometryTask, domain: str, system: list[Message]) -> Task:
    meta: dict[str, Any] = {"tier": t.tier, "family": t.family}
    if t.reference is not None:
        meta["reference"] = f"```python\n{t.reference}```"
    return Task(id=t.id or "geometry/task", domain=domain, prompt=[*system, Message(role="user", content=user_message(t))],
                target=t.model_dump(exclude={"reference"}), metadata=meta)


class GeneratedSource:
    """Generated tasks: training task ``index`` is a pure function of (seed, index), and never
    one of the held-out split (:func:`~practicum.domains.geometry.tasks.held_out`)."""

    def __init__(self, domain: str, system: list[Message], seed: int, tiers: tuple[Tier, ...] = TIERS,
                 eval_size: int = EVAL_SIZE, eval_seed: int = EVAL_SEED) -> None:
        self.domain, self.system, self.seed, self.tiers = domain, system, seed, tiers
        self._eval = [to_task(t, domain, system) for t in eval_set(eval_seed, eval_size, tiers)]

    def train_task(self, index: int) -> Task:
        return to_task(draw(self.seed, index, self.tiers), self.domain, self.system)

    def eval_tasks(self) -> list[Task]:
        return list(self._eval)


class FileSource:
    """Tasks from files: the leading ``eval_fraction`` is held out, the rest shuffled per epoch."""

    def __init__(self, domain: str, tasks: list[GeometryTask], system: list[Message], seed: int,
                 eval_fraction: float, eval_size: int | None) -> None:
        if not tasks:
            raise TaskError(f"domain {domain!r}: no geometry tasks")
        self.domain, self.seed = domain, seed
        n_eval = int(len(tasks) * eval_fraction)
        self._eval = [to_task(t, domain, system) for t in tasks[:n_eval]][:eval_size]
        self._train = [to_task(t, domain, system) for t in tasks[n_eval:]] or list(self._eval)

    def train_task(self, index: int) -> Task:
        return self._train[cycle_index(index, len(self._train), self.seed)]

    def eval_tasks(self) -> list[Task]:
        return list(self._eval)


class Renders:
    """Where the PNGs of answers go: ``<folder>/<task>-<hash of the program>.png``."""

    def __init__(self, folder: Path | None, size: tuple[int, int] = (640, 480)) -> None:
        self.folder, self.size = folder, size

    async def render(self, task: Task, reply: str, verdict: GeometryVerdict) -> str | None:
        if self.folder is None or verdict.mesh is None:
            return None
        from practicum.render3d import render_png

        digest = hashlib.sha256(f"{task.id}\n{reply}".encode()).hexdigest()[:16]
        name = task.id.replace("/", "_")[-80:]
        path = self.folder / f"{name}-{digest}.png"
        title = f"score {verdict.score.value:.2f}  {task.id}"
        await asyncio.to_thread(render_png, [verdict.mesh], path, None, self.size, title)
        return str(path)


class GeometryEnv:
    """One single-turn episode: the reply's program is run, its part measured and rendered."""

    def __init__(self, domain: str, verifier: GeometryVerifier, renders: Renders) -> None:
        self.domain, self.verifier, self.renders = domain, verifier, renders
        self.task: Task | None = None
        self.spec: GeometryTask | None = None

    async def reset(self, task: Task) -> Observation:
        self.task = task
        self.spec = task_target(task, GeometryTask, "a geometry task")
        return Observation(messages=list(task.prompt))

    def tools(self) -> list[Tool]:
        return []

    async def step(self, reply: str) -> Observation:
        assert self.task is not None and self.spec is not None, "step() before reset()"
        verdict = await self.verifier.verify(self.spec, reply)
        info: dict[str, Any] = {"flags": verdict.flags, "geometry": verdict.info()}
        render = await self.renders.render(self.task, reply, verdict)
        if render is not None:
            info["render"] = render
        return Observation(messages=[], done=True, score=verdict.score, info=info)

    async def finish(self, reason: str) -> Observation:
        return Observation(messages=[], done=True)  # no reply to verify: scored 0

    async def close(self) -> None:
        pass


class GeometryDomain:
    def __init__(self, name: str, source: GeneratedSource | FileSource, verifier: GeometryVerifier,
                 renders: Renders, sessions: Any) -> None:
        self.name, self.source, self.verifier, self.renders, self.sessions = name, source, verifier, renders, sessions

    def make_env(self) -> GeometryEnv:
        return GeometryEnv(self.name, self.verifier, self.renders)

    async def close(self) -> None:
        await self.sessions.close()
