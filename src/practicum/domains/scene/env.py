"""The scene domain's prompt, task source, single-turn environment and domain.

The prompt (:func:`prompt_text`) gives the room, the library (sizes in metres), the materials,
the request, the conventions the checks use and the answer format: the scene as JSON in a
```json block. One reply is one answer (:class:`SceneEnv`); it is scored by
:func:`practicum.domains.scene.verifier.check`. With ``render_dir`` set, each episode's scene is
also drawn to a PNG there and its path recorded in the episode's info (``render``).
"""

from __future__ import annotations

import asyncio
import hashlib
import random
from pathlib import Path
from typing import Any

from practicum.domains.scene.generators import TIERS, generate
from practicum.domains.scene.schema import SceneTask, Tier
from practicum.domains.scene.verifier import check, describe
from practicum.envs.base import Observation, SingleTurnEnv
from practicum.records import Message, Score, Task

__all__ = ["DEFAULT_SYSTEM_PROMPT", "EVAL_SEED", "EVAL_SIZE", "TIERS", "SceneDomain", "SceneEnv", "SceneSource",
           "prompt_text", "to_task"]

DEFAULT_SYSTEM_PROMPT = "You lay out 3D scenes. Answer with the scene graph as JSON in a ```json block."
EVAL_SIZE, EVAL_SEED = 40, 4242  # the held-out set when neither the options nor the section set one

CONVENTIONS = """Conventions: metres and degrees, z is up. The room spans x from 0 (left wall) to {w:g} (right wall), \
y from 0 (front wall) to {d:g} (back wall), z from 0 (floor) to {h:g}. Directions are seen from the front wall \
looking at the back wall: left = smaller x, in front of = smaller y. An object's position is the centre of the \
bottom face of its box; rotation is its yaw, counter-clockwise seen from above. At rotation 0 an object's front \
faces the front wall (-y); at 90 it faces +x, at 180 the back wall, at 270 -x. Size at rotation 0 is width (x) \
x depth (y) x height (z); rotation 90 or 270 swaps width and depth on the floor. With a parent, position and \
rotation are relative to the parent's bottom-face centre and rotation (a cup on a 0.75 m table has z = 0.75 \
relative to the table); the parent's scale does not apply to them.
Every object must rest on the floor or on the top of another object (its centre over that top), stay inside \
the room and not overlap another object. "left of" means wholly left: its right edge at or left of the other's \
left edge (likewise right of, in front of, behind; {m:g} m slack). "within"/"between" distances are between \
centres, horizontally. "faces" means its front points at the other's centre within {f:g} degrees. "against \
a wall" means within {m:g} m of it. scale (default 1) may be {smin:g} to {smax:g} per axis."""

ANSWER_FORMAT = """Answer with the scene as JSON in a ```json block, exactly these fields:
```json
{"objects": [
  {"id": "table_1", "asset": "table", "position": [2.0, 1.5, 0], "rotation": 90},
  {"id": "cup_1", "asset": "cup", "parent": "table_1", "position": [0.2, 0, 0.75], "material": "ceramic"}
]}
```
Fields: id (unique), asset (a library name), position [x, y, z]; optional parent (an id), rotation \
(default 0), scale (a number or [sx, sy, sz], default 1), material (one of the materials). No other fields."""


def prompt_text(t: SceneTask) -> str:
    """The user message of a task: room, library, materials, request, conventions, answer format."""
    room, tol = t.room, t.tolerances
    lib = "\n".join(f"- {a.name}: {a.size[0]:g} x {a.size[1]:g} x {a.size[2]:g}" for a in t.assets)
    request = t.request if t.request is not None else "\n".join(f"- {describe(c)}" for c in t.constraints)
    return (f"Lay out a room {room.width:g} m wide (x), {room.depth:g} m deep (y) and {room.height:g} m high (z).\n\n"
            f"Asset library (width x depth x height, metres):\n{lib}\n\nMaterials: {', '.join(t.materials)}\n\n"
            f"Request:\n{request}\n\n"
            + CONVENTIONS.format(w=room.width, d=room.depth, h=room.height, m=tol.margin, f=tol.facing_deg,
                                 smin=tol.scale_min, smax=tol.scale_max)
            + "\n\n" + ANSWER_FORMAT)


def to_task(t: SceneTask, domain: str, system: list[Message], task_id: str | None = None) -> Task:
    """The :class:`~practicum.records.Task` of a scene task: ``target`` is the scene task itself,
    ``metadata["reference"]`` its reference scene in a ```json block (when it has one)."""
    meta: dict[str, Any] = {"tier": t.tier}
    if t.reference is not None:
        meta["reference"] = "```json\n" + t.reference.model_dump_json(exclude_defaults=True) + "\n```"
    return Task(id=task_id or t.id or "scene", domain=domain,
                prompt=[*system, Message(role="user", content=prompt_text(t))],
                target=t.model_dump(mode="json"), metadata=meta)


class SceneSource:
    """Generated tasks: training tasks a pure function of ``(seed, index)``, held-out ones of
    ``(eval_seed, i)``; a training draw that repeats a held-out request is drawn again."""

    def __init__(self, domain: str, tiers: list[Tier], seed: int, eval_size: int, eval_seed: int,
                 system: list[Message]) -> None:
        self.domain, self.tiers, self.seed, self.system = domain, tiers, seed, system
        self.eval_size, self.eval_seed = eval_size, eval_seed
        self._held: set[str] | None = None

    def _draw(self, split: str, seed: int, index: int) -> Task:
        tier = self.tiers[index % len(self.tiers)] if split == "eval" else random.Random(f"{seed}/{index}").choice(self.tiers)
        t = generate(tier, f"{split}/{seed}/{index}")
        return to_task(t, self.domain, self.system, f"scene/{tier}/{split}-{seed}-{index}")

    def eval_tasks(self) -> list[Task]:
        return [self._draw("eval", self.eval_seed, i) for i in range(self.eval_size)]

    def train_task(self, index: int) -> Task:
        if self._held is None:
            self._held = {_fingerprint(t) for t in self.eval_tasks()}
        task, bump = self._draw("train", self.seed, index), 0
        while _fingerprint(task) in self._held:
            bump += 1
            task = self._draw("train", self.seed + 1_000_003 * bump, index)
        return task


def _fingerprint(task: Task) -> str:
    return hashlib.sha256(task.prompt[-1].content.encode()).hexdigest()


class SceneEnv(SingleTurnEnv):
    """One single-turn episode: show the request, score the one reply, and with ``render_dir``
    draw it (off the event loop) and record the PNG's path as ``render`` in the episode's info."""

    def __init__(self, domain: str, render_dir: Path | None = None) -> None:
        super().__init__(domain, _score)
        self.render_dir = render_dir

    async def step(self, reply: str) -> Observation:
        obs = await super().step(reply)
        assert self.task is not None and obs.score is not None
        if self.render_dir is not None and obs.score.components.get("valid"):
            from practicum.domains.scene.render import render_reply

            spec = SceneTask.model_validate(self.task.target)
            path = self.render_dir / self.task.id.replace("/", "_") / f"{hashlib.sha256(reply.encode()).hexdigest()[:16]}.png"
            obs.info["render"] = str(await asyncio.to_thread(render_reply, spec, reply, path))
        return obs


def _score(task: Task, reply: str) -> tuple[Score, dict[str, Any]]:
    verdict = check(SceneTask.model_validate(task.target), reply)
    return verdict.score, {"flags": verdict.flags}


class SceneDomain:
    def __init__(self, name: str, source: SceneSource, render_dir: Path | None = None) -> None:
        self.name, self.source, self.render_dir = name, source, render_dir

    def make_env(self) -> SceneEnv:
        return SceneEnv(self.name, self.render_dir)

    async def close(self) -> None:
        return None

