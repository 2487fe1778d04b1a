"""The scene domain's records: the scene graph a model answers with, and the task it answers.

**Coordinates.** Metres and degrees; ``z`` is up. The room is the box ``[0, width] x [0, depth]
x [0, height]``: the floor is ``z = 0``, the *front* wall is ``y = 0`` and the *back* wall
``y = depth``, the *left* wall ``x = 0`` and the *right* wall ``x = width``. Relations are seen
from a viewer standing at the front wall looking toward the back wall: *left* is smaller ``x``,
*in front of* is smaller ``y`` (closer to the viewer).

**An object** (:class:`SceneObject`) places one asset: its origin is the centre of the bottom
face of its box; ``rotation`` is its yaw, degrees counter-clockwise seen from above; ``scale``
multiplies the asset's size (one factor or one per axis). At yaw 0 an asset's *front* faces the
viewer (``-y``): yaw 90 faces ``+x``, 180 the back wall, 270 ``-x``.

**Parents.** ``position`` and ``rotation`` are in the parent's frame: the parent's origin (the
centre of its bottom face), its axes turned by its yaw. A book on a 0.75 m table is at
``[dx, dy, 0.75]`` relative to the table, whatever the table's yaw. The parent's scale does not
carry to its children (it changes the parent's size, not its frame). An object without a parent
is placed in room coordinates.

**A task** (:class:`SceneTask`) holds the room, the asset library (named boxes with sizes; the
``shape`` only changes how a render draws them), the materials allowed, the request in words,
and the machine-readable constraints the verifier checks (:mod:`.verifier`).
"""

from __future__ import annotations

import math
import re
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

Tier = Literal["easy", "medium", "hard"]
Wall = Literal["front", "back", "left", "right"]
Shape = Literal["box", "table", "chair", "sofa", "bed", "shelf", "lamp", "plant", "cylinder"]
NAME = re.compile(r"^[a-z][a-z0-9_]*$")
MAX_OBJECTS = 200  # a scene's most objects: the pairwise checks stay well under a second

# Material name -> RGB colour in a render (0-255). A task may allow a subset (SceneTask.materials).
MATERIALS: dict[str, tuple[int, int, int]] = {
    "wood": (176, 124, 76), "dark_wood": (101, 67, 43), "metal": (150, 155, 165), "glass": (170, 215, 230),
    "leather": (120, 70, 45), "ceramic": (235, 230, 220), "plastic": (240, 240, 240), "stone": (128, 128, 120),
    "fabric_red": (190, 50, 50), "fabric_blue": (60, 90, 180), "fabric_green": (70, 140, 80),
    "fabric_grey": (140, 140, 145), "fabric_yellow": (225, 190, 60), "paper": (245, 240, 225),
}


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


# --- the answer: a scene graph ----------------------------------------------------------------------

class SceneObject(_Strict):
    """One object of a scene: an asset placed in the room or on (in the frame of) a parent."""

    id: str = Field(..., min_length=1, description="Unique within the scene.")
    asset: str = Field(..., description="The name of an asset of the task's library.")
    parent: str | None = Field(default=None, description="The id of the object whose frame position and rotation are in; none: the room.")
    position: tuple[float, float, float] = Field(..., description="[x, y, z] of the bottom-face centre, metres, in the parent's frame.")
    rotation: float = Field(default=0.0, description="Yaw in degrees, counter-clockwise seen from above, relative to the parent.")
    scale: float | tuple[float, float, float] = Field(default=1.0, description="Size factor, one or [sx, sy, sz].")
    material: str | None = Field(default=None, description="A material name of the task (none: the asset's own colour).")

    def scale3(self) -> tuple[float, float, float]:
        s = self.scale
        return (s, s, s) if isinstance(s, float | int) else s


class Scene(_Strict):
    """The answer: ``{"objects": [...]}``."""

    objects: list[SceneObject] = Field(..., min_length=1, max_length=MAX_OBJECTS)


# --- the task ---------------------------------------------------------------------------------------

class Room(_Strict):
    width: float = Field(..., gt=0, le=50, description="Extent along x, metres.")
    depth: float = Field(..., gt=0, le=50, description="Extent along y, metres.")
    height: float = Field(..., gt=0, le=20, description="Extent along z, metres.")


class Asset(_Strict):
    """A named box of the library: ``size`` is ``[width (x), depth (y), height (z)]`` at yaw 0."""

    name: str
    size: tuple[float, float, float]
    shape: Shape = Field(default="box", description="How a render draws it inside its box; checks use the box.")
    color: str | None = Field(default=None, description="Default material for renders.")

    @field_validator("name")
    @classmethod
    def _name(cls, v: str) -> str:
        if not NAME.match(v):
            raise ValueError(f"asset name {v!r} must be lower-case letters, digits and _")
        return v

    @field_validator("size")
    @classmethod
    def _size(cls, v: tuple[float, float, float]) -> tuple[float, float, float]:
        if not all(math.isfinite(x) and 0 < x <= 20 for x in v):
            raise ValueError(f"size {list(v)} must be three finite lengths in (0, 20] metres")
        return v


class Tolerances(_Strict):
    """How exact the checks are (docs/scene.md, "Checks and credit")."""

    contact: float = Field(default=0.01, ge=0, le=0.2, description="Metres: a bottom this close to a top or the floor rests on it; walls and room bounds likewise.")
    overlap: float = Field(default=0.01, ge=0, le=0.5, description="Interpenetration above this fraction of the smaller object's volume fails.")
    margin: float = Field(default=0.05, ge=0, le=1, description="Metres of slack for left/right/front/behind and against_wall.")
    facing_deg: float = Field(default=30.0, gt=0, le=90, description="Largest angle between an object's front and the direction to what it faces.")
    scale_min: float = Field(default=0.5, gt=0, description="Smallest scale factor allowed per axis.")
    scale_max: float = Field(default=2.0, gt=0, description="Largest scale factor allowed per axis.")


# Selectors in constraints: an object id (declared by an `object` constraint), "any:ASSET" (some
# object of that asset) or, as `a` only, "all:ASSET" (every object of that asset, and at least one).

class ObjectC(_Strict):
    kind: Literal["object"]
    id: str
    asset: str


class CountC(_Strict):
    kind: Literal["count"]
    asset: str
    min: int = Field(default=0, ge=0)
    max: int | None = Field(default=None, ge=0)

    @model_validator(mode="after")
    def _range(self) -> CountC:
        if self.max is not None and self.max < self.min:
            raise ValueError(f"max {self.max} is below min {self.min}")
        return self


class RelationC(_Strict):
    kind: Literal["left_of", "right_of", "in_front_of", "behind", "on_top_of", "facing"]
    a: str
    b: str


class NearC(_Strict):
    kind: Literal["near"]
    a: str
    b: str
    d: float = Field(..., gt=0)


class DistanceC(_Strict):
    kind: Literal["distance"]
    a: str
    b: str
    min: float = Field(default=0.0, ge=0)
    max: float = Field(..., gt=0)


class WallC(_Strict):
    kind: Literal["against_wall"]
    a: str
    wall: Wall


class MaterialC(_Strict):
    kind: Literal["material"]
    a: str
    material: str


Constraint = Annotated[ObjectC | CountC | RelationC | NearC | DistanceC | WallC | MaterialC, Field(discriminator="kind")]


class SceneTask(_Strict):
    """One scene task, as a task file holds it and as ``Task.target`` carries it."""

    id: str | None = None
    tier: Tier | None = None
    room: Room
    assets: list[Asset] = Field(..., min_length=1)
    materials: list[str] = Field(default_factory=lambda: list(MATERIALS), description="Material names allowed.")
    request: str | None = Field(default=None, description="The request in words; default: written from the constraints.")
    constraints: list[Constraint] = Field(default_factory=list)
    tolerances: Tolerances = Field(default_factory=lambda: Tolerances())
    reference: Scene | None = Field(default=None, description="A scene that satisfies every check (scored 1).")

    @field_validator("materials")
    @classmethod
    def _known_materials(cls, v: list[str]) -> list[str]:
        unknown = [m for m in v if m not in MATERIALS]
        if unknown:
            raise ValueError(f"unknown material(s) {', '.join(unknown)}; known: {', '.join(MATERIALS)}")
        return v

    @model_validator(mode="after")
    def _references(self) -> SceneTask:
        """Every name a constraint uses resolves: assets in the library, ids declared by an
        ``object`` constraint, materials among ``materials``."""
        names = [a.name for a in self.assets]
        dup = sorted({n for n in names if names.count(n) > 1})
        if dup:
            raise ValueError(f"assets: duplicate asset name(s) {', '.join(dup)}")
        for a in self.assets:
            if a.color is not None and a.color not in MATERIALS:
                raise ValueError(f"assets: {a.name}.color {a.color!r} is not a material ({', '.join(MATERIALS)})")
        declared = {c.id: c.asset for c in self.constraints if isinstance(c, ObjectC)}
        for i, c in enumerate(self.constraints):
            where = f"constraints.{i}"
            for field, value in _selectors(c):
                if value.startswith(("any:", "all:")):
                    if value.startswith("all:") and field == "b":
                        raise ValueError(f"{where}.b: 'all:' selects only the first object of a relation (a)")
                    asset = value[4:]
                    if asset not in names:
                        raise ValueError(f"{where}.{field}: asset {asset!r} is not in the library")
                elif value not in declared:
                    raise ValueError(f"{where}.{field}: object {value!r} is not declared by an 'object' constraint")
            asset_field = getattr(c, "asset", None)
            if asset_field is not None and asset_field not in names:
                raise ValueError(f"{where}.asset: asset {asset_field!r} is not in the library")
            if isinstance(c, MaterialC) and c.material not in self.materials:
                raise ValueError(f"{where}.material: {c.material!r} is not among the task's materials")
            if isinstance(c, DistanceC) and c.max < c.min:
                raise ValueError(f"{where}.max: {c.max} is below min {c.min}")
        if self.tolerances.scale_max < self.tolerances.scale_min:
            raise ValueError("tolerances.scale_max: below scale_min")
        return self

    def asset(self, name: str) -> Asset | None:
        return next((a for a in self.assets if a.name == name), None)


def _selectors(c: BaseModel) -> list[tuple[str, str]]:
    return [(f, getattr(c, f)) for f in ("a", "b") if isinstance(getattr(c, f, None), str)]
