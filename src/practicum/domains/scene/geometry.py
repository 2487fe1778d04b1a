"""World placement of a scene's objects as oriented boxes, and the exact measures the checks use.

Rotations are yaw only (about the vertical axis), so every object is a box standing upright:
its footprint is a rectangle turned by its yaw, its height an interval of ``z``. That makes the
measures exact and cheap, with no mesh library: footprint overlap is the area of the
intersection of two convex polygons (Sutherland-Hodgman clipping), interpenetration is that
area times the overlap of the height intervals. Meshes (:mod:`.render`) are only for pictures.

:func:`world_boxes` assumes a scene whose references and transforms were already checked
(:mod:`.verifier`): every parent exists, there is no cycle, numbers are finite.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from practicum.domains.scene.schema import Asset, Scene

Point = tuple[float, float]


@dataclass(frozen=True)
class Box:
    """One object in world coordinates: an upright box."""

    id: str
    asset: str
    x: float  # centre of the footprint
    y: float
    z0: float  # bottom
    z1: float  # top
    hw: float  # half width (local x) and half depth (local y), scale applied
    hd: float
    yaw: float  # degrees, world
    material: str | None = None

    @property
    def corners(self) -> list[Point]:
        """The footprint's corners, counter-clockwise."""
        c, s = math.cos(math.radians(self.yaw)), math.sin(math.radians(self.yaw))
        return [(self.x + c * u - s * v, self.y + s * u + c * v)
                for u, v in ((-self.hw, -self.hd), (self.hw, -self.hd), (self.hw, self.hd), (-self.hw, self.hd))]

    @property
    def aabb(self) -> tuple[float, float, float, float]:
        """(xmin, ymin, xmax, ymax) of the footprint."""
        xs, ys = zip(*self.corners)
        return min(xs), min(ys), max(xs), max(ys)

    @property
    def volume(self) -> float:
        return 4 * self.hw * self.hd * (self.z1 - self.z0)

    @property
    def front(self) -> Point:
        """The unit vector the object's front faces (local -y)."""
        r = math.radians(self.yaw)
        return math.sin(r), -math.cos(r)


def world_boxes(assets: dict[str, Asset], scene: Scene) -> dict[str, Box]:
    """Each object's box in room coordinates, by id: parents' frames composed down the tree."""
    objects = {o.id: o for o in scene.objects}
    frames: dict[str, tuple[float, float, float, float]] = {}  # id -> world x, y, z, yaw of its origin

    def frame(oid: str) -> tuple[float, float, float, float]:
        if oid not in frames:
            o = objects[oid]
            px, py, pz, pyaw = frame(o.parent) if o.parent is not None else (0.0, 0.0, 0.0, 0.0)
            c, s = math.cos(math.radians(pyaw)), math.sin(math.radians(pyaw))
            x, y, z = o.position
            frames[oid] = (px + c * x - s * y, py + s * x + c * y, pz + z, pyaw + o.rotation)
        return frames[oid]

    boxes = {}
    for o in scene.objects:
        asset = assets[o.asset]
        sx, sy, sz = o.scale3()
        x, y, z, yaw = frame(o.id)
        w, d, h = asset.size
        boxes[o.id] = Box(o.id, o.asset, x, y, z, z + h * sz, w * sx / 2, d * sy / 2, yaw % 360, o.material)
    return boxes


# --- measures ---------------------------------------------------------------------------------------

def polygon_area(poly: list[Point]) -> float:
    """Shoelace area of a simple polygon (counter-clockwise: positive)."""
    return 0.5 * sum(x0 * y1 - x1 * y0 for (x0, y0), (x1, y1) in zip(poly, poly[1:] + poly[:1]))


def clip(subject: list[Point], window: list[Point]) -> list[Point]:
    """The intersection of a polygon with a convex counter-clockwise polygon (Sutherland-Hodgman)."""
    out = subject
    for a, b in zip(window, window[1:] + window[:1]):
        if not out:
            break
        src, out = out, []
        for p, q in zip(src, src[1:] + src[:1]):
            sp, sq = _side(a, b, p), _side(a, b, q)
            if sp >= 0:
                out.append(p)
            if (sp >= 0) != (sq >= 0):
                t = sp / (sp - sq)
                out.append((p[0] + t * (q[0] - p[0]), p[1] + t * (q[1] - p[1])))
    return out


def _side(a: Point, b: Point, p: Point) -> float:
    """> 0 when p is left of the line a -> b (inside a counter-clockwise polygon's edge)."""
    return (b[0] - a[0]) * (p[1] - a[1]) - (b[1] - a[1]) * (p[0] - a[0])


def footprint_overlap(a: Box, b: Box) -> float:
    """Area of the intersection of two footprints, square metres."""
    inter = clip(a.corners, b.corners)
    return abs(polygon_area(inter)) if len(inter) >= 3 else 0.0


def interpenetration(a: Box, b: Box, contact: float) -> float:
    """Volume two boxes share, cubic metres, their height intervals first shrunk by ``contact``
    (a book resting on a table, or a sofa on a 1 cm rug, shares nothing)."""
    dz = min(a.z1, b.z1) - max(a.z0, b.z0) - contact
    if dz <= 0:
        return 0.0
    return footprint_overlap(a, b) * dz


def inside_footprint(p: Point, b: Box, slack: float = 0.0) -> bool:
    """Whether a point lies within a box's footprint (grown by ``slack`` metres)."""
    c, s = math.cos(math.radians(b.yaw)), math.sin(math.radians(b.yaw))
    dx, dy = p[0] - b.x, p[1] - b.y
    u, v = c * dx + s * dy, -s * dx + c * dy  # the point in the box's own axes
    return abs(u) <= b.hw + slack and abs(v) <= b.hd + slack


def horizontal_distance(a: Box, b: Box) -> float:
    """Distance between the footprints' centres, metres."""
    return math.hypot(a.x - b.x, a.y - b.y)


def facing_angle(a: Box, b: Box) -> float:
    """Degrees between a's front and the direction from a's centre to b's (0: faces it squarely)."""
    dx, dy = b.x - a.x, b.y - a.y
    n = math.hypot(dx, dy)
    if n == 0:
        return 180.0
    fx, fy = a.front
    return math.degrees(math.acos(max(-1.0, min(1.0, (fx * dx + fy * dy) / n))))
