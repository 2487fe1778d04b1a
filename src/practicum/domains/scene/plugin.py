"""The ``scene`` plugin object: options, build, task files, verify."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import Field

from practicum.domains.plugin import (
    BuildContext,
    Options,
    Verdict,
    held_out,
    parse_task,
    preamble,
    read_task_json,
    resolve_path,
    section_prompt,
    task_target,
)
from practicum.domains.scene.env import DEFAULT_SYSTEM_PROMPT, EVAL_SEED, EVAL_SIZE, SceneDomain, SceneSource, to_task
from practicum.domains.scene.schema import SceneTask, Tier
from practicum.domains.scene.verifier import COMPONENTS, check
from practicum.errors import ConfigError
from practicum.records import Message, Task


class SceneOptions(Options):
    """A scene domain section's ``options:`` (docs/scene.md)."""

    tiers: list[Tier] = Field(["easy", "medium", "hard"], min_length=1,
                              description="Difficulty tiers to draw from: easy (1-2 objects), medium (relations), hard (many objects, nested parents, a tight room).")
    eval_size: int | None = Field(None, ge=0, description="Held-out tasks (tiers in turn); default: the section's eval_size if set, else 40.")
    eval_seed: int | None = Field(None, description="Seed of the held-out tasks; default: the section's eval_seed if set, else 4242.")
    render_dir: str | None = Field(None, description="When set, each episode's scene is rendered to a PNG under this folder (relative to the config file) and its path kept in the episode's info (render).")


class ScenePlugin:
    name = "scene"
    about = "3D scene layout: a JSON scene graph checked for integrity, physics (support, overlap, room) and layout constraints."
    options_model = SceneOptions
    components = COMPONENTS
    tools = ()

    def build(self, section: Any, options: SceneOptions, ctx: BuildContext) -> SceneDomain:
        n_eval, eval_seed = held_out(section, options.eval_size, EVAL_SIZE, options.eval_seed, EVAL_SEED)
        system, examples = section_prompt(section, DEFAULT_SYSTEM_PROMPT)
        source = SceneSource(section.name, list(options.tiers), ctx.seed, n_eval, EVAL_SEED if eval_seed is None else eval_seed,
                             preamble(system, examples))
        render_dir = None
        if options.render_dir is not None:
            from practicum.domains.scene.render import renderer_available

            problem = renderer_available()
            if problem:
                raise ConfigError(f"domain {section.name!r}: options.render_dir: {problem}")
            render_dir = resolve_path(options.render_dir, ctx.base_dir)
        return SceneDomain(section.name, source, render_dir)

    def load_task(self, path: Path) -> Task:
        return load_task(path)

    async def verify(self, task: Task, answer: str, ctx: BuildContext) -> Verdict:
        spec = task_target(task, SceneTask, "a scene task")
        return check(spec, answer)


def load_task(path: Path) -> Task:
    """One scene task from a JSON file (docs/scene.md); errors name the file and the field."""
    data = read_task_json(path)
    t = parse_task(data, SceneTask, str(path), "scene")
    return to_task(t, "scene", [Message(role="system", content=DEFAULT_SYSTEM_PROMPT)], t.id or f"scene/{Path(path).stem}")


plugin = ScenePlugin()
