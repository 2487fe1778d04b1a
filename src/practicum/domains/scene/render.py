"""Pictures of scenes: each object as a few simple meshes inside its box, drawn offscreen to a PNG.

:func:`scene_meshes` turns a (structurally valid) scene into ``trimesh`` meshes with colours:
the floor, the back and left walls (the camera of :func:`practicum.render3d.render_png` looks
from the front right, above, so those two walls never hide anything), and each object drawn by
its asset's ``shape`` (a table is a top and four legs, a chair a seat, legs and a back...) in its
material's colour, scaled, turned and placed exactly as the checks place its box
(:func:`practicum.domains.scene.geometry.world_boxes`). :func:`render_reply` draws one reply to
one task, titled with its score; a reply with no buildable scene draws the empty room.

``python -m practicum.domains.scene.render --task T.json --answer A.txt --out scene.png`` draws
a reply from the command line (``--reference`` draws the task's own reference scene).
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import Any

from practicum.domains.scene import geometry as g
from practicum.domains.scene.schema import MATERIALS, Asset, Scene, SceneTask

FLOOR, WALL, FOLIAGE = (225, 220, 210), (255, 255, 255), (60, 140, 70)
Part = tuple[Any, tuple[int, int, int]]  # a trimesh.Trimesh and its RGB colour


def renderer_available() -> str | None:
    """None when scenes can be rendered here, else what is missing."""
    try:
        import trimesh  # noqa: F401

        from practicum import render3d  # noqa: F401
    except ImportError as e:
        return f"rendering scenes needs trimesh and practicum.render3d: {e}"
    return None


def _box(lo: tuple[float, float, float], hi: tuple[float, float, float]) -> Any:
    import trimesh

    extents = [b - a for a, b in zip(lo, hi)]
    centre = [(a + b) / 2 for a, b in zip(lo, hi)]
    return trimesh.creation.box(extents=extents, transform=trimesh.transformations.translation_matrix(centre))


def _cylinder(r: float, z0: float, z1: float, sections: int = 20) -> Any:
    import trimesh

    return trimesh.creation.cylinder(radius=r, segment=[[0, 0, z0], [0, 0, z1]], sections=sections)


def shape_parts(shape: str, w: float, d: float, h: float, colour: tuple[int, int, int]) -> list[Part]:
    """An asset's meshes in its own frame: origin at the bottom-face centre, front toward -y,
    everything within ``[-w/2, w/2] x [-d/2, d/2] x [0, h]``."""
    x, y = w / 2, d / 2
    if shape == "table":
        t, leg = min(0.06, h * 0.1), min(0.06, w * 0.1, d * 0.1)
        parts = [_box((-x, -y, h - t), (x, y, h))]
        parts += [_box((sx * x - (leg if sx > 0 else 0), sy * y - (leg if sy > 0 else 0), 0),
                       (sx * x + (leg if sx < 0 else 0), sy * y + (leg if sy < 0 else 0), h - t))
                  for sx in (-1, 1) for sy in (-1, 1)]
        return [(p, colour) for p in parts]
    if shape == "chair":
        seat, leg, back = h * 0.5, min(0.04, w * 0.1), min(0.06, d * 0.15)
        parts = [_box((-x, -y, seat - 0.04), (x, y, seat)), _box((-x, y - back, seat), (x, y, h))]
        parts += [_box((sx * x - (leg if sx > 0 else 0), sy * y - (leg if sy > 0 else 0), 0),
                       (sx * x + (leg if sx < 0 else 0), sy * y + (leg if sy < 0 else 0), seat - 0.04))
                  for sx in (-1, 1) for sy in (-1, 1)]
        return [(p, colour) for p in parts]
    if shape == "sofa":
        arm, back = w * 0.1, d * 0.25
        parts = [_box((-x, -y, 0), (x, y, h * 0.45)), _box((-x, y - back, h * 0.45), (x, y, h)),
                 _box((-x, -y, h * 0.45), (-x + arm, y - back, h * 0.7)), _box((x - arm, -y, h * 0.45), (x, y - back, h * 0.7))]
        return [(p, colour) for p in parts]
    if shape == "bed":
        head = min(0.08, d * 0.05)
        return [(_box((-x, -y, 0), (x, y - head, h * 0.3)), (120, 90, 60)),
                (_box((-x, -y, h * 0.3), (x, y - head, h * 0.5)), colour),
                (_box((-x * 0.8, y - head - 0.45, h * 0.5), (x * 0.8, y - head - 0.1, h * 0.6)), (245, 245, 245)),
                (_box((-x, y - head, 0), (x, y, h)), (120, 90, 60))]
    if shape == "shelf":
        side, board = min(0.03, w * 0.05), 0.025
        parts = [_box((-x, -y, 0), (-x + side, y, h)), _box((x - side, -y, 0), (x, y, h)),
                 _box((-x, y - side, 0), (x, y, h))]
        levels = max(2, round(h / 0.4))
        parts += [_box((-x, -y, min(h - board, i * h / levels)), (x, y, min(h, i * h / levels + board))) for i in range(levels + 1)]
        return [(p, colour) for p in parts]
    if shape == "lamp":
        r = min(x, y)
        return [(_cylinder(r * 0.6, 0, h * 0.05), colour), (_cylinder(r * 0.08, h * 0.05, h * 0.75), (90, 90, 95)),
                (_cylinder(r, h * 0.7, h), (250, 235, 190))]
    if shape == "plant":
        r = min(x, y)
        import trimesh

        leaves = trimesh.creation.icosphere(subdivisions=2, radius=1.0)
        leaves.apply_scale([x, y, h * 0.35])
        leaves.apply_translation([0, 0, h * 0.65])
        return [(_cylinder(r * 0.7, 0, h * 0.3), colour), (leaves, FOLIAGE)]
    if shape == "cylinder":
        return [(_cylinder(min(x, y), 0, h), colour)]
    return [(_box((-x, -y, 0), (x, y, h)), colour)]


def scene_meshes(task: SceneTask, scene: Scene | None) -> list[Part]:
    """The room and every object of ``scene`` (already structurally checked) as coloured meshes."""
    import trimesh

    room = task.room
    t = 0.04
    parts: list[Part] = [(_box((-t, -t, -t), (room.width + t, room.depth + t, 0)), FLOOR),
                         (_box((-t, room.depth, 0), (room.width + t, room.depth + t, room.height)), WALL),
                         (_box((-t, -t, 0), (0, room.depth, room.height)), WALL)]
    if scene is None:
        return parts
    assets: dict[str, Asset] = {a.name: a for a in task.assets}
    boxes = g.world_boxes(assets, scene)
    for o in scene.objects:
        a, box = assets[o.asset], boxes[o.id]
        colour = MATERIALS.get(o.material or a.color or "", (170, 170, 170))
        h = box.z1 - box.z0
        place = trimesh.transformations.concatenate_matrices(
            trimesh.transformations.translation_matrix([box.x, box.y, box.z0]),
            trimesh.transformations.rotation_matrix(math.radians(box.yaw), [0, 0, 1]))
        for mesh, c in shape_parts(a.shape, 2 * box.hw, 2 * box.hd, h, colour):
            mesh.apply_transform(place)
            parts.append((mesh, c))
    return parts


def render_scene(task: SceneTask, scene: Scene | None, path: str | Path, title: str | None = None,
                 size: tuple[int, int] = (640, 480)) -> Path:
    """Draw ``scene`` in its room to a PNG at ``path``."""
    from practicum.render3d import render_png

    parts = scene_meshes(task, scene)
    return render_png([m for m, _ in parts], path, colors=[c for _, c in parts], size=size, title=title)


def render_reply(task: SceneTask, reply: str, path: str | Path, size: tuple[int, int] = (640, 480)) -> Path:
    """Draw the scene of one reply, titled with the task and the reply's score."""
    from practicum.domains.scene.verifier import check, parse_scene, structure_problems

    scene, _ = parse_scene(reply)
    if scene is not None and structure_problems(task, scene):
        scene = None  # cannot be built: draw the empty room
    verdict = check(task, reply)
    title = f"{task.id or 'scene'}: score {verdict.score.value:.2f}" + ("" if scene is not None else " (no buildable scene)")
    return render_scene(task, scene, path, title, size)


def main(argv: list[str] | None = None) -> None:
    from practicum.domains.scene.plugin import load_task

    ap = argparse.ArgumentParser(prog="python -m practicum.domains.scene.render", description="Draw a scene reply to a PNG.")
    ap.add_argument("--task", type=Path, required=True, help="A scene task file (docs/scene.md).")
    ap.add_argument("--answer", type=Path, help="A reply (the scene graph in a ```json block).")
    ap.add_argument("--reference", action="store_true", help="Draw the task's reference scene instead.")
    ap.add_argument("--out", type=Path, required=True, help="The PNG to write.")
    args = ap.parse_args(argv)
    task = load_task(args.task)
    spec = SceneTask.model_validate(task.target)
    if args.reference:
        if spec.reference is None:
            raise SystemExit(f"{args.task}: the task has no reference scene")
        reply = "```json\n" + spec.reference.model_dump_json() + "\n```"
    elif args.answer is not None:
        reply = args.answer.read_text()
    else:
        raise SystemExit("give --answer or --reference")
    print(render_reply(spec, reply, args.out))


if __name__ == "__main__":
    main()
