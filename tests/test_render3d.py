"""The offscreen renderer: real PNGs of real meshes, with hidden surfaces hidden.

Each test renders with no display (nothing here needs one) and reads the PNG back with Pillow.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import trimesh
from PIL import Image

from practicum.render3d import render_png

WHITE = (255, 255, 255)


def pixels(path: Path) -> np.ndarray:
    return np.asarray(Image.open(path).convert("RGB")).astype(int)


def ring_plate(hole: float = 30.0) -> trimesh.Trimesh:
    """A 40 x 40 x 2 mm plate with a round hole through its centre, made with manifold3d."""
    from manifold3d import Manifold

    m = Manifold.cube((40, 40, 2), center=True) - Manifold.cylinder(4, hole / 2, circular_segments=64, center=True)
    mesh = m.to_mesh()
    return trimesh.Trimesh(np.asarray(mesh.vert_properties)[:, :3], np.asarray(mesh.tri_verts), process=False)


def test_a_box_fills_the_middle_and_leaves_the_corners_empty(tmp_path: Path) -> None:
    out = render_png([trimesh.creation.box((20, 20, 20))], tmp_path / "box.png", size=(320, 240))
    img = pixels(out)
    assert img.shape == (240, 320, 3)
    assert tuple(img[120, 160]) != WHITE  # the box covers the centre
    assert tuple(img[2, 318]) == WHITE and tuple(img[120, 2]) == WHITE  # margins are background
    # three visible faces, shaded differently: the top is lighter than the sides
    shades = {tuple(img[y, x]) for x, y in ((160, 60), (120, 150), (200, 150))}
    assert len(shades) >= 2


def test_a_through_hole_shows_the_background_behind_it(tmp_path: Path) -> None:
    """Depth-tested rendering: through a 30 mm hole in a 2 mm plate the white background shows
    at the centre of the picture; a plate without the hole covers it."""
    holed = pixels(render_png([ring_plate()], tmp_path / "holed.png", size=(320, 240)))
    solid = pixels(render_png([trimesh.creation.box((40, 40, 2))], tmp_path / "solid.png", size=(320, 240)))
    centre = (124, 160)  # the plate's centre projects to the middle of the area below the top margin
    assert tuple(holed[centre]) == WHITE
    assert tuple(solid[centre]) != WHITE


def test_the_nearer_mesh_hides_the_farther_one(tmp_path: Path) -> None:
    """A red cube in front of (towards the camera: -Y, +X, above) a larger blue one: the red one is
    drawn where they overlap, whatever their order in the list."""
    far = trimesh.creation.box((30, 30, 30))
    near = trimesh.creation.box((10, 10, 10))
    near.apply_translation([20, -20, 20])
    for order in ((far, near), (near, far)):
        colours = ["#0000ff", "#ff0000"] if order[0] is far else ["#ff0000", "#0000ff"]
        img = pixels(render_png(list(order), tmp_path / "pair.png", colors=colours, size=(320, 240)))
        reds = (img[:, :, 0] > 120) & (img[:, :, 2] < 80)
        blues = (img[:, :, 2] > 120) & (img[:, :, 0] < 80)
        assert reds.sum() > 400 and blues.sum() > 2000


def test_colours_title_and_size_are_honoured(tmp_path: Path) -> None:
    box = trimesh.creation.box((10, 10, 10))
    for colour in ["#00ff00", (0, 255, 0), (0.0, 1.0, 0.0), "lime"]:
        img = pixels(render_png([box], tmp_path / "c.png", colors=[colour], size=(200, 160)))
        g = img[90, 100]
        assert g[1] > 100 and g[0] < 60 and g[2] < 60, colour
    titled = pixels(render_png([box], tmp_path / "t.png", title="a title", size=(200, 160)))
    assert (titled[2:22, 5:60] < 100).any()  # dark text in the top left corner


def test_an_empty_list_is_an_empty_picture(tmp_path: Path) -> None:
    img = pixels(render_png([], tmp_path / "empty.png", size=(64, 48)))
    assert img.shape == (48, 64, 3)
    assert (img[:30] == 255).all()  # the top rows hold neither mesh nor the axis triad


@pytest.mark.parametrize(("kwargs", "message"), [
    ({"colors": ["#ff0000", "#00ff00"]}, "2 colors for 1 meshes"),
    ({"colors": ["no-such-colour"]}, "unknown colour"),
    ({"colors": [(300, 0, 0)]}, "out of range"),
    ({"size": (8, 8)}, "too small"),
    ({"backend": "opengl"}, "unknown backend"),
])
def test_bad_arguments_say_what_is_wrong(tmp_path: Path, kwargs: dict, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        render_png([trimesh.creation.box()], tmp_path / "x.png", **kwargs)


def test_the_matplotlib_backend_draws_the_same_part(tmp_path: Path) -> None:
    out = render_png([ring_plate()], tmp_path / "mpl.png", size=(320, 240), title="plate", backend="matplotlib")
    img = pixels(out)
    assert img.shape == (240, 320, 3)
    assert ((img != 255).any(axis=2)).sum() > 5000  # the plate covers a good part of the picture


def test_rendering_is_deterministic(tmp_path: Path) -> None:
    a = render_png([ring_plate()], tmp_path / "a.png")
    b = render_png([ring_plate()], tmp_path / "b.png")
    assert a.read_bytes() == b.read_bytes()
