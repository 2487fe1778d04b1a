"""cad: a small solid-modelling API. Units are millimetres; Z is up.

Solids (every 3D shape is a closed solid, a ``manifold3d.Manifold``):
  box(x, y, z, center=False)          corner at the origin, or centred on it
  cylinder(h, r, center=False)        axis along Z, base at z=0 (or centred)
  cone(h, r1, r2=0, center=False)     axis along Z, radius r1 at the base, r2 at the top
  sphere(r)                           centred on the origin
Profiles (2D, in the XY plane):
  rect(x, y, center=False)   circle(r)   polygon([(x, y), ...])   (profiles combine with + - &)
  extrude(profile, h)                 the profile swept up along Z from z=0 to z=h
  revolve(profile, degrees=360)       points (x, y) of the profile are (radius, height): it is
                                      spun around the Z axis (only x >= 0 counts)
Combining: a + b (union), a - b (difference), a & b (intersection); also union(a, b, ...),
  difference(a, b, ...) (a minus the others), intersection(a, b, ...).
Moving: translate(s, x, y, z), rotate(s, x=0, y=0, z=0) (degrees about X, then Y, then Z,
  around the origin), scale(s, f) (f a number or (fx, fy, fz)), mirror(s, (nx, ny, nz)) (across
  the plane through the origin with that normal). Shapes also have .translate([x, y, z]) etc.
Output: export(shape) writes part.stl, the file that is checked; call it once, at the end.
  measure(shape) returns a dict (volume, bbox_min, bbox_max, size, genus) to check your work.
Round shapes use SEGMENTS (64) facets around a full circle; pass segments=N to change it.
A part may have at most 50,000 triangles (64 segments give a few thousand).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence
from functools import reduce

import numpy as np
from manifold3d import CrossSection, Manifold

__all__ = ["SEGMENTS", "CrossSection", "Manifold", "box", "circle", "cone", "cylinder", "difference", "export",
           "extrude", "intersection", "measure", "mirror", "polygon", "rect", "revolve", "rotate", "scale",
           "sphere", "translate", "union"]

SEGMENTS = 64
OUTPUT = "part.stl"


def box(x: float, y: float, z: float, center: bool = False) -> Manifold:
    return Manifold.cube((x, y, z), center=center)


def cylinder(h: float, r: float, center: bool = False, segments: int = SEGMENTS) -> Manifold:
    return Manifold.cylinder(h, r, r, circular_segments=segments, center=center)


def cone(h: float, r1: float, r2: float = 0.0, center: bool = False, segments: int = SEGMENTS) -> Manifold:
    return Manifold.cylinder(h, r1, r2, circular_segments=segments, center=center)


def sphere(r: float, segments: int = SEGMENTS) -> Manifold:
    return Manifold.sphere(r, circular_segments=segments)


def rect(x: float, y: float, center: bool = False) -> CrossSection:
    return CrossSection.square((x, y), center=center)


def circle(r: float, segments: int = SEGMENTS) -> CrossSection:
    return CrossSection.circle(r, circular_segments=segments)


def polygon(points: Sequence[tuple[float, float]]) -> CrossSection:
    """A simple polygon from its corners (either winding)."""
    pts = [(float(x), float(y)) for x, y in points]
    area = sum(x0 * y1 - x1 * y0 for (x0, y0), (x1, y1) in zip(pts, pts[1:] + pts[:1]))
    return CrossSection([pts if area > 0 else pts[::-1]])


def extrude(profile: CrossSection, h: float) -> Manifold:
    return Manifold.extrude(profile, h)


def revolve(profile: CrossSection, degrees: float = 360.0, segments: int = SEGMENTS) -> Manifold:
    return Manifold.revolve(profile, circular_segments=segments, revolve_degrees=degrees)


def union(*shapes: Manifold) -> Manifold:
    return reduce(lambda a, b: a + b, _flat(shapes))


def difference(first: Manifold, *others: Manifold) -> Manifold:
    return reduce(lambda a, b: a - b, _flat(others), first)


def intersection(*shapes: Manifold) -> Manifold:
    return reduce(lambda a, b: a ^ b, _flat(shapes))


def translate(s: Manifold, x: float = 0.0, y: float = 0.0, z: float = 0.0) -> Manifold:
    return s.translate((x, y, z))


def rotate(s: Manifold, x: float = 0.0, y: float = 0.0, z: float = 0.0) -> Manifold:
    return s.rotate((x, 0.0, 0.0)).rotate((0.0, y, 0.0)).rotate((0.0, 0.0, z))


def scale(s: Manifold, f: float | Sequence[float]) -> Manifold:
    return s.scale((f, f, f) if isinstance(f, int | float) else tuple(f))


def mirror(s: Manifold, normal: Sequence[float]) -> Manifold:
    return s.mirror(tuple(normal))


def measure(shape: Manifold) -> dict:
    lo, hi = np.array(shape.bounding_box()).reshape(2, 3)
    return {"volume": shape.volume(), "bbox_min": lo.tolist(), "bbox_max": hi.tolist(),
            "size": (hi - lo).tolist(), "genus": shape.genus()}


def export(shape: Manifold, path: str = OUTPUT) -> str:
    """Write the solid as a binary STL file (part.stl: the file that is checked)."""
    if isinstance(shape, list | tuple):
        shape = union(*shape)
    if not isinstance(shape, Manifold):
        raise TypeError(f"export() takes a solid (Manifold), not {type(shape).__name__}")
    if shape.is_empty():
        raise ValueError(f"export(): the shape is empty ({shape.status()})")
    mesh = shape.to_mesh()
    tris = np.asarray(mesh.vert_properties, dtype=np.float32)[:, :3][np.asarray(mesh.tri_verts)]  # [F, 3, 3]
    normals = np.cross(tris[:, 1] - tris[:, 0], tris[:, 2] - tris[:, 0])
    normals /= np.maximum(np.linalg.norm(normals, axis=1, keepdims=True), 1e-30)
    records = np.zeros(len(tris), dtype=[("n", "<f4", 3), ("v", "<f4", (3, 3)), ("attr", "<u2")])
    records["n"], records["v"] = normals, tris
    with open(path, "wb") as f:
        f.write(b"cad.py binary STL".ljust(80, b" ") + struct.pack("<I", len(tris)) + records.tobytes())
    return path


def _flat(shapes: Iterable) -> list:
    out = []
    for s in shapes:
        out.extend(_flat(s) if isinstance(s, list | tuple) else [s])
    return out
