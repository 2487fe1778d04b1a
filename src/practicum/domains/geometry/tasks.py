"""Geometry tasks: the task file format, the seeded generators, and the prompts built from them.

A task (one JSON object; a ``.jsonl`` file holds one per line)::

    {"prompt": "A 20 mm cube with a 10 mm diameter hole through its centre along the Z axis.",
     "constraints": {"bbox": {"size": [20, 20, 20]}, "volume": {"value": 6429.2},
                     "holes": 1, "symmetry": ["x", "y", "z"]}}

Fields: ``prompt`` (the part, in words; required), ``constraints`` (required, at least one),
``id``, ``tier`` (``easy``/``medium``/``hard``), ``family``, ``reference`` (a program that
scores 1). Constraints (:class:`Constraints`), each met or not:

* ``bbox``: ``{"size": [x, y, z], "tol": 0.2}``: the bounding box's extent along X, Y and Z,
  each within ``tol`` mm (position is free);
* ``volume``: ``{"value": V, "rel_tol": 0.01}``: mm^3, within ``rel_tol`` of V;
* ``holes``: the number of through-holes (the genus of the part; a blind hole is none);
* ``bodies``: how many separate pieces (default 1; an inner void counts as one more);
* ``symmetry``: axes ``"x"``, ``"y"``, ``"z"`` whose mid-plane (of the part's own bounding box)
  the part is mirror-symmetric across, each a constraint, within ``symmetry_tol`` (mismatched
  volume over volume, default 0.01);
* ``wall``: ``{"thickness": t, "tol": 0.2}``: the thinnest wall is ``t`` within ``tol`` mm.

The generators (:data:`FAMILIES`) draw a family and its dimensions from a seeded RNG and write
the prompt, the constraints (volumes computed exactly from the dimensions) and a reference
program in the ``cad`` API. Round shapes in the reference are 64-sided polygons, whose volume
is 0.16 % below the circle's: well inside the default 1 % tolerance.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from practicum.domains.plugin import parse_task
from practicum.envs.base import read_jsonl
from practicum.errors import TaskError

Tier = Literal["easy", "medium", "hard"]
Axis = Literal["x", "y", "z"]
TIERS: tuple[Tier, ...] = ("easy", "medium", "hard")
PI = math.pi


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class BBox(_Strict):
    size: tuple[float, float, float] = Field(..., description="extent along X, Y, Z in mm")
    tol: float = Field(default=0.2, gt=0, description="allowed error per axis, mm")

    @model_validator(mode="after")
    def _positive(self) -> BBox:
        if min(self.size) <= 0:
            raise ValueError(f"every size must be positive, got {list(self.size)}")
        return self


class Volume(_Strict):
    value: float = Field(..., gt=0, description="mm^3")
    rel_tol: float = Field(default=0.01, gt=0, lt=1, description="allowed relative error")


class Wall(_Strict):
    thickness: float = Field(..., gt=0, description="the thinnest wall, mm")
    tol: float = Field(default=0.2, gt=0, description="allowed error, mm")


class Constraints(_Strict):
    bbox: BBox | None = None
    volume: Volume | None = None
    holes: int | None = Field(default=None, ge=0, description="through-holes (genus)")
    bodies: int | None = Field(default=1, ge=1, description="separate pieces; null to leave unchecked")
    symmetry: list[Axis] = Field(default_factory=list)
    symmetry_tol: float = Field(default=0.01, gt=0, lt=1)
    wall: Wall | None = None

    @model_validator(mode="after")
    def _some(self) -> Constraints:
        if not (self.bbox or self.volume or self.holes is not None or self.symmetry or self.wall):
            raise ValueError("give at least one of bbox, volume, holes, symmetry, wall")
        if len(set(self.symmetry)) != len(self.symmetry):
            raise ValueError(f"symmetry lists an axis twice: {self.symmetry}")
        return self

    def names(self) -> list[str]:
        """The constraints checked, in order (each scored 0 or 1)."""
        out = ["bbox"] if self.bbox else []
        out += ["volume"] if self.volume else []
        out += ["holes"] if self.holes is not None else []
        out += ["bodies"] if self.bodies is not None else []
        out += [f"symmetry_{a}" for a in self.symmetry]
        out += ["wall"] if self.wall else []
        return out


class GeometryTask(_Strict):
    """One geometry task as written in a task file (the module docstring lists the fields)."""

    id: str | None = None
    tier: Tier = "medium"
    family: str | None = None
    prompt: str = Field(..., min_length=1)
    constraints: Constraints
    reference: str | None = None


# --- files --------------------------------------------------------------------------------------

def task_from(data: Any, where: str, default_id: str) -> GeometryTask:
    task = parse_task(data, GeometryTask, where, "geometry")
    return task if task.id is not None else task.model_copy(update={"id": default_id})


def load_task_file(path: str | Path) -> GeometryTask:
    """One task from a ``.json`` file; errors name the file and the field."""
    from practicum.domains.plugin import read_task_json

    path = Path(path)
    return task_from(read_task_json(path), str(path), f"geometry/{path.stem}")


def load_tasks(path: str | Path) -> list[GeometryTask]:
    """Tasks from a ``.json`` file, a ``.jsonl`` file, or a folder of these (sorted by name)."""
    path = Path(path)
    if path.is_dir():
        files = sorted(p for p in path.iterdir() if p.suffix in (".json", ".jsonl"))
        if not files:
            raise TaskError(f"{path}: no .json or .jsonl task files in this folder")
        return [t for f in files for t in load_tasks(f)]
    if not path.exists():
        raise TaskError(f"task file {path} does not exist")
    if path.suffix == ".jsonl":
        return [task_from(data, f"{path}:{line}", f"geometry/{path.stem}/{line}") for line, data in read_jsonl(path)]
    return [load_task_file(path)]


# --- prompts ------------------------------------------------------------------------------------

def checklist(c: Constraints) -> str:
    lines = []
    if c.bbox:
        x, y, z = (f"{v:g}" for v in c.bbox.size)
        lines.append(f"overall size {x} x {y} x {z} mm along X, Y, Z (each within {c.bbox.tol:g} mm)")
    if c.volume:
        lines.append(f"volume {c.volume.value:.1f} mm^3 (within {c.volume.rel_tol:.0%})")
    if c.holes is not None:
        lines.append(f"{c.holes} through-hole{'s' if c.holes != 1 else ''}" + (" (no hole goes through)" if c.holes == 0 else ""))
    if c.bodies is not None:
        lines.append("one single piece" if c.bodies == 1 else f"{c.bodies} separate pieces")
    if c.symmetry:
        lines.append("mirror-symmetric across the mid-plane normal to " + ", ".join(a.upper() for a in c.symmetry))
    if c.wall:
        lines.append(f"thinnest wall {c.wall.thickness:g} mm (within {c.wall.tol:g} mm)")
    lines.insert(0, "a closed, valid solid (watertight, no self-intersections)")
    return "\n".join(f"- {line}" for line in lines)


def user_message(task: GeometryTask) -> str:
    return f"{task.prompt.strip()}\n\nYour part is checked for:\n{checklist(task.constraints)}"


# --- generators ---------------------------------------------------------------------------------

Made = tuple[str, dict[str, Any], str, Constraints, str]  # key, params, prompt, constraints, reference


def _g(x: float) -> str:
    return f"{x:g}"


def _program(*lines: str, math: bool = False) -> str:
    head = ["from math import cos, sin, pi", "from cad import *"] if math else ["from cad import *"]
    return "\n".join([*head, "", *lines, "export(part)", ""])


def _key(params: dict[str, Any]) -> str:
    return "-".join(f"{k}{_g(v) if isinstance(v, float | int) else v}" for k, v in params.items())


def cube_hole(rng: random.Random) -> Made:
    a = rng.randrange(16, 42, 2)
    d = round(a * rng.choice([0.3, 0.4, 0.5]))
    axis = rng.choice("xyz")
    turn = {"x": "rotate(hole, y=90)", "y": "rotate(hole, x=90)", "z": "hole"}[axis]
    c = Constraints(bbox=BBox(size=(a, a, a)), volume=Volume(value=a**3 - PI * d * d / 4 * a), holes=1,
                    symmetry=["x", "y", "z"])
    prompt = (f"Model a {a} mm cube, edges along X, Y and Z, with a {d} mm diameter hole straight through "
              f"its centre along the {axis.upper()} axis.")
    ref = _program(f"hole = cylinder({a + 2}, {_g(d / 2)}, center=True)", f"part = box({a}, {a}, {a}, center=True) - {turn}")
    return "cube_hole", {"a": a, "d": d, "axis": axis}, prompt, c, ref


def plate(rng: random.Random) -> Made:
    L = rng.randrange(40, 130, 10)
    W = rng.randrange(20, L, 10)
    T = rng.choice([3, 4, 5, 6, 8])
    c = Constraints(bbox=BBox(size=(L, W, T)), volume=Volume(value=L * W * T), holes=0, symmetry=["x", "y", "z"])
    prompt = f"Model a flat rectangular plate {L} mm long (X), {W} mm wide (Y) and {T} mm thick (Z)."
    return "plate", {"L": L, "W": W, "T": T}, prompt, c, _program(f"part = box({L}, {W}, {T})")


def tube(rng: random.Random) -> Made:
    od = rng.randrange(16, 64, 4)
    t = rng.choice([1.5, 2.0, 3.0, 4.0])
    L = rng.randrange(20, 110, 10)
    i_d = od - 2 * t
    c = Constraints(bbox=BBox(size=(od, od, L)), volume=Volume(value=PI / 4 * (od * od - i_d * i_d) * L), holes=1,
                    symmetry=["x", "y", "z"], wall=Wall(thickness=t))
    prompt = (f"Model a round tube {L} mm long along the Z axis, outer diameter {od} mm, inner diameter "
              f"{_g(i_d)} mm, open at both ends.")
    ref = _program(f"part = cylinder({L}, {_g(od / 2)}) - translate(cylinder({L + 2}, {_g(i_d / 2)}), 0, 0, -1)")
    return "tube", {"od": od, "t": t, "L": L}, prompt, c, ref


def rod(rng: random.Random) -> Made:
    d = rng.randrange(10, 55, 5)
    L = rng.randrange(10, 90, 10)
    axis = rng.choice("xyz")
    size = {"x": (L, d, d), "y": (d, L, d), "z": (d, d, L)}[axis]
    turn = {"x": "rotate(rod, y=90)", "y": "rotate(rod, x=90)", "z": "rod"}[axis]
    c = Constraints(bbox=BBox(size=size), volume=Volume(value=PI / 4 * d * d * L), holes=0, symmetry=["x", "y", "z"])
    prompt = f"Model a solid round rod {d} mm in diameter and {L} mm long, its axis along {axis.upper()}."
    return "rod", {"d": d, "L": L, "axis": axis}, prompt, c, _program(f"rod = cylinder({L}, {_g(d / 2)})", f"part = {turn}")


def blind_hole(rng: random.Random) -> Made:
    a = rng.randrange(20, 44, 4)
    d = round(a * rng.choice([0.3, 0.4]))
    depth = round(a * rng.choice([0.4, 0.5, 0.6]))
    c = Constraints(bbox=BBox(size=(a, a, a)), volume=Volume(value=a**3 - PI * d * d / 4 * depth), holes=0,
                    symmetry=["x", "y"])
    prompt = (f"Model a {a} mm cube, edges along X, Y and Z, with a {d} mm diameter hole drilled {depth} mm deep "
              f"into the centre of its top face (the +Z face). The hole does not go through.")
    ref = _program(f"part = box({a}, {a}, {a}) - translate(cylinder({depth + 1}, {_g(d / 2)}), {_g(a / 2)}, {_g(a / 2)}, {a - depth})")
    return "blind_hole", {"a": a, "d": d, "depth": depth}, prompt, c, ref


def plate_hole(rng: random.Random) -> Made:
    L = rng.randrange(30, 100, 10)
    W = rng.randrange(30, L + 1, 10)
    T = rng.choice([3, 4, 5, 6])
    d = rng.choice([d for d in (5, 6, 8, 10, 12, 16) if d <= W - 10])
    c = Constraints(bbox=BBox(size=(L, W, T)), volume=Volume(value=L * W * T - PI * d * d / 4 * T), holes=1,
                    symmetry=["x", "y", "z"])
    prompt = (f"Model a flat plate {L} mm long (X), {W} mm wide (Y) and {T} mm thick (Z) with one {d} mm "
              "diameter hole through its centre, perpendicular to the plate.")
    ref = _program(f"part = box({L}, {W}, {T}, center=True) - cylinder({T + 2}, {_g(d / 2)}, center=True)")
    return "plate_hole", {"L": L, "W": W, "T": T, "d": d}, prompt, c, ref


def l_bracket(rng: random.Random) -> Made:
    L = rng.randrange(30, 65, 5)
    W = rng.randrange(20, 45, 5)
    H = rng.randrange(30, 65, 5)
    T = rng.choice([3, 4, 5, 6])
    d = rng.choice([d for d in (4, 5, 6, 8) if d <= W - 10 and d <= min(L, H) - T - 10])
    hx, hz = (T + L) / 2, (T + H) / 2
    c = Constraints(bbox=BBox(size=(L, W, H)), volume=Volume(value=L * W * T + T * W * (H - T) - 2 * PI * d * d / 4 * T),
                    holes=2, symmetry=["y"])
    prompt = (f"Model an L-shaped bracket bent from {T} mm plate. Its base lies flat on z = 0: {L} mm long "
              f"(x = 0 to {L}) and {W} mm wide (Y). Its upright leg stands at x = 0 to {T}, the same width, "
              f"{H} mm tall overall (Z). A {d} mm hole goes down through the base, centred at x = {_g(hx)}, "
              f"y = {_g(W / 2)}; another {d} mm hole goes through the upright along X, centred at "
              f"y = {_g(W / 2)}, z = {_g(hz)}.")
    ref = _program(f"body = box({L}, {W}, {T}) + box({T}, {W}, {H})",
                   f"base_hole = translate(cylinder({T + 2}, {_g(d / 2)}), {_g(hx)}, {_g(W / 2)}, -1)",
                   f"leg_hole = translate(rotate(cylinder({T + 2}, {_g(d / 2)}), y=90), -1, {_g(W / 2)}, {_g(hz)})",
                   "part = body - base_hole - leg_hole")
    return "l_bracket", {"L": L, "W": W, "H": H, "T": T, "d": d}, prompt, c, ref


def stepped_shaft(rng: random.Random) -> Made:
    d1 = rng.randrange(20, 42, 2)
    d2 = d1 - rng.choice([4, 6, 8])
    d3 = d2 - rng.choice([4, 6])
    l1, l2, l3 = (rng.randrange(10, 45, 5) for _ in range(3))
    bore = rng.choice([0, 0, 4, 5, 6])
    bore = bore if bore and bore <= d3 - 6 else 0
    total = l1 + l2 + l3
    vol = PI / 4 * (d1 * d1 * l1 + d2 * d2 * l2 + d3 * d3 * l3 - bore * bore * total)
    c = Constraints(bbox=BBox(size=(d1, d1, total)), volume=Volume(value=vol), holes=1 if bore else 0,
                    symmetry=["x", "y"])
    prompt = (f"Model a stepped round shaft along the Z axis, from z = 0 up: {l1} mm of diameter {d1} mm, then "
              f"{l2} mm of diameter {d2} mm, then {l3} mm of diameter {d3} mm"
              + (f", with a {bore} mm bore straight through along its axis." if bore else ". It is solid."))
    r0 = _g(bore / 2)
    pts = [(r0, 0), (_g(d1 / 2), 0), (_g(d1 / 2), l1), (_g(d2 / 2), l1), (_g(d2 / 2), l1 + l2), (_g(d3 / 2), l1 + l2),
           (_g(d3 / 2), total), (r0, total)]
    ref = _program("profile = polygon([" + ", ".join(f"({r}, {z})" for r, z in pts) + "])", "part = revolve(profile)")
    return "stepped_shaft", {"d1": d1, "d2": d2, "d3": d3, "l1": l1, "l2": l2, "l3": l3, "b": bore}, prompt, c, ref


def _bolt_pattern(rng: random.Random, D: int, inner: float) -> tuple[int, int, int]:
    """n bolt holes of diameter db on a circle Dc between ``inner`` and D, clear of each other."""
    for _ in range(100):
        n = rng.choice([3, 4, 5, 6, 8])
        db = rng.choice([4, 5, 6, 8])
        dc = round((D + inner) / 2)
        if (dc - inner) / 2 >= db and (D - dc) / 2 >= db and dc * math.sin(PI / n) >= db + 3:
            return n, db, dc
    return 4, 4, round((D + inner) / 2)


def flange(rng: random.Random) -> Made:
    D = rng.randrange(50, 110, 10)
    T = rng.choice([5, 6, 8, 10])
    d0 = round(D * rng.choice([0.25, 0.3, 0.35]))
    n, db, dc = _bolt_pattern(rng, D, d0)
    sym: list[Axis] = ["x", "y", "z"] if n % 2 == 0 else ["y", "z"]
    c = Constraints(bbox=BBox(size=(D, D, T)), volume=Volume(value=PI / 4 * (D * D - d0 * d0 - n * db * db) * T),
                    holes=n + 1, symmetry=sym)
    prompt = (f"Model a round flange: a disc {D} mm in diameter and {T} mm thick (Z), with a {d0} mm centre bore and "
              f"{n} bolt holes of {db} mm diameter, evenly spaced on a {dc} mm bolt circle, the first on the +X axis. "
              "All holes go through.")
    ref = _program(f"part = cylinder({T}, {_g(D / 2)}) - translate(cylinder({T + 2}, {_g(d0 / 2)}), 0, 0, -1)",
                   f"for k in range({n}):",
                   f"    a = 2 * pi * k / {n}",
                   f"    part = part - translate(cylinder({T + 2}, {_g(db / 2)}), {_g(dc / 2)} * cos(a), "
                   f"{_g(dc / 2)} * sin(a), -1)", math=True)
    return "flange", {"D": D, "T": T, "d0": d0, "n": n, "db": db}, prompt, c, ref


def hub_flange(rng: random.Random) -> Made:
    D = rng.randrange(60, 110, 10)
    T = rng.choice([6, 8, 10])
    d0 = rng.choice([10, 12, 16, 20])
    dh = d0 + 2 * rng.choice([5, 6, 8])
    hh = rng.choice([8, 10, 12, 15])
    n, db, dc = _bolt_pattern(rng, D, dh)
    sym: list[Axis] = ["x", "y"] if n % 2 == 0 else ["y"]
    vol = PI / 4 * (D * D * T + dh * dh * hh - d0 * d0 * (T + hh) - n * db * db * T)
    c = Constraints(bbox=BBox(size=(D, D, T + hh)), volume=Volume(value=vol), holes=n + 1, symmetry=sym)
    prompt = (f"Model a hub flange: a disc {D} mm in diameter and {T} mm thick lying on z = 0, with a round hub "
              f"{dh} mm in diameter rising {hh} mm above the disc on the same axis (Z). A {d0} mm bore goes through "
              f"disc and hub along the axis, and {n} bolt holes of {db} mm diameter go through the disc, evenly "
              f"spaced on a {dc} mm bolt circle, the first on the +X axis.")
    r0, r1, rh = _g(d0 / 2), _g(D / 2), _g(dh / 2)
    ref = _program(f"profile = polygon([({r0}, 0), ({r1}, 0), ({r1}, {T}), ({rh}, {T}), ({rh}, {T + hh}), ({r0}, {T + hh})])",
                   "part = revolve(profile)",
                   f"for k in range({n}):",
                   f"    a = 2 * pi * k / {n}",
                   f"    part = part - translate(cylinder({T + 2}, {_g(db / 2)}), {_g(dc / 2)} * cos(a), "
                   f"{_g(dc / 2)} * sin(a), -1)", math=True)
    return "hub_flange", {"D": D, "T": T, "d0": d0, "dh": dh, "hh": hh, "n": n, "db": db}, prompt, c, ref


def hole_grid(rng: random.Random) -> Made:
    m, k = rng.choice([2, 3, 4]), rng.choice([1, 2, 3])
    p = rng.choice([10, 12, 15, 20])
    L, W = m * p + rng.choice([10, 20]), k * p + rng.choice([10, 20])
    T = rng.choice([3, 4, 5])
    d = rng.choice([d for d in (3, 4, 5, 6, 8) if d <= p - 4])
    c = Constraints(bbox=BBox(size=(L, W, T)), volume=Volume(value=L * W * T - m * k * PI * d * d / 4 * T), holes=m * k,
                    symmetry=["x", "y", "z"])
    prompt = (f"Model a perforated plate {L} mm long (X), {W} mm wide (Y) and {T} mm thick (Z) with a grid of "
              f"{m} x {k} holes (X by Y) of {d} mm diameter through it, {p} mm apart in both directions, the grid "
              "centred on the plate.")
    ref = _program(f"part = box({L}, {W}, {T}, center=True)",
                   f"for i in range({m}):", f"    for j in range({k}):",
                   f"        x, y = (i - {_g((m - 1) / 2)}) * {p}, (j - {_g((k - 1) / 2)}) * {p}",
                   f"        part = part - translate(cylinder({T + 2}, {_g(d / 2)}, center=True), x, y, 0)")
    return "hole_grid", {"m": m, "k": k, "p": p, "L": L, "W": W, "T": T, "d": d}, prompt, c, ref


def slotted_plate(rng: random.Random) -> Made:
    L = rng.randrange(50, 110, 10)
    W = rng.randrange(30, 60, 10)
    T = rng.choice([3, 4, 5, 6])
    w = rng.choice([4, 5, 6, 8])
    s = rng.randrange(10, L - 20, 5)  # distance between the slot's end centres
    area = s * w + PI * w * w / 4
    c = Constraints(bbox=BBox(size=(L, W, T)), volume=Volume(value=(L * W - area) * T), holes=1,
                    symmetry=["x", "y", "z"])
    prompt = (f"Model a plate {L} mm long (X), {W} mm wide (Y) and {T} mm thick (Z) with a slot through its "
              f"centre, running along X: {w} mm wide with rounded ends, its two end-circle centres {s} mm apart.")
    ref = _program(f"slot = rect({s}, {w}, center=True) + circle({_g(w / 2)}).translate(({_g(-s / 2)}, 0)) "
                   f"+ circle({_g(w / 2)}).translate(({_g(s / 2)}, 0))",
                   f"part = box({L}, {W}, {T}, center=True) - translate(extrude(slot, {T + 2}), 0, 0, {_g(-T / 2 - 1)})")
    return "slotted_plate", {"L": L, "W": W, "T": T, "w": w, "s": s}, prompt, c, ref


def enclosure(rng: random.Random) -> Made:
    L = rng.randrange(40, 110, 10)
    W = rng.randrange(30, L + 1, 10)
    H = rng.randrange(20, 55, 5)
    t = rng.choice([1.5, 2.0, 2.5, 3.0])
    vol = L * W * H - (L - 2 * t) * (W - 2 * t) * (H - t)
    c = Constraints(bbox=BBox(size=(L, W, H)), volume=Volume(value=vol), holes=0, symmetry=["x", "y"],
                    wall=Wall(thickness=t))
    prompt = (f"Model an open-top box enclosure {L} mm long (X), {W} mm wide (Y) and {H} mm tall (Z), with walls "
              f"and floor {_g(t)} mm thick, open at the top (+Z).")
    ref = _program(f"part = box({L}, {W}, {H}) - translate(box({_g(L - 2 * t)}, {_g(W - 2 * t)}, {H}), {_g(t)}, {_g(t)}, {_g(t)})")
    return "enclosure", {"L": L, "W": W, "H": H, "t": t}, prompt, c, ref


def enclosure_port(rng: random.Random) -> Made:
    L = rng.randrange(50, 110, 10)
    W = rng.randrange(40, L + 1, 10)
    H = rng.randrange(25, 55, 5)
    t = rng.choice([2.0, 2.5, 3.0])
    d = rng.choice([d for d in (6, 8, 10, 12) if d <= H - 12])
    vol = L * W * H - (L - 2 * t) * (W - 2 * t) * (H - t) - PI * d * d / 4 * t
    c = Constraints(bbox=BBox(size=(L, W, H)), volume=Volume(value=vol), holes=1, symmetry=["y"],
                    wall=Wall(thickness=t))
    prompt = (f"Model an open-top box enclosure {L} mm long (X), {W} mm wide (Y) and {H} mm tall (Z), walls and "
              f"floor {_g(t)} mm thick, open at the top, with a round {d} mm cable hole through the end wall at "
              f"+X, centred on that wall's width and at half the box's height.")
    ref = _program(f"shell = box({L}, {W}, {H}) - translate(box({_g(L - 2 * t)}, {_g(W - 2 * t)}, {H}), {_g(t)}, {_g(t)}, {_g(t)})",
                   f"port = translate(rotate(cylinder({_g(t + 2)}, {_g(d / 2)}), y=90), {_g(L - t - 1)}, {_g(W / 2)}, {_g(H / 2)})",
                   "part = shell - port")
    return "enclosure_port", {"L": L, "W": W, "H": H, "t": t, "d": d}, prompt, c, ref


def channel(rng: random.Random) -> Made:
    L = rng.randrange(50, 110, 10)
    W = rng.randrange(20, 45, 5)
    H = rng.randrange(20, 45, 5)
    t = rng.choice([3, 4, 5])
    d = rng.choice([d for d in (4, 5, 6, 8) if d <= W - 10 and d <= H - t - 8])
    s = L / 4
    vol = L * W * t + 2 * t * W * (H - t) - PI * d * d / 4 * 4 * t
    c = Constraints(bbox=BBox(size=(L, W, H)), volume=Volume(value=vol), holes=4, symmetry=["x", "y"])
    prompt = (f"Model a U-channel bracket from {t} mm plate: a base {L} mm long (X) and {W} mm wide (Y) on z = 0, "
              f"with an upright wall at each end (x = 0 to {t} and x = {L - t} to {L}), the same width, {H} mm tall "
              f"overall. Two {d} mm holes go down through the base at x = {_g(L / 2 - s)} and x = {_g(L / 2 + s)} "
              f"(y = {_g(W / 2)}), and each end wall has one {d} mm hole through it along X at y = {_g(W / 2)}, "
              f"z = {_g((t + H) / 2)}.")
    ref = _program(f"part = box({L}, {W}, {t}) + box({t}, {W}, {H}) + translate(box({t}, {W}, {H}), {L - t}, 0, 0)",
                   f"for x in ({_g(L / 2 - s)}, {_g(L / 2 + s)}):",
                   f"    part = part - translate(cylinder({t + 2}, {_g(d / 2)}), x, {_g(W / 2)}, -1)",
                   f"part = part - translate(rotate(cylinder({L + 2}, {_g(d / 2)}), y=90), -1, {_g(W / 2)}, {_g((t + H) / 2)})")
    return "channel", {"L": L, "W": W, "H": H, "t": t, "d": d}, prompt, c, ref


def cup(rng: random.Random) -> Made:
    D = rng.randrange(30, 85, 5)
    H = rng.randrange(20, 65, 5)
    t = rng.choice([1.5, 2.0, 3.0])
    vol = PI / 4 * (D * D * H - (D - 2 * t) ** 2 * (H - t))
    c = Constraints(bbox=BBox(size=(D, D, H)), volume=Volume(value=vol), holes=0, symmetry=["x", "y"],
                    wall=Wall(thickness=t))
    prompt = (f"Model a round cup standing on z = 0: outer diameter {D} mm, {H} mm tall (Z), side wall and "
              f"bottom {_g(t)} mm thick, open at the top.")
    ri, r = _g(D / 2 - t), _g(D / 2)
    ref = _program(f"profile = polygon([(0, 0), ({r}, 0), ({r}, {H}), ({ri}, {H}), ({ri}, {_g(t)}), (0, {_g(t)})])",
                   "part = revolve(profile)")
    return "cup", {"D": D, "H": H, "t": t}, prompt, c, ref


def gusset_bracket(rng: random.Random) -> Made:
    L = rng.randrange(40, 75, 5)
    W = rng.randrange(30, 55, 5)
    H = rng.randrange(40, 75, 5)
    T = rng.choice([4, 5, 6])
    tr = rng.choice([3, 4, 5])
    a = min(L, H) - T - rng.choice([8, 10, 15])
    d = rng.choice([d for d in (4, 5, 6) if d < W / 2 - tr - 2])
    hx, hz = (T + L) / 2 + a / 4, (T + H) / 2 + a / 4
    hx, hz = min(hx, L - d - 2), min(hz, H - d - 2)
    vol = L * W * T + T * W * (H - T) + a * a / 2 * tr - 4 * PI * d * d / 4 * T
    c = Constraints(bbox=BBox(size=(L, W, H)), volume=Volume(value=vol), holes=4, symmetry=["y"])
    prompt = (f"Model an L-bracket stiffened by a rib, from {T} mm plate. The base lies on z = 0, {L} mm long "
              f"(x = 0 to {L}) and {W} mm wide (Y); the upright stands at x = 0 to {T}, same width, {H} mm tall. "
              f"A triangular rib {tr} mm thick, centred on the width, fills the inside corner: its legs run {a} mm "
              f"along the base and {a} mm up the upright from the inside faces. Two {d} mm holes go through the "
              f"base at x = {_g(hx)}, y = {_g(W / 4)} and y = {_g(3 * W / 4)}; two {d} mm holes go through the "
              f"upright along X at z = {_g(hz)}, the same two y positions.")
    ref = _program(f"body = box({L}, {W}, {T}) + box({T}, {W}, {H})",
                   f"rib = polygon([({T - 1}, {T - 1}), ({T + a}, {T - 1}), ({T + a}, {T}), ({T}, {T + a}), ({T - 1}, {T + a})])",
                   f"rib = translate(rotate(extrude(rib, {tr}), x=90), 0, {_g(W / 2 + tr / 2)}, 0)",
                   "part = body + rib",
                   f"for y in ({_g(W / 4)}, {_g(3 * W / 4)}):",
                   f"    part = part - translate(cylinder({T + 2}, {_g(d / 2)}), {_g(hx)}, y, -1)",
                   f"    part = part - translate(rotate(cylinder({T + 2}, {_g(d / 2)}), y=90), -1, y, {_g(hz)})")
    return "gusset_bracket", {"L": L, "W": W, "H": H, "T": T, "tr": tr, "a": a, "d": d}, prompt, c, ref


def counterbored_plate(rng: random.Random) -> Made:
    L = rng.randrange(50, 110, 10)
    W = rng.randrange(25, 55, 5)
    T = rng.choice([8, 10, 12])
    d = rng.choice([4, 5, 6])
    dc = d + rng.choice([4, 5, 6])
    depth = rng.choice([3, 4, 5])
    x = L / 4
    vol = L * W * T - 2 * (PI / 4 * d * d * (T - depth) + PI / 4 * dc * dc * depth)
    c = Constraints(bbox=BBox(size=(L, W, T)), volume=Volume(value=vol), holes=2, symmetry=["x", "y"])
    prompt = (f"Model a mounting plate {L} mm long (X), {W} mm wide (Y) and {T} mm thick (Z) with two "
              f"counterbored holes, centred on the width at {_g(x)} mm either side of the middle: each a {d} mm "
              f"hole through the plate with a {dc} mm counterbore {depth} mm deep from the top face (+Z).")
    ref = _program(f"part = box({L}, {W}, {T}, center=True)",
                   f"for x in ({_g(-x)}, {_g(x)}):",
                   f"    part = part - translate(cylinder({T + 2}, {_g(d / 2)}, center=True), x, 0, 0)",
                   f"    part = part - translate(cylinder({depth + 1}, {_g(dc / 2)}), x, 0, {_g(T / 2 - depth)})")
    return "counterbored_plate", {"L": L, "W": W, "T": T, "d": d, "dc": dc, "c": depth}, prompt, c, ref


FAMILIES: dict[Tier, list[Callable[[random.Random], Made]]] = {
    "easy": [cube_hole, plate, tube, rod, blind_hole, plate_hole],
    "medium": [l_bracket, stepped_shaft, flange, hub_flange, hole_grid, slotted_plate],
    "hard": [enclosure, enclosure_port, channel, cup, gusset_bracket, counterbored_plate],
}
HELD_OUT_SHARE = 8  # one task id in 8 (by hash) is held out for evaluation, never drawn for training


def generate(rng: random.Random, tiers: tuple[Tier, ...] = TIERS) -> GeometryTask:
    """One task drawn from the families of ``tiers``."""
    tier = rng.choice(tiers)
    family = rng.choice(FAMILIES[tier])
    name, params, prompt, constraints, reference = family(rng)
    return GeometryTask(id=f"geometry/{tier}/{name}/{_key(params)}", tier=tier, family=name, prompt=prompt,
                        constraints=constraints, reference=reference)


def held_out(task_id: str) -> bool:
    """Whether a generated task belongs to the held-out split (a fixed function of its id)."""
    return int(hashlib.sha256(task_id.encode()).hexdigest(), 16) % HELD_OUT_SHARE == 0


def draw(seed: int, index: int, tiers: tuple[Tier, ...] = TIERS, evaluation: bool = False) -> GeometryTask:
    """Training task ``index`` of ``seed`` (never a held-out one), or with ``evaluation`` a
    draw from the held-out split."""
    for attempt in range(10_000):
        task = generate(random.Random(f"geometry/{seed}/{index}/{attempt}"), tiers)
        if held_out(task.id or "") == evaluation:
            return task
    raise TaskError(f"no {'held-out' if evaluation else 'training'} geometry task found for tiers {tiers}")


def eval_set(seed: int, size: int, tiers: tuple[Tier, ...] = TIERS) -> list[GeometryTask]:
    """``size`` distinct held-out tasks, drawn with ``seed``."""
    out: dict[str, GeometryTask] = {}
    index = 0
    while len(out) < size and index < 50 * size + 100:
        task = draw(seed, index, tiers, evaluation=True)
        out.setdefault(task.id or "", task)
        index += 1
    return list(out.values())


def dump_jsonl(tasks: list[GeometryTask], path: Path) -> None:
    path.write_text("".join(json.dumps(t.model_dump(exclude_none=True)) + "\n" for t in tasks))
