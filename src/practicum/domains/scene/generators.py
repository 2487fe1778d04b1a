"""Seeded scene tasks in three tiers, each made from a reference scene that scores 1.

A task is drawn by first *building* a scene, then *describing* it: furniture is placed in a room
of drawn size (against walls, free-standing, seats around a table, small things on surfaces),
the constraints are chosen among facts that hold in that scene, and the request is written from
them. So every task is satisfiable, and its reference (``SceneTask.reference``) is the scene it
was made from; :func:`generate` re-checks the reference with the verifier and draws again if it
is not perfect, so a reference always scores 1.

Tiers:

* ``easy``: one or two objects in a roomy space: a piece against a wall, a thing on a surface,
  two pieces side by side, or a count of objects.
* ``medium``: three to five objects and two to four relations among them (left/right/in front/
  behind, near, distance ranges, facing, on top of), some against walls.
* ``hard``: ten or more objects in a tight room (furniture covers about a third of the floor): a
  table with two to four chairs around it given only as a count and relations over ``all:chair``,
  nested parents (a cup on a tray on the table; books stacked on a shelf), several wall pieces,
  relations and materials.

The library lists the assets used and a few others, their sizes drawn within 15 % of a
catalogue's (so a model must read them). Every draw is a pure function of ``(tier, seed)``.
"""

from __future__ import annotations

import math
import random
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Literal

from practicum.domains.scene import geometry as g
from practicum.domains.scene.schema import (
    Asset,
    Constraint,
    CountC,
    DistanceC,
    MaterialC,
    NearC,
    ObjectC,
    RelationC,
    Room,
    Scene,
    SceneObject,
    SceneTask,
    Shape,
    Tier,
    Wall,
    WallC,
)
from practicum.domains.scene.verifier import check, describe

TIERS: tuple[Tier, ...] = ("easy", "medium", "hard")
Role = Literal["wall", "floor", "seat", "small", "flat"]


@dataclass(frozen=True)
class Kind:
    """A catalogue entry: the asset's usual size, how it is drawn, and where it goes."""

    name: str
    size: tuple[float, float, float]
    shape: Shape
    role: Role  # wall: backs onto a wall; floor: stands anywhere; seat: faces something; small: on a surface
    materials: tuple[str, ...]  # plausible materials; the first is its colour in a render
    surface: bool = False  # small things can rest on its top


CATALOGUE = {k.name: k for k in [
    Kind("table", (1.6, 0.9, 0.75), "table", "floor", ("wood", "dark_wood", "glass", "metal"), surface=True),
    Kind("desk", (1.2, 0.6, 0.75), "table", "wall", ("dark_wood", "wood", "metal"), surface=True),
    Kind("coffee_table", (1.0, 0.6, 0.45), "table", "floor", ("wood", "glass", "stone"), surface=True),
    Kind("nightstand", (0.45, 0.4, 0.55), "box", "wall", ("wood", "dark_wood", "plastic"), surface=True),
    Kind("shelf", (0.8, 0.35, 1.8), "shelf", "wall", ("wood", "dark_wood", "metal"), surface=True),
    Kind("tv_stand", (1.4, 0.45, 0.5), "box", "wall", ("dark_wood", "wood", "stone"), surface=True),
    Kind("dresser", (1.0, 0.5, 0.9), "box", "wall", ("wood", "dark_wood", "plastic"), surface=True),
    Kind("wardrobe", (1.0, 0.6, 2.0), "box", "wall", ("wood", "dark_wood", "plastic")),
    Kind("bed", (1.6, 2.0, 1.0), "bed", "wall", ("fabric_blue", "fabric_grey", "fabric_red", "fabric_yellow")),
    Kind("sofa", (2.0, 0.9, 0.85), "sofa", "wall", ("fabric_grey", "fabric_blue", "leather", "fabric_green")),
    Kind("armchair", (0.8, 0.8, 0.9), "sofa", "seat", ("fabric_green", "leather", "fabric_red", "fabric_yellow")),
    Kind("chair", (0.45, 0.5, 0.9), "chair", "seat", ("wood", "metal", "plastic", "dark_wood")),
    Kind("plant", (0.4, 0.4, 1.1), "plant", "floor", ("fabric_green", "ceramic", "stone")),
    Kind("floor_lamp", (0.35, 0.35, 1.6), "lamp", "floor", ("metal", "plastic", "wood")),
    Kind("rug", (2.0, 1.4, 0.01), "box", "flat", ("fabric_red", "fabric_blue", "fabric_yellow", "fabric_grey")),
    Kind("lamp", (0.25, 0.25, 0.45), "lamp", "small", ("ceramic", "metal", "glass")),
    Kind("book", (0.15, 0.22, 0.04), "box", "small", ("paper", "fabric_red", "fabric_blue"), surface=True),
    Kind("vase", (0.15, 0.15, 0.3), "cylinder", "small", ("glass", "ceramic", "stone")),
    Kind("tray", (0.4, 0.3, 0.04), "box", "small", ("metal", "wood", "plastic"), surface=True),
    Kind("cup", (0.08, 0.08, 0.1), "cylinder", "small", ("ceramic", "glass", "metal")),
    Kind("storage_box", (0.35, 0.3, 0.25), "box", "small", ("plastic", "wood", "paper"), surface=True),
]}
WALL_YAW: dict[Wall, float] = {"back": 0.0, "right": 90.0, "front": 180.0, "left": 270.0}  # front faces into the room
FLOOR_GAP = 0.05  # clearance kept between pieces of furniture in a reference scene


class Redraw(Exception):
    """This draw did not fit; draw again (internal to the generator)."""


@dataclass
class Layout:
    """A reference scene under construction: objects, their world boxes, and what was intended."""

    rng: random.Random
    room: Room
    assets: dict[str, Asset]
    objects: list[SceneObject] = field(default_factory=list)
    boxes: dict[str, g.Box] = field(default_factory=dict)
    walls: dict[str, Wall] = field(default_factory=dict)  # id -> the wall it backs onto
    faces: dict[str, str] = field(default_factory=dict)  # id -> the id it was turned to face
    tops: dict[str, str] = field(default_factory=dict)  # id -> the id it rests on
    count: dict[str, int] = field(default_factory=dict)

    def asset(self, kind: str) -> Asset:
        if kind not in self.assets:
            self.assets[kind] = _vary(CATALOGUE[kind], self.rng)
        return self.assets[kind]

    def new_id(self, kind: str) -> str:
        self.count[kind] = self.count.get(kind, 0) + 1
        return f"{kind}_{self.count[kind]}"

    def _fits(self, box: g.Box, ignore: Collection[str] = ()) -> bool:
        x0, y0, x1, y1 = box.aabb
        if x0 < 0 or y0 < 0 or x1 > self.room.width or y1 > self.room.depth or box.z1 > self.room.height:
            return False
        grown = g.Box(box.id, box.asset, box.x, box.y, box.z0, box.z1, box.hw + FLOOR_GAP, box.hd + FLOOR_GAP, box.yaw)
        return not any(g.interpenetration(grown, o, 0.01) > 0 for i, o in self.boxes.items() if i not in ignore)

    def try_add(self, obj: SceneObject, ignore: Collection[str] = ()) -> g.Box | None:
        """Add ``obj`` when its box fits (in the room, clear of the rest); else None."""
        box = g.world_boxes(self.assets, Scene(objects=[*self._chain(obj.parent), obj]))[obj.id]
        if not self._fits(box, ignore):
            return None
        self.objects.append(obj)
        self.boxes[obj.id] = box
        return box

    def _chain(self, parent: str | None) -> list[SceneObject]:
        out: list[SceneObject] = []
        by_id = {o.id: o for o in self.objects}
        while parent is not None:
            out.insert(0, by_id[parent])
            parent = by_id[parent].parent
        return out

    # --- placements ---------------------------------------------------------------------------------

    def against_wall(self, kind: str, wall: Wall | None = None, tries: int = 60) -> str:
        a = self.asset(kind)
        w, d, _ = a.size
        for _ in range(tries):
            side: Wall = wall if wall is not None else self.rng.choice(["back", "left", "right", "front"])
            along = self.room.width if side in ("back", "front") else self.room.depth
            if w + 0.1 > along:
                continue
            t = round(self.rng.uniform(w / 2 + 0.05, along - w / 2 - 0.05), 2)
            off = d / 2 + 0.01
            x, y = {"back": (t, self.room.depth - off), "front": (t, off), "left": (off, t),
                    "right": (self.room.width - off, t)}[side]
            oid = self.new_id(kind)
            if self.try_add(SceneObject(id=oid, asset=kind, position=(x, y, 0.0), rotation=WALL_YAW[side])):
                self.walls[oid] = side
                return oid
            self.count[kind] -= 1
        raise Redraw(f"no wall space for {kind}")

    def free(self, kind: str, any_angle: bool = False, tries: int = 80) -> str:
        a = self.asset(kind)
        r = max(a.size[:2]) / 2 + 0.02
        for _ in range(tries):
            x = round(self.rng.uniform(r, self.room.width - r), 2)
            y = round(self.rng.uniform(r, self.room.depth - r), 2)
            yaw = float(self.rng.randrange(0, 360, 15) if any_angle else self.rng.choice([0, 90, 180, 270]))
            oid = self.new_id(kind)
            ignore = set(self.boxes) if kind == "rug" else {i for i, b in self.boxes.items() if b.asset == "rug"}
            if self.try_add(SceneObject(id=oid, asset=kind, position=(x, y, 0.0), rotation=yaw), ignore):
                return oid
            self.count[kind] -= 1
        raise Redraw(f"no floor space for {kind}")

    def facing(self, kind: str, target: str, tries: int = 80) -> str:
        """A seat on the floor near ``target``, turned to face it."""
        a, t = self.asset(kind), self.boxes[target]
        for _ in range(tries):
            ang = self.rng.uniform(0, 2 * math.pi)
            dist = max(t.hw, t.hd) + max(a.size[:2]) / 2 + self.rng.uniform(0.3, 1.2)
            x, y = round(t.x + dist * math.cos(ang), 2), round(t.y + dist * math.sin(ang), 2)
            yaw = round(math.degrees(math.atan2(t.x - x, -(t.y - y))), 1) % 360  # front (sin, -cos) toward target
            oid = self.new_id(kind)
            if self.try_add(SceneObject(id=oid, asset=kind, position=(x, y, 0.0), rotation=yaw)):
                self.faces[oid] = target
                return oid
            self.count[kind] -= 1
        raise Redraw(f"no room for a {kind} facing {target}")

    def dining(self, kind: str, n: int, tries: int = 40) -> tuple[str, list[str]]:
        """A table with ``n`` seats (1-4) at its sides, children of it, each facing its centre."""
        for _ in range(tries):
            mark = (len(self.objects), dict(self.count))
            table = self.free("table")
            try:
                return table, self._around(table, kind, n)
            except Redraw:
                for o in self.objects[mark[0]:]:
                    del self.boxes[o.id]
                self.objects, self.count = self.objects[:mark[0]], mark[1]
        raise Redraw("no room for a table and its seats")

    def _around(self, table: str, kind: str, n: int) -> list[str]:
        t = self.assets[self.boxes[table].asset]
        a = self.asset(kind)
        reach_x, reach_y = t.size[0] / 2 + a.size[1] / 2 + 0.12, t.size[1] / 2 + a.size[1] / 2 + 0.12
        sides = [((0.0, -reach_y), 180.0), ((0.0, reach_y), 0.0), ((-reach_x, 0.0), 90.0), ((reach_x, 0.0), 270.0)]
        out = []
        for (u, v), yaw in sides[:n]:
            oid = self.new_id(kind)
            if not self.try_add(SceneObject(id=oid, asset=kind, parent=table, position=(round(u, 3), round(v, 3), 0.0),
                                            rotation=yaw)):
                raise Redraw(f"no room around {table}")
            self.faces[oid] = table
            out.append(oid)
        return out

    def on_top(self, kind: str, support: str, tries: int = 40) -> str:
        """A small thing resting on ``support``'s top, a child of it."""
        s, a = self.boxes[support], self.asset(kind)
        sa = self.assets[s.asset]
        height = sa.size[2]
        for _ in range(tries):
            yaw = float(self.rng.choice([0, 90, 180, 270]))
            hw, hd = (a.size[0] / 2, a.size[1] / 2) if yaw in (0, 180) else (a.size[1] / 2, a.size[0] / 2)
            mx, my = sa.size[0] / 2 - hw, sa.size[1] / 2 - hd
            if mx < 0 or my < 0:
                continue
            u, v = round(self.rng.uniform(-mx, mx) * 0.9, 2), round(self.rng.uniform(-my, my) * 0.9, 2)
            oid = self.new_id(kind)
            obj = SceneObject(id=oid, asset=kind, parent=support, position=(u, v, round(height, 3)), rotation=yaw)
            box = g.world_boxes(self.assets, Scene(objects=[*self._chain(support), obj]))[oid]
            clear = all(g.interpenetration(box, o, 0.01) <= 0 for i, o in self.boxes.items() if i != support)
            if clear and box.z1 <= self.room.height:
                self.objects.append(obj)
                self.boxes[oid] = box
                self.tops[oid] = support
                return oid
            self.count[kind] -= 1
        raise Redraw(f"no room on {support} for {kind}")


def _vary(kind: Kind, rng: random.Random) -> Asset:
    """The catalogue's size within 15 %, to the centimetre (thin things keep their height)."""
    w, d, h = kind.size
    f = [rng.uniform(0.85, 1.15) for _ in range(3)]
    size = (round(w * f[0], 2), round(d * f[1], 2), h if h < 0.05 else round(h * f[2], 2))
    return Asset(name=kind.name, size=size, shape=kind.shape, color=kind.materials[0])


def _room(rng: random.Random, area: float, lo: float = 2.4) -> Room:
    aspect = rng.uniform(0.7, 1.4)
    w = max(lo, math.sqrt(area * aspect))
    return Room(width=round(w, 1), depth=round(max(lo, area / w), 1), height=round(rng.uniform(2.5, 3.0), 1))


def _footprint(kinds: list[str]) -> float:
    return sum((CATALOGUE[k].size[0] + 2 * FLOOR_GAP) * (CATALOGUE[k].size[1] + 2 * FLOOR_GAP) for k in kinds)


def _pick(rng: random.Random, role: Role | tuple[Role, ...], k: int = 1, exclude: tuple[str, ...] = ()) -> list[str]:
    roles = (role,) if isinstance(role, str) else role
    names = [n for n, c in CATALOGUE.items() if c.role in roles and n not in exclude]
    return rng.sample(names, k)


def _surfaces(rng: random.Random, k: int = 1) -> list[str]:
    return rng.sample([n for n, c in CATALOGUE.items() if c.surface and c.role != "small"], k)


# --- facts that hold in a layout, as constraints -----------------------------------------------------

def _pair_facts(lay: Layout, ids: list[str]) -> list[Constraint]:
    """Relations that hold between pieces standing on the floor, with some slack for robustness."""
    out: list[Constraint] = []
    for a in ids:
        for b in ids:
            if a == b:
                continue
            A, B = lay.boxes[a], lay.boxes[b]
            ax0, ay0, ax1, ay1 = A.aabb
            bx0, by0, bx1, by1 = B.aabb
            if ax1 <= bx0 - 0.1:
                out.append(RelationC(kind="left_of", a=a, b=b))
            if ax0 >= bx1 + 0.1:
                out.append(RelationC(kind="right_of", a=a, b=b))
            if ay1 <= by0 - 0.1:
                out.append(RelationC(kind="in_front_of", a=a, b=b))
            if ay0 >= by1 + 0.1:
                out.append(RelationC(kind="behind", a=a, b=b))
            dist = g.horizontal_distance(A, B)
            out.append(NearC(kind="near", a=a, b=b, d=math.ceil((dist + 0.3) * 10) / 10))
            out.append(DistanceC(kind="distance", a=a, b=b, min=max(0.0, math.floor((dist - 0.4) * 10) / 10),
                                 max=math.ceil((dist + 0.4) * 10) / 10))
    return out


def _choose(rng: random.Random, facts: list[Constraint], k: int) -> list[Constraint]:
    """``k`` facts, spread over kinds: one of each kind in turn, kinds in random order."""
    by_kind: dict[str, list[Constraint]] = {}
    for f in facts:
        by_kind.setdefault(f.kind, []).append(f)
    for v in by_kind.values():
        rng.shuffle(v)
    kinds = list(by_kind)
    rng.shuffle(kinds)
    out: list[Constraint] = []
    while len(out) < k and any(by_kind.values()):
        for kd in kinds:
            if by_kind[kd] and len(out) < k:
                out.append(by_kind[kd].pop())
    return out


def _paint(lay: Layout, oid: str) -> MaterialC:
    """Give an object one of its plausible materials, and the constraint that asks for it."""
    kind = CATALOGUE[lay.boxes[oid].asset]
    m = lay.rng.choice(kind.materials)
    lay.objects = [o.model_copy(update={"material": m}) if o.id == oid else o for o in lay.objects]
    return MaterialC(kind="material", a=oid, material=m)


# --- the tiers ----------------------------------------------------------------------------------------

def _easy(rng: random.Random) -> tuple[Layout, list[Constraint]]:
    variant = rng.choice(["wall", "on_top", "pair", "count"])
    if variant == "wall":
        kind = _pick(rng, "wall")[0]
        lay = Layout(rng, _room(rng, rng.uniform(9, 16)), {})
        oid = lay.against_wall(kind)
        cons: list[Constraint] = [ObjectC(kind="object", id=oid, asset=kind), WallC(kind="against_wall", a=oid, wall=lay.walls[oid])]
        if rng.random() < 0.5:
            cons.append(_paint(lay, oid))
        return lay, cons
    if variant == "on_top":
        sup, small = _surfaces(rng)[0], _pick(rng, "small")[0]
        lay = Layout(rng, _room(rng, rng.uniform(9, 16)), {})
        s = lay.against_wall(sup) if CATALOGUE[sup].role == "wall" else lay.free(sup)
        t = lay.on_top(small, s)
        return lay, [ObjectC(kind="object", id=s, asset=sup), ObjectC(kind="object", id=t, asset=small),
                     RelationC(kind="on_top_of", a=t, b=s)]
    if variant == "pair":
        k1, k2 = _pick(rng, ("floor", "wall", "seat"), 2)
        lay = Layout(rng, _room(rng, rng.uniform(10, 18)), {})
        a, b = lay.free(k1), lay.free(k2)
        rels = [f for f in _pair_facts(lay, [a, b]) if isinstance(f, RelationC)]
        if not rels:
            raise Redraw("no clear relation between the two")
        return lay, [ObjectC(kind="object", id=a, asset=k1), ObjectC(kind="object", id=b, asset=k2), rng.choice(rels)]
    kind = _pick(rng, ("floor", "seat"))[0]
    n = 2
    lay = Layout(rng, _room(rng, rng.uniform(9, 16)), {})
    for _ in range(n):
        lay.free(kind)
    return lay, [CountC(kind="count", asset=kind, min=n, max=n)]


def _medium(rng: random.Random) -> tuple[Layout, list[Constraint]]:
    n_wall, n_floor = rng.choice([(1, 2), (2, 1), (2, 2), (1, 3)])
    walls = _pick(rng, "wall", n_wall)
    floors = _pick(rng, ("floor", "seat"), n_floor)
    lay = Layout(rng, _room(rng, max(10.0, _footprint(walls + floors) / rng.uniform(0.15, 0.25))), {})
    ids = [lay.against_wall(k) for k in walls]
    for k in floors:
        if CATALOGUE[k].role == "seat" and rng.random() < 0.6:
            ids.append(lay.facing(k, rng.choice(ids)))
        else:
            ids.append(lay.free(k, any_angle=rng.random() < 0.3))
    facts: list[Constraint] = _pair_facts(lay, ids)
    facts += [RelationC(kind="facing", a=a, b=b) for a, b in lay.faces.items()]
    facts += [WallC(kind="against_wall", a=a, wall=w) for a, w in lay.walls.items()]
    surfaces = [i for i in ids if CATALOGUE[lay.boxes[i].asset].surface]
    if surfaces and rng.random() < 0.6:
        small = _pick(rng, "small")[0]
        top = lay.on_top(small, rng.choice(surfaces))
        ids.append(top)
        facts.append(RelationC(kind="on_top_of", a=top, b=lay.tops[top]))
    cons: list[Constraint] = [ObjectC(kind="object", id=i, asset=lay.boxes[i].asset) for i in ids]
    chosen = _choose(rng, facts, rng.randint(2, 4))
    if not any(c.kind in ("left_of", "right_of", "in_front_of", "behind") for c in chosen):
        rel = [f for f in facts if f.kind in ("left_of", "right_of", "in_front_of", "behind")]
        if not rel:
            raise Redraw("no directional relation")
        chosen[-1] = rng.choice(rel)
    return lay, cons + chosen


def _hard(rng: random.Random) -> tuple[Layout, list[Constraint]]:
    chairs = rng.randint(2, 4)
    walls = ["shelf", *_pick(rng, "wall", rng.randint(2, 3), exclude=("shelf",))]
    extra = _pick(rng, "floor", 1, exclude=("table", "coffee_table"))
    table_size = (CATALOGUE["table"].size[0] + 1.2) * (CATALOGUE["table"].size[1] + 1.2)
    area = (_footprint(walls + extra) + table_size) / rng.uniform(0.55, 0.65)
    lay = Layout(rng, _room(rng, area, lo=3.0), {})
    table, seats = lay.dining("chair", chairs)
    shelf, *others = [lay.against_wall(k) for k in walls]
    loose = [lay.free(k) for k in extra]
    tray = lay.on_top("tray", table)
    cup = lay.on_top("cup", tray)  # nested: cup -> tray -> table
    book1 = lay.on_top("book", shelf)
    book2 = lay.on_top("book", book1)  # nested: book -> book -> shelf
    named = [shelf, *others, table, *loose, tray, cup, book1, book2]
    cons: list[Constraint] = [ObjectC(kind="object", id=i, asset=lay.boxes[i].asset) for i in named]
    far = max(g.horizontal_distance(lay.boxes[s], lay.boxes[table]) for s in seats)
    cons += [CountC(kind="count", asset="chair", min=chairs, max=chairs),
             NearC(kind="near", a="all:chair", b=table, d=math.ceil((far + 0.2) * 10) / 10),
             RelationC(kind="facing", a="all:chair", b=table),
             RelationC(kind="on_top_of", a=tray, b=table), RelationC(kind="on_top_of", a=cup, b=tray),
             RelationC(kind="on_top_of", a=book1, b=shelf), RelationC(kind="on_top_of", a=book2, b=book1)]
    facts: list[Constraint] = _pair_facts(lay, [shelf, *others, table, *loose])
    facts += [WallC(kind="against_wall", a=a, wall=w) for a, w in lay.walls.items()]
    cons += _choose(rng, facts, rng.randint(3, 5))
    cons.append(_paint(lay, rng.choice([shelf, *others, table])))
    return lay, cons


BUILDERS = {"easy": _easy, "medium": _medium, "hard": _hard}


def generate(tier: Tier, seed: int | str) -> SceneTask:
    """One task of ``tier``, a pure function of ``(tier, seed)``, with a reference that scores 1."""
    rng = random.Random(f"scene/{tier}/{seed}")
    for _ in range(200):
        try:
            lay, cons = BUILDERS[tier](rng)
        except Redraw:
            continue
        distractors = [n for n in CATALOGUE if n not in lay.assets]
        for n in rng.sample(distractors, min(len(distractors), rng.randint(2, 4))):
            lay.asset(n)
        assets = sorted(lay.assets.values(), key=lambda a: a.name)
        reference = Scene(objects=lay.objects)
        task = SceneTask(id=f"scene/{tier}/{seed}", tier=tier, room=lay.room, assets=assets, constraints=cons,
                         request="\n".join(f"- {describe(c)}" for c in cons), reference=reference)
        if check(task, "```json\n" + reference.model_dump_json(exclude_defaults=True) + "\n```").score.value == 1.0:
            return task
    raise RuntimeError(f"scene generator {tier} found no layout for seed {seed!r} in 200 draws")  # a generator bug
