"""The ``geometry`` domain: model a 3D part with a small CAD API; the verifier measures it.

Config (a domain section with ``env: geometry``; docs/geometry.md has the whole story)::

    - name: geometry
      env: geometry
      options: {tiers: [easy, medium], render: true}

``source`` (default ``generated``): ``generated``, tasks drawn from seeded generators in three
tiers (:mod:`.tasks`: 18 families, from a cube with a hole to enclosures and ribbed brackets),
with a held-out split that never occurs in training; ``tasks``/``jsonl``, task files (``path``).

The model replies with a Python program written against :mod:`.cad` (primitives, booleans,
transforms, extrude/revolve, ``export``). :mod:`.verifier` runs it in a sandbox, reads the
``part.stl`` it leaves there, and :mod:`.measure` checks and measures it on the host: a valid
solid (watertight, manifold, oriented, positive volume, no degenerate faces, no
self-intersections) scores the fraction of the task's constraints it meets (bounding box,
volume, through-holes, pieces, mirror symmetry, wall thickness). Components: ``legal``,
``constraints``, ``all_met`` (and ``check:<name>``, ``legal:<check>``). Each answer's part is
rendered to a PNG (:mod:`practicum.render3d`) whose path the episode keeps in its info.

Task file for ``practicum verify geometry --task TASK --answer REPLY``: one JSON object (the
format: :mod:`.tasks`); the answer file holds the program, or a reply with a ```python block.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import Field, model_validator

from practicum.domains.plugin import (
    BuildContext,
    Options,
    Verdict,
    held_out,
    preamble,
    resolve_path,
    section_prompt,
    task_target,
)
from practicum.records import Task

__all__ = ["GeometryOptions", "GeometryPlugin", "plugin"]


class GeometrySourceOptions(Options):
    """A geometry section's ``source:``."""

    kind: Literal["generated", "tasks", "jsonl"] = Field(default="generated", description="generated: the seeded task generators; tasks/jsonl: task files or a folder of them (path).")
    path: str | None = Field(default=None, description="tasks/jsonl: a .json or .jsonl task file, or a folder of them (relative paths resolve against the config file).")
    eval_fraction: float = Field(default=0.2, ge=0, lt=1, description="tasks/jsonl: leading fraction of the tasks held out for evaluation.")

    @model_validator(mode="after")
    def _needs_path(self) -> GeometrySourceOptions:
        if self.kind != "generated" and not self.path:
            raise ValueError(f"{self.kind} sources need 'path'")
        return self


class GeometryOptions(Options):
    """Settings of a ``geometry`` domain: ``source:`` and ``options:`` of its section."""

    source: GeometrySourceOptions = Field(default_factory=GeometrySourceOptions,
                                          description="Where tasks come from (default: generated).")
    tiers: list[Literal["easy", "medium", "hard"]] = Field(["easy", "medium", "hard"], min_length=1,
                                                           description="generated: difficulty tiers to draw from.")
    sandbox: str | None = Field(None, description="Sandbox backend the programs run in (default: the run's).")
    timeout_s: float = Field(20.0, gt=0, le=120, description="Most seconds one program may run.")
    memory_mb: int = Field(1024, ge=256, description="Memory limit of one program.")
    concurrency: int = Field(2, ge=1, description="Sandbox sessions kept ready for programs.")
    render: bool = Field(True, description="Render each answer's part to a PNG kept with the episode (info.render).")
    render_dir: str | None = Field(None, description="Folder of the renders (relative to the config file); default: the run folder's renders/<domain name> (PRACTICUM_HOME/data/geometry/renders/<domain name> outside a run).")
    eval_size: int | None = Field(None, ge=0, description="Held-out tasks; default: the section's eval_size if set, else 20.")
    eval_seed: int | None = Field(None, description="Seed of the held-out tasks; default: the section's eval_seed if set, else 4321.")


def _sessions(ctx: BuildContext, backend: str | None, limits: Any, size: int) -> Any:
    if ctx.sessions is None:
        from practicum.domains import default_context

        ctx = default_context(ctx.seed, ctx.base_dir, ctx.sandbox)
    assert ctx.sessions is not None
    return ctx.sessions(limits, size, backend=backend)


class GeometryPlugin:
    name = "geometry"
    about = "3D parts: a program against a small CAD API, run in a sandbox; its mesh is checked and measured (18 task families)."
    options_model = GeometryOptions
    components = ("legal", "constraints", "all_met")
    tools = ()

    def build(self, section: Any, options: GeometryOptions, ctx: BuildContext) -> Any:
        import dataclasses

        from practicum.domains.geometry.env import (
            EVAL_SEED,
            EVAL_SIZE,
            SYSTEM_PROMPT,
            FileSource,
            GeneratedSource,
            GeometryDomain,
            Renders,
        )
        from practicum.domains.geometry.tasks import load_tasks
        from practicum.domains.geometry.verifier import LIMITS, GeometryVerifier

        system, examples = section_prompt(section, SYSTEM_PROMPT)
        messages = preamble(system, examples)
        n_eval, eval_seed = held_out(section, options.eval_size, EVAL_SIZE, options.eval_seed, EVAL_SEED)
        src = options.source
        source: Any
        if src.kind == "generated":
            source = GeneratedSource(section.name, messages, ctx.seed, tuple(options.tiers), n_eval,
                                     EVAL_SEED if eval_seed is None else eval_seed)
        else:
            tasks = load_tasks(resolve_path(src.path or "", ctx.base_dir))
            source = FileSource(section.name, tasks, messages, ctx.seed, src.eval_fraction, n_eval)
        limits = dataclasses.replace(LIMITS, timeout_s=options.timeout_s, cpu_s=options.timeout_s,
                                     memory_mb=options.memory_mb)
        sessions = _sessions(ctx, options.sandbox, limits, options.concurrency)
        folder = None
        if options.render:
            folder = (resolve_path(options.render_dir, ctx.base_dir) if options.render_dir
                      else ctx.run_dir / "renders" / section.name if ctx.run_dir is not None
                      else ctx.data_dir(self.name) / "renders" / section.name)
        return GeometryDomain(section.name, source, GeometryVerifier(sessions, limits), Renders(folder), sessions)

    def load_task(self, path: Path) -> Task:
        from practicum.domains.geometry.env import SYSTEM_PROMPT, to_task
        from practicum.domains.geometry.tasks import load_task_file

        return to_task(load_task_file(path), self.name, preamble(SYSTEM_PROMPT, []))

    async def verify(self, task: Task, answer: str, ctx: BuildContext) -> Verdict:
        from practicum.domains.geometry.tasks import GeometryTask
        from practicum.domains.geometry.verifier import LIMITS, GeometryVerifier

        spec = task_target(task, GeometryTask, "a geometry task")
        sessions = _sessions(ctx, None, LIMITS, 1)
        try:
            verdict = await GeometryVerifier(sessions).verify(spec, answer)
        finally:
            await sessions.close()
        return Verdict(verdict.score, verdict.flags)


plugin = GeometryPlugin()
