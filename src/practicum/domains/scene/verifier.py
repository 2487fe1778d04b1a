"""Checking a scene graph against its task: structure as a gate, physics and constraints as credit.

**Reading the reply.** The scene is the JSON in the reply's last ```json fenced block (a block
with no language tag counts too); failing that, in its last ``<answer>...</answer>`` pair;
failing that, the whole reply if it is JSON. Prose around the block is ignored. The JSON itself
is read strictly: ``{"objects": [...]}`` with exactly the fields of
:class:`~practicum.domains.scene.schema.SceneObject`, numbers as numbers (``"1.0"`` is refused),
no unknown fields.

**Checks, in order** (docs/scene.md has the table):

1. *Format*: JSON found, parsed, schema-valid. Else the score is 0.
2. *Structure* (a gate: any failure scores 0, nothing else is judged): every ``asset`` is in the
   library, ids are unique, every ``parent`` is an id of the scene, no parent chain is a cycle,
   every ``material`` is one of the task's; every number finite, every scale factor within the
   task's ``[scale_min, scale_max]`` (default 0.5-2: no degenerate or zero scale, and no shrinking
   a bed to fit).
3. *Physics*, per object: it rests on the floor (bottom within ``contact`` of z = 0) or on the top
   face of another object (bottom within ``contact`` of its top, and its footprint's centre over
   that top); it interpenetrates no other object by more than ``overlap`` of the smaller one's
   volume; it lies inside the room (``contact`` of slack). ``physical`` is the fraction of objects
   that pass all three.
4. *Constraints*: each of the task's constraints holds or not; ``constraints`` is the fraction
   that hold (1 when the task has none).

The score is ``physical x constraints`` (a floating book among five objects costs a fifth of the
credit; a scene with every object sound gets exactly the share of constraints it meets).
Components: ``valid`` (1 once format and structure pass), ``physical``, ``constraints``.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field

from pydantic import ValidationError

from practicum.domains.plugin import Verdict
from practicum.domains.scene import geometry as g
from practicum.domains.scene.schema import (
    Constraint,
    CountC,
    DistanceC,
    MaterialC,
    NearC,
    ObjectC,
    RelationC,
    Scene,
    SceneTask,
    WallC,
)
from practicum.records import Score

COMPONENTS = ("valid", "physical", "constraints")
INLINE_FENCE = re.compile(r"^```(\w*)\s*(.*?)```$")
ANSWER = re.compile(r"<answer>(.*?)</answer>", re.DOTALL | re.IGNORECASE)


def extract_json(reply: str) -> str | None:
    """The JSON text of a reply (module docstring), or None when there is none to read."""
    blocks = [text for lang, text in _fenced(reply) if lang in ("", "json")]
    if blocks:
        return blocks[-1].strip()
    tags = ANSWER.findall(reply)
    if tags:
        return tags[-1].strip()
    text = reply.strip()
    return text if text.startswith(("{", "[")) else None


def _fenced(reply: str) -> list[tuple[str, str]]:
    """The reply's fenced blocks as ``(language, text)``, fences paired line by line (a block on
    one line, ```` ```json {...}``` ````, counts too)."""
    blocks: list[tuple[str, str]] = []
    lang: str | None = None
    body: list[str] = []
    for line in reply.splitlines():
        s = line.strip()
        if lang is None:
            inline = INLINE_FENCE.match(s) if len(s) > 6 else None
            if inline:
                blocks.append((inline.group(1).lower(), inline.group(2)))
            elif s.startswith("```"):
                lang, body = s[3:].strip().lower(), []
        elif s.startswith("```"):
            blocks.append((lang, "\n".join(body)))
            lang = None
        else:
            body.append(line)
    return blocks


def parse_scene(reply: str) -> tuple[Scene | None, str]:
    """The scene of a reply, or None and why not."""
    text = extract_json(reply)
    if text is None:
        return None, "no JSON found: put the scene in a ```json block (or <answer> tags)"
    try:
        json.loads(text)
    except json.JSONDecodeError as e:
        return None, f"not valid JSON: {e}"
    except RecursionError:
        return None, "not valid JSON: nested deeper than the parser goes"
    except ValueError as e:  # an integer of more digits than Python converts
        return None, f"not valid JSON: {e}"
    try:
        return Scene.model_validate_json(text, strict=True), "ok"
    except ValidationError as e:
        problems = "; ".join(f"{'.'.join(str(x) for x in err['loc']) or 'scene'}: {err['msg']}" for err in e.errors()[:5])
        more = f" (and {e.error_count() - 5} more)" if e.error_count() > 5 else ""
        return None, f"not a scene graph: {problems}{more}"


def structure_problems(task: SceneTask, scene: Scene) -> list[str]:
    """What makes a scene impossible to build: unresolved references, cycles, bad numbers."""
    problems = []
    ids = [o.id for o in scene.objects]
    for dup in sorted({i for i in ids if ids.count(i) > 1}):
        problems.append(f"duplicate id {dup!r}")
    known, tol = set(ids), task.tolerances
    dangling = False
    for o in scene.objects:
        if task.asset(o.asset) is None:
            problems.append(f"{o.id}: asset {o.asset!r} is not in the library")
        if o.parent is not None and o.parent not in known:
            problems.append(f"{o.id}: parent {o.parent!r} is not an object of the scene")
            dangling = True
        if o.material is not None and o.material not in task.materials:
            problems.append(f"{o.id}: material {o.material!r} is not one of the task's")
        if not all(math.isfinite(v) for v in (*o.position, o.rotation)):
            problems.append(f"{o.id}: position or rotation is not finite")
        scale = o.scale3()
        if not all(math.isfinite(s) and tol.scale_min <= s <= tol.scale_max for s in scale):
            problems.append(f"{o.id}: scale {list(scale)} is outside [{tol.scale_min:g}, {tol.scale_max:g}]")
    if not dangling and len(known) == len(ids):
        cycle = _cycle({o.id: o.parent for o in scene.objects})
        if cycle:
            problems.append(f"parent cycle: {' -> '.join(cycle)}")
    return problems


def _cycle(parents: dict[str, str | None]) -> list[str] | None:
    """One parent cycle (its ids, the first repeated at the end), or None."""
    done: set[str] = set()
    for start in parents:
        path: list[str] = []
        cur: str | None = start
        while cur is not None and cur not in done:
            if cur in path:
                return [*path[path.index(cur):], cur]
            path.append(cur)
            cur = parents[cur]
        done.update(path)
    return None


@dataclass
class Physics:
    """Per object: what physical check it fails (empty when sound)."""

    problems: dict[str, list[str]] = field(default_factory=dict)

    @property
    def sound(self) -> float:
        return sum(not p for p in self.problems.values()) / max(1, len(self.problems))


def physics(task: SceneTask, boxes: dict[str, g.Box]) -> Physics:
    tol, room = task.tolerances, task.room
    out = Physics({i: [] for i in boxes})
    items = list(boxes.values())
    for b in items:
        if abs(b.z0) > tol.contact and not any(
                o is not b and abs(b.z0 - o.z1) <= tol.contact and g.inside_footprint((b.x, b.y), o, tol.contact)
                for o in items):
            out.problems[b.id].append(f"floats (bottom at z={b.z0:.3f} rests on neither the floor nor a top)")
        xmin, ymin, xmax, ymax = b.aabb
        c = tol.contact
        if xmin < -c or ymin < -c or xmax > room.width + c or ymax > room.depth + c or b.z0 < -c or b.z1 > room.height + c:
            out.problems[b.id].append(f"outside the room (x {xmin:.2f}..{xmax:.2f}, y {ymin:.2f}..{ymax:.2f}, "
                                      f"z {b.z0:.2f}..{b.z1:.2f})")
    for i, a in enumerate(items):
        for b in items[i + 1:]:
            v = g.interpenetration(a, b, tol.contact)
            if v > tol.overlap * min(a.volume, b.volume):
                out.problems[a.id].append(f"interpenetrates {b.id} ({v * 1000:.1f} L)")
                out.problems[b.id].append(f"interpenetrates {a.id} ({v * 1000:.1f} L)")
    return out


# --- constraints ------------------------------------------------------------------------------------

def _select(sel: str, boxes: dict[str, g.Box]) -> tuple[str, list[g.Box]]:
    """``(quantifier, objects)`` of a selector: an id, ``any:ASSET`` or ``all:ASSET``."""
    if sel.startswith(("any:", "all:")):
        return sel[:3], [b for b in boxes.values() if b.asset == sel[4:]]
    return "one", [boxes[sel]] if sel in boxes else []


def _relation(c: Constraint, a: g.Box, b: g.Box, task: SceneTask) -> bool:
    tol = task.tolerances
    ax0, ay0, ax1, ay1 = a.aabb
    bx0, by0, bx1, by1 = b.aabb
    if isinstance(c, RelationC):
        if c.kind == "left_of":
            return ax1 <= bx0 + tol.margin
        if c.kind == "right_of":
            return ax0 >= bx1 - tol.margin
        if c.kind == "in_front_of":
            return ay1 <= by0 + tol.margin
        if c.kind == "behind":
            return ay0 >= by1 - tol.margin
        if c.kind == "on_top_of":
            return abs(a.z0 - b.z1) <= tol.contact and g.inside_footprint((a.x, a.y), b, tol.contact)
        return g.facing_angle(a, b) <= tol.facing_deg  # facing
    if isinstance(c, NearC):
        return g.horizontal_distance(a, b) <= c.d
    if isinstance(c, DistanceC):
        return c.min <= g.horizontal_distance(a, b) <= c.max
    raise AssertionError(f"not a relation: {c}")


def holds(c: Constraint, task: SceneTask, boxes: dict[str, g.Box]) -> bool:
    """Whether one constraint holds in a (structurally valid) scene."""
    if isinstance(c, ObjectC):
        return c.id in boxes and boxes[c.id].asset == c.asset
    if isinstance(c, CountC):
        n = sum(b.asset == c.asset for b in boxes.values())
        return c.min <= n and (c.max is None or n <= c.max)
    if isinstance(c, WallC | MaterialC):
        q, subjects = _select(c.a, boxes)
        ok = [_unary(c, s, task) for s in subjects]
        return bool(ok) and (any(ok) if q == "any" else all(ok))
    q, subjects = _select(c.a, boxes)
    _, targets = _select(c.b, boxes)
    ok = [any(_relation(c, s, t, task) for t in targets if t is not s) for s in subjects]
    return bool(ok) and (any(ok) if q == "any" else all(ok))


def _unary(c: WallC | MaterialC, a: g.Box, task: SceneTask) -> bool:
    if isinstance(c, MaterialC):
        return a.material == c.material
    m, room = task.tolerances.margin, task.room
    x0, y0, x1, y1 = a.aabb
    return {"front": y0 <= m, "back": y1 >= room.depth - m, "left": x0 <= m, "right": x1 >= room.width - m}[c.wall]


def describe(c: Constraint) -> str:
    """A constraint in words (the request of a task that has none is these sentences)."""
    def sel(s: str) -> str:
        if s.startswith("any:"):
            return f"{_a(s[4:])} {s[4:]}"
        if s.startswith("all:"):
            return f"every {s[4:]}"
        return f"`{s}`"

    if isinstance(c, ObjectC):
        return f"Place {_a(c.asset)} {c.asset} with id `{c.id}`."
    if isinstance(c, CountC):
        if c.max == c.min:
            return f"Place exactly {c.min} {c.asset} object(s) (any ids)."
        return f"Place at least {c.min}" + (f" and at most {c.max}" if c.max is not None else "") + f" {c.asset} object(s)."
    if isinstance(c, WallC):
        return f"{sel(c.a)} stands against the {c.wall} wall."
    if isinstance(c, MaterialC):
        return f"{sel(c.a)} is made of {c.material}."
    if isinstance(c, NearC):
        return f"{sel(c.a)} is within {c.d:g} m of {sel(c.b)} (centre to centre)."
    if isinstance(c, DistanceC):
        return f"{sel(c.a)} is between {c.min:g} and {c.max:g} m from {sel(c.b)} (centre to centre)."
    words = {"left_of": "is left of", "right_of": "is right of", "in_front_of": "is in front of", "behind": "is behind",
             "on_top_of": "rests on top of", "facing": "faces"}
    return f"{sel(c.a)} {words[c.kind]} {sel(c.b)}."


def _a(noun: str) -> str:
    return "an" if noun[0] in "aeiou" else "a"


# --- the verdict ------------------------------------------------------------------------------------

def check(task: SceneTask, reply: str) -> Verdict:
    """Score one reply to one task (module docstring)."""
    scene, why = parse_scene(reply)
    if scene is None:
        return _zero(why)
    problems = structure_problems(task, scene)
    if problems:
        more = f" (+{len(problems) - 6} more)" if len(problems) > 6 else ""
        return _zero("invalid scene: " + "; ".join(problems[:6]) + more)
    boxes = g.world_boxes({a.name: a for a in task.assets}, scene)
    phys = physics(task, boxes)
    results = [holds(c, task, boxes) for c in task.constraints]
    met = sum(results) / len(results) if results else 1.0
    value = phys.sound * met
    bad = [f"{i}: {', '.join(p)}" for i, p in phys.problems.items() if p]
    unmet = [describe(c) for c, ok in zip(task.constraints, results) if not ok]
    why = (f"{len(boxes)} objects, {len(boxes) - len(bad)} physically sound; {sum(results)}/{len(results)} constraints met"
           + (f". Physics: {'; '.join(bad)}" if bad else "") + (f". Unmet: {' '.join(unmet)}" if unmet else ""))
    return Verdict(Score(value=value, components={"valid": 1.0, "physical": phys.sound, "constraints": met},
                         explanation=why))


def _zero(why: str) -> Verdict:
    return Verdict(Score(value=0.0, components={"valid": 0.0, "physical": 0.0, "constraints": 0.0}, explanation=why))
