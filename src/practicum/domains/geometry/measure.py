"""Reading and measuring a model's mesh, on the host, with trimesh and manifold3d.

Nothing here trusts the program that made the mesh: the verifier reads the file the program
left in its sandbox workspace and measures it from scratch.

* :func:`parse_stl` reads binary or ASCII STL with its own small, strict parser (size and face
  caps, finite coordinates, a binary file's length must match its face count); anything else is
  a :class:`MeshError` with the reason.
* :func:`legality` checks that the mesh is a valid solid: watertight (every edge in exactly two
  faces), consistently oriented, accepted by manifold3d as a 2-manifold, positive volume
  (outward normals), no degenerate (zero-area) faces, no self-intersections.
* :func:`measure` gives the figures the constraints compare: bounding box, volume, shells
  (connected pieces), genus (through-holes), mirror mismatch across each mid-plane, thinnest wall.

Methods and their limits:

* Self-intersection: every pair of faces whose bounding boxes overlap and that share no vertex
  is tested edge-against-triangle (6 segment tests per pair). Faces that cross are found;
  coplanar overlaps and folds at a shared vertex are not (a closed mesh that has them is almost
  always caught by another check: watertightness or another crossing pair).
* Genus: from the Euler characteristic of the merged mesh, ``genus = (2 * shells - chi) / 2``,
  the number of through-holes of a one-piece part. A blind hole adds none.
* Symmetry: the part is mirrored across the mid-plane of its own bounding box normal to an axis;
  the mismatch is ``vol(A - M) + vol(M - A)`` over ``vol(A)`` (manifold3d booleans), 0 for a
  symmetric part.
* Wall thickness: ``WALL_SAMPLES`` points are drawn on the surface (area-weighted, fixed seed);
  from each a ray goes inward along the face normal (manifold3d's ray cast) to the first surface
  it meets; the thinnest wall is the shortest such depth. A thin spot smaller than the sampling
  density (about ``area / WALL_SAMPLES``) can be missed.
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass, field

import numpy as np

MAX_FACES = 50_000  # a 64-segment part of the task bank has 100-5,000; measuring 50,000 takes about 10 s
MAX_PAIRS = 40_000_000  # candidate face pairs for the self-intersection test before giving up
WALL_SAMPLES = 2000


class MeshError(ValueError):
    """The file is not a readable mesh (the message says why)."""


@dataclass
class Legality:
    checks: dict[str, bool]  # watertight, oriented, manifold, positive_volume, no_degenerate_faces, no_self_intersections
    reasons: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return all(self.checks.values())


@dataclass
class Facts:
    """What was measured of a legal solid."""

    bbox_min: list[float]
    bbox_max: list[float]
    volume: float
    area: float
    faces: int
    shells: int
    genus: int
    mirror_mismatch: dict[str, float]  # axis -> vol(A xor mirror(A)) / vol(A)
    min_wall: float

    @property
    def size(self) -> list[float]:
        return [hi - lo for lo, hi in zip(self.bbox_min, self.bbox_max)]


# --- reading ------------------------------------------------------------------------------------

_FLOAT = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"
_VERTEX = re.compile(rf"vertex\s+({_FLOAT})\s+({_FLOAT})\s+({_FLOAT})")


def parse_stl(data: bytes, max_faces: int = MAX_FACES) -> np.ndarray:
    """The triangles of a binary or ASCII STL file, ``[F, 3, 3]`` float64."""
    if len(data) >= 84:
        (n,) = struct.unpack_from("<I", data, 80)
        if len(data) == 84 + 50 * n:
            if n > max_faces:
                raise MeshError(f"the mesh has {n} faces; at most {max_faces} are read")
            rec = np.frombuffer(data, dtype=[("n", "<f4", 3), ("v", "<f4", (3, 3)), ("a", "<u2")], count=n, offset=84)
            return _checked(rec["v"].astype(np.float64))
    head = data[:1024].lstrip()
    if not head.startswith(b"solid"):
        raise MeshError("not an STL file: neither a binary STL (84-byte header and 50 bytes a face) nor ASCII "
                        "('solid ...')")
    try:
        text = data.decode("ascii")
    except UnicodeDecodeError:
        raise MeshError("an ASCII STL file with bytes that are not ASCII") from None
    facets = text.count("facet normal")
    if facets > max_faces:
        raise MeshError(f"the mesh has {facets} faces; at most {max_faces} are read")
    vertices = _VERTEX.findall(text)
    if len(vertices) != 3 * facets:
        raise MeshError(f"ASCII STL: {facets} facets but {len(vertices)} vertices (3 per facet expected)")
    return _checked(np.array(vertices, dtype=np.float64).reshape(-1, 3, 3))


def _checked(tris: np.ndarray) -> np.ndarray:
    if len(tris) < 4:
        raise MeshError(f"the mesh has {len(tris)} faces; a closed solid needs at least 4")
    if not np.isfinite(tris).all():
        raise MeshError("the mesh has coordinates that are NaN or infinite")
    if np.abs(tris).max() > 1e6:
        raise MeshError("the mesh has coordinates beyond 1 km (1e6 mm)")
    return tris


def to_trimesh(tris: np.ndarray):  # -> trimesh.Trimesh
    """One mesh of the triangles, vertices at the same position merged."""
    import trimesh

    verts, faces = np.unique(tris.reshape(-1, 3), axis=0, return_inverse=True)
    return trimesh.Trimesh(vertices=verts, faces=faces.reshape(-1, 3), process=False)


# --- checking -----------------------------------------------------------------------------------

def legality(mesh) -> Legality:  # mesh: trimesh.Trimesh
    checks: dict[str, bool] = {}
    reasons: list[str] = []
    scale = float(np.linalg.norm(mesh.extents)) or 1.0

    areas = mesh.area_faces
    degenerate = int((areas <= 1e-12 * scale * scale).sum())
    checks["no_degenerate_faces"] = degenerate == 0
    if degenerate:
        reasons.append(f"{degenerate} degenerate (zero-area) face(s)")
    checks["watertight"] = bool(mesh.is_watertight)
    if not checks["watertight"]:
        reasons.append("not watertight: some edges do not belong to exactly two faces (holes in the surface, or "
                       "faces that meet along one edge more than twice)")
    checks["oriented"] = bool(mesh.is_winding_consistent)
    if not checks["oriented"]:
        reasons.append("faces are not consistently oriented")
    solid = as_manifold(mesh)
    checks["manifold"] = solid is not None
    if solid is None:
        reasons.append("manifold3d does not accept it as a closed 2-manifold")
    volume = float(mesh.volume) if checks["watertight"] else 0.0
    checks["positive_volume"] = volume > 1e-9 * scale**3
    if not checks["positive_volume"]:
        reasons.append(f"volume {volume:.4g} mm^3 is not positive" + (" (faces point inward)" if volume < 0 else ""))
    crossings = self_intersections(np.asarray(mesh.vertices), np.asarray(mesh.faces))
    checks["no_self_intersections"] = crossings == 0
    if crossings < 0:
        reasons.append("too many overlapping faces to check for self-intersection")
    elif crossings:
        reasons.append(f"the surface intersects itself ({crossings} crossing face pair(s))")
    return Legality(checks, reasons)


def as_manifold(mesh):  # -> manifold3d.Manifold | None
    from manifold3d import Error, Manifold, Mesh

    m = Manifold(Mesh(vert_properties=np.asarray(mesh.vertices, dtype=np.float32),
                      tri_verts=np.asarray(mesh.faces, dtype=np.uint32)))
    return m if m.status() == Error.NoError and not m.is_empty() else None


def self_intersections(verts: np.ndarray, faces: np.ndarray, max_pairs: int = MAX_PAIRS) -> int:
    """How many pairs of faces that share no vertex cross each other; -1 when there are more
    than ``max_pairs`` candidate pairs to test."""
    tri = verts[faces]  # [F, 3, 3]
    scale = float(np.linalg.norm(verts.max(0) - verts.min(0))) or 1.0
    eps = 1e-7 * scale
    lo, hi = tri.min(1) - eps, tri.max(1) + eps
    order = np.argsort(lo[:, 0], kind="stable")
    ends = np.searchsorted(lo[order, 0], hi[order, 0], side="right")  # sweep along X
    counts = np.maximum(ends - np.arange(len(order)) - 1, 0)
    if counts.sum() > max_pairs:
        return -1
    found = 0
    for start in range(0, len(order), 2048):
        rows = np.arange(start, min(start + 2048, len(order)))
        c = counts[rows]
        if not c.sum():
            continue
        a_sorted = np.repeat(rows, c)
        b_sorted = a_sorted + 1 + (np.arange(c.sum()) - np.repeat(np.cumsum(c) - c, c))
        a, b = order[a_sorted], order[b_sorted]
        keep = np.all((lo[a] <= hi[b]) & (lo[b] <= hi[a]), axis=1)
        a, b = a[keep], b[keep]
        fa, fb = faces[a], faces[b]
        shared = (fa[:, :, None] == fb[:, None, :]).any(axis=(1, 2))
        a, b = a[~shared], b[~shared]
        if len(a):
            hit = _edges_cross(tri[a], tri[b], eps) | _edges_cross(tri[b], tri[a], eps)
            found += int(hit.sum())
    return found


def _edges_cross(edges_of: np.ndarray, tris: np.ndarray, eps: float) -> np.ndarray:
    """Per pair: does an edge of the first triangle pass through the interior of the second?"""
    A, B, C = tris[:, 0], tris[:, 1], tris[:, 2]
    n = np.cross(B - A, C - A)
    nn = np.linalg.norm(n, axis=1)
    n = n / np.maximum(nn, 1e-300)[:, None]
    out = np.zeros(len(tris), dtype=bool)
    for i, j in ((0, 1), (1, 2), (2, 0)):
        P, Q = edges_of[:, i], edges_of[:, j]
        dp, dq = ((P - A) * n).sum(1), ((Q - A) * n).sum(1)
        crosses = ((dp > eps) & (dq < -eps)) | ((dp < -eps) & (dq > eps))
        t = dp / np.where(crosses, dp - dq, 1.0)
        X = P + t[:, None] * (Q - P)
        # barycentric coordinates of X in ABC, strictly inside
        v0, v1, v2 = B - A, C - A, X - A
        d00, d01, d11 = (v0 * v0).sum(1), (v0 * v1).sum(1), (v1 * v1).sum(1)
        d20, d21 = (v2 * v0).sum(1), (v2 * v1).sum(1)
        den = d00 * d11 - d01 * d01
        ok = crosses & (den > 0)
        den = np.where(ok, den, 1.0)
        v = (d11 * d20 - d01 * d21) / den
        w = (d00 * d21 - d01 * d20) / den
        u = 1.0 - v - w
        margin = 1e-9
        out |= ok & (u > margin) & (v > margin) & (w > margin)
    return out


# --- measuring ----------------------------------------------------------------------------------

def measure(mesh, axes: tuple[str, ...] = ("x", "y", "z"), wall: bool = True) -> Facts:
    """The figures of a legal solid (see :func:`legality` first)."""
    solid = as_manifold(mesh)
    if solid is None:
        raise MeshError("not a closed 2-manifold")
    pieces = solid.decompose()
    chi = int(mesh.euler_number)
    genus = (2 * len(pieces) - chi) // 2
    lo, hi = np.asarray(mesh.bounds, dtype=np.float64)
    mismatch = {axis: mirror_mismatch(solid, "xyz".index(axis), float(lo["xyz".index(axis)] + hi["xyz".index(axis)]) / 2)
                for axis in axes}
    return Facts(bbox_min=lo.tolist(), bbox_max=hi.tolist(), volume=float(mesh.volume), area=float(mesh.area),
                 faces=len(mesh.faces), shells=len(pieces), genus=genus, mirror_mismatch=mismatch,
                 min_wall=thinnest_wall(mesh, solid) if wall else float("nan"))


def mirror_mismatch(solid, axis: int, centre: float) -> float:
    """``vol(A xor M) / vol(A)`` for M the mirror image of A across the plane ``x[axis] = centre``."""
    normal = [0.0, 0.0, 0.0]
    normal[axis] = 1.0
    shift = [0.0, 0.0, 0.0]
    shift[axis] = 2 * centre
    mirrored = solid.mirror(normal).translate(shift)
    volume = solid.volume()
    return float(((solid - mirrored).volume() + (mirrored - solid).volume()) / volume) if volume > 0 else 1.0


def thinnest_wall(mesh, solid, samples: int = WALL_SAMPLES, seed: int = 0) -> float:
    """The shortest inward ray depth from surface points (see the module docstring)."""
    import trimesh

    points, face_index = trimesh.sample.sample_surface(mesh, samples, seed=seed)
    normals = mesh.face_normals[face_index]
    reach = float(np.linalg.norm(mesh.extents)) * 1.01 + 1.0
    start = 1e-5 * reach
    best = np.inf
    for p, n in zip(points, normals):
        origin = p - n * start
        for hit in solid.ray_cast(tuple(origin), tuple(origin - n * reach)):
            depth = float(np.linalg.norm(np.asarray(hit.position) - origin))
            if depth > start:
                best = min(best, depth + start)
                break
    return float(best)
