"""The geometry domain: tasks, the mesh checks and measurements, partial credit, and programs run
in the real sandbox, hostile ones included.

Host-side tests build parts with the ``cad`` API itself (manifold3d) and judge their STL bytes
exactly as the verifier judges what a program exported; sandbox tests run programs in the
isolated backend through the plugin, the domain's environment and ``practicum verify``.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import struct
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from practicum.config import DomainSection
from practicum.domains import default_context
from practicum.domains.geometry import GeometryOptions, cad, measure, plugin
from practicum.domains.geometry.tasks import (
    FAMILIES,
    TIERS,
    BBox,
    Constraints,
    GeometryTask,
    Volume,
    Wall,
    draw,
    eval_set,
    load_task_file,
    load_tasks,
)
from practicum.domains.geometry.verifier import (
    LIMITS,
    MAX_FILE_BYTES,
    GeometryVerifier,
    extract_program,
    judge_file,
    program_flags,
)
from practicum.domains.plugin import BuildContext
from practicum.errors import TaskError
from practicum.sandbox.namespaced import NsjailSandbox

AVAILABLE, WHY = NsjailSandbox.available()
if not AVAILABLE and os.environ.get("CI") == "true":
    raise RuntimeError(f"CI=true but the isolated sandbox is unavailable: {WHY}")
needs_sandbox = pytest.mark.skipif(not AVAILABLE, reason=f"isolated sandbox unavailable: {WHY}")

PI = np.pi
# the canonical easy task: a 20 mm cube with a 10 mm hole along Z
CUBE_HOLE = Constraints(bbox=BBox(size=(20, 20, 20)), volume=Volume(value=20**3 - PI * 25 * 20), holes=1,
                        symmetry=["x", "y", "z"])


def stl(shape: Any, tmp: Path) -> bytes:
    """The bytes ``cad.export`` writes for a shape."""
    path = tmp / "part.stl"
    cad.export(shape, str(path))
    return path.read_bytes()


def binary_stl(tris: np.ndarray) -> bytes:
    rec = np.zeros(len(tris), dtype=[("n", "<f4", 3), ("v", "<f4", (3, 3)), ("a", "<u2")])
    rec["v"] = tris
    return b"\0" * 80 + struct.pack("<I", len(tris)) + rec.tobytes()


def cube_with_hole(size: tuple[float, float, float] = (20, 20, 20), d: float = 10, depth: float | None = None,
                   dx: float = 0.0) -> Any:
    """A box centred on the origin with a hole along Z (through, or ``depth`` deep from the top)."""
    body = cad.box(*size, center=True)
    if depth is None:
        return body - cad.translate(cad.cylinder(size[2] + 2, d / 2, center=True), dx, 0, 0)
    return body - cad.translate(cad.cylinder(depth + 1, d / 2), dx, 0, size[2] / 2 - depth)


def reference_bytes(task: GeometryTask, tmp: Path) -> bytes:
    """Run a task's reference program on the host (the sandbox tests run them in the sandbox)."""
    assert task.reference is not None
    sys.path.insert(0, str(Path(cad.__file__).parent))
    cwd = os.getcwd()
    os.chdir(tmp)
    try:
        exec(compile(task.reference, "reference", "exec"), {"__name__": "__main__"})
        return (tmp / "part.stl").read_bytes()
    finally:
        os.chdir(cwd)
        sys.path.remove(str(Path(cad.__file__).parent))


# --- tasks --------------------------------------------------------------------------------------

def test_a_seed_gives_more_than_60_distinct_tasks_over_every_family_and_tier() -> None:
    tasks = [draw(0, i) for i in range(120)]
    assert len({t.id for t in tasks}) >= 100
    assert {t.tier for t in tasks} == set(TIERS)
    assert {t.family for t in tasks} == {f.__name__ for fams in FAMILIES.values() for f in fams}
    assert [t.id for t in tasks[:20]] == [draw(0, i).id for i in range(20)]  # a pure function of (seed, index)
    assert [t.id for t in tasks[:20]] != [draw(1, i).id for i in range(20)]


def test_the_held_out_split_never_occurs_in_training() -> None:
    held = eval_set(4321, 30)
    assert len({t.id for t in held}) == 30
    training = {draw(seed, i).id for seed in range(3) for i in range(300)}
    assert not training & {t.id for t in held}
    assert [t.id for t in eval_set(4321, 30)] == [t.id for t in held]


@pytest.mark.parametrize("family", [f for fams in FAMILIES.values() for f in fams], ids=lambda f: f.__name__)
def test_every_familys_reference_program_scores_full_marks(family: Any, tmp_path: Path) -> None:
    for i in range(2):
        name, params, prompt, constraints, reference = family(random.Random(f"test/{i}"))
        task = GeometryTask(prompt=prompt, constraints=constraints, reference=reference)
        v = judge_file(task.constraints, reference_bytes(task, tmp_path))
        assert v.score.value == 1.0, (name, params, v.score.explanation)
        assert v.score.components["all_met"] == 1.0 and v.outcome == "measured"


@pytest.mark.parametrize(("content", "where"), [
    ('{"constraints": {"holes": 1}}', "prompt: Field required"),
    ('{"prompt": "p", "constraints": {}}', "constraints: give at least one of bbox"),
    ('{"prompt": "p", "constraints": {"bbox": {"size": [20, -1, 5]}}}', "constraints.bbox: every size must be positive"),
    ('{"prompt": "p", "constraints": {"bbox": {"size": [20, 5]}}}', "constraints.bbox.size"),
    ('{"prompt": "p", "constraints": {"symmetry": ["w"]}}', "constraints.symmetry.0"),
    ('{"prompt": "p", "constraints": {"holes": -1}}', "constraints.holes"),
    ('{"prompt": "p", "constraints": {"volume": {"value": 5, "tolerance": 1}}}', "constraints.volume.tolerance: Extra inputs"),
    ('{"prompt": "p", "constraint": {"holes": 1}}', "constraint: Extra inputs"),
    ('[1, 2]', "must be a JSON object"),
    ('{"prompt": ', "not valid JSON"),
])
def test_bad_task_files_name_the_file_and_the_field(tmp_path: Path, content: str, where: str) -> None:
    path = tmp_path / "bad.json"
    path.write_text(content)
    with pytest.raises(TaskError) as e:
        plugin.load_task(path)
    assert str(path) in str(e.value) and where in str(e.value)


def test_jsonl_task_files_name_the_line(tmp_path: Path) -> None:
    path = tmp_path / "tasks.jsonl"
    good = {"prompt": "A cube", "constraints": {"bbox": {"size": [10, 10, 10]}}}
    path.write_text(json.dumps(good) + "\n\n" + json.dumps({"prompt": "x", "constraints": {"wall": {}}}) + "\n")
    with pytest.raises(TaskError, match=rf"{path}:3: invalid geometry task: constraints.wall.thickness: Field required"):
        load_tasks(path)
    path.write_text(json.dumps(good) + "\n")
    assert [t.id for t in load_tasks(path)] == ["geometry/tasks/1"]
    assert load_task_file(_write(tmp_path / "one.json", good)).id == "geometry/one"


def _write(path: Path, data: Any) -> Path:
    path.write_text(json.dumps(data))
    return path


# --- reading files --------------------------------------------------------------------------------

def test_binary_and_ascii_stl_read_the_same_triangles(tmp_path: Path) -> None:
    data = stl(cad.box(10, 20, 30), tmp_path)
    tris = measure.parse_stl(data)
    assert tris.shape == (12, 3, 3)
    ascii_text = "solid part\n" + "".join(
        "facet normal 0 0 0\n outer loop\n" + "".join(f"  vertex {x:g} {y:g} {z:g}\n" for x, y, z in t)
        + " endloop\nendfacet\n" for t in tris) + "endsolid part\n"
    assert np.array_equal(measure.parse_stl(ascii_text.encode()), tris)
    assert judge_file(Constraints(bbox=BBox(size=(10, 20, 30)), holes=0), ascii_text.encode()).score.value == 1.0


@pytest.mark.parametrize(("data", "reason"), [
    (b"\x89PNG\r\n\x1a\n" + bytes(200), "not an STL file"),
    (b"solid x\nfacet normal 0 0 1\n outer loop\n vertex 0 0 0\n vertex 1 0 0\n endloop\nendfacet\n", "1 facets but 2 vertices"),
    (b"solid \xff\xfe", "not ASCII"),
    (b"", "not an STL file"),
])
def test_files_that_are_not_stl_score_zero_with_the_reason(data: bytes, reason: str) -> None:
    v = judge_file(CUBE_HOLE, data)
    assert v.score.value == 0.0 and reason in v.score.explanation and v.outcome == "bad_file"


def test_non_finite_too_big_too_many_or_too_few_faces_are_refused(tmp_path: Path) -> None:
    tris = measure.parse_stl(stl(cad.box(10, 10, 10), tmp_path))
    nan = tris.copy()
    nan[3, 1, 2] = np.nan
    assert "NaN or infinite" in judge_file(CUBE_HOLE, binary_stl(nan)).score.explanation
    far = tris * 1e7
    assert "beyond 1 km" in judge_file(CUBE_HOLE, binary_stl(far)).score.explanation
    assert "at least 4" in judge_file(CUBE_HOLE, binary_stl(tris[:3])).score.explanation
    with pytest.raises(measure.MeshError, match="at most 10 are read"):
        measure.parse_stl(binary_stl(tris), max_faces=10)
    many = np.tile(tris, (measure.MAX_FACES // len(tris) + 1, 1, 1))
    assert "faces; at most 50000 are read" in judge_file(CUBE_HOLE, binary_stl(many)).score.explanation
    huge = b"solid " + b" " * (MAX_FILE_BYTES + 1)
    v = judge_file(CUBE_HOLE, huge)
    assert v.score.value == 0 and "larger than 20 MiB" in v.score.explanation


# --- legality -------------------------------------------------------------------------------------

def box_tris(tmp: Path, *size: float, at: tuple[float, float, float] = (0, 0, 0)) -> np.ndarray:
    return measure.parse_stl(stl(cad.translate(cad.box(*size), *at), tmp))


def test_a_mesh_with_a_missing_face_is_not_watertight_and_scores_zero(tmp_path: Path) -> None:
    tris = measure.parse_stl(stl(cube_with_hole(), tmp_path))
    v = judge_file(CUBE_HOLE, binary_stl(tris[1:]))
    assert v.score.value == 0.0 and v.outcome == "invalid_solid"
    assert v.score.components["legal:watertight"] == 0.0 and "not watertight" in v.score.explanation


def test_inside_out_faces_give_a_negative_volume_and_score_zero(tmp_path: Path) -> None:
    tris = box_tris(tmp_path, 20, 20, 20)[:, ::-1]  # every face wound the other way
    v = judge_file(CUBE_HOLE, binary_stl(tris))
    assert v.score.value == 0.0 and v.score.components["legal:positive_volume"] == 0.0
    assert "faces point inward" in v.score.explanation


def test_two_overlapping_boxes_as_one_mesh_intersect_themselves(tmp_path: Path) -> None:
    """Each box is closed, so the pair is watertight and oriented; only the crossing faces tell."""
    tris = np.concatenate([box_tris(tmp_path, 20, 20, 20), box_tris(tmp_path, 20, 20, 20, at=(7, 5, 3))])
    v = judge_file(Constraints(bbox=BBox(size=(27, 25, 23)), holes=None, bodies=None), binary_stl(tris))
    assert v.score.components["legal:watertight"] == 1.0 and v.score.components["legal:oriented"] == 1.0
    assert v.score.components["legal:no_self_intersections"] == 0.0 and v.score.value == 0.0
    assert "intersects itself" in v.score.explanation
    # the same boxes apart are a legal two-piece part
    apart = np.concatenate([box_tris(tmp_path, 20, 20, 20), box_tris(tmp_path, 20, 20, 20, at=(30, 0, 0))])
    v = judge_file(Constraints(bbox=BBox(size=(50, 20, 20)), bodies=2), binary_stl(apart))
    assert v.score.value == 1.0, v.score.explanation


def test_a_zero_area_face_is_degenerate(tmp_path: Path) -> None:
    tris = box_tris(tmp_path, 10, 10, 10)
    a, b = tris[0, 0], tris[0, 1]
    sliver = np.array([[a, (a + b) / 2, b]])
    v = judge_file(Constraints(holes=0), binary_stl(np.concatenate([tris, sliver])))
    assert v.score.value == 0.0 and v.score.components["legal:no_degenerate_faces"] == 0.0


# --- constraints and partial credit ------------------------------------------------------------------

def score_of(shape: Any, constraints: Constraints, tmp: Path) -> Any:
    return judge_file(constraints, stl(shape, tmp))


def test_the_right_part_meets_every_constraint(tmp_path: Path) -> None:
    v = score_of(cube_with_hole(), CUBE_HOLE, tmp_path)
    assert v.score.value == 1.0 and v.facts is not None
    assert v.facts.genus == 1 and v.facts.shells == 1 and v.facts.size == pytest.approx([20, 20, 20])
    assert v.facts.volume == pytest.approx(20**3 - PI * 25 * 20, rel=0.002)


def test_a_box_one_mm_too_short_fails_its_size_and_volume_only(tmp_path: Path) -> None:
    v = score_of(cube_with_hole(size=(20, 20, 19)), CUBE_HOLE, tmp_path)
    c = v.score.components
    assert c["check:bbox"] == 0.0 and c["check:volume"] == 0.0
    assert c["check:holes"] == c["check:bodies"] == c["check:symmetry_z"] == 1.0
    assert v.score.value == pytest.approx(5 / 7) and c["legal"] == 1.0 and c["all_met"] == 0.0
    assert "bbox: measured 20.00 x 20.00 x 19.00, wanted 20 x 20 x 20" in v.score.explanation


def test_a_hole_that_does_not_go_through_has_genus_zero(tmp_path: Path) -> None:
    v = score_of(cube_with_hole(depth=19.6), CUBE_HOLE, tmp_path)
    assert v.facts is not None and v.facts.genus == 0
    c = v.score.components
    assert c["check:holes"] == 0.0 and c["check:bbox"] == c["check:volume"] == c["check:bodies"] == 1.0  # 0.4 mm left
    assert v.score.value <= 6 / 7 and "holes: measured 0 through-hole(s), wanted 1" in v.score.explanation


def test_a_wrong_volume_costs_only_the_volume(tmp_path: Path) -> None:
    v = score_of(cube_with_hole(d=12), CUBE_HOLE, tmp_path)  # 12 mm instead of 10: 4 % more material gone
    assert v.score.components["check:volume"] == 0.0 and v.score.value == pytest.approx(6 / 7)
    assert "volume: measured" in v.score.explanation


def test_an_asymmetric_part_fails_the_symmetry_it_breaks(tmp_path: Path) -> None:
    v = score_of(cube_with_hole(dx=3), CUBE_HOLE, tmp_path)
    c = v.score.components
    assert c["check:symmetry_x"] == 0.0 and c["check:symmetry_y"] == 1.0 and c["check:symmetry_z"] == 1.0
    assert v.facts is not None and v.facts.mirror_mismatch["x"] > 0.05
    assert v.score.value == pytest.approx(6 / 7)


def test_wall_thickness_is_measured_by_inward_rays(tmp_path: Path) -> None:
    wall = Constraints(bbox=BBox(size=(40, 30, 20)), wall=Wall(thickness=2.0), symmetry=["x", "y"])
    shell = cad.box(40, 30, 20) - cad.translate(cad.box(36, 26, 20), 2, 2, 2)
    v = score_of(shell, wall, tmp_path)
    assert v.score.value == 1.0 and v.facts is not None and v.facts.min_wall == pytest.approx(2.0, abs=0.01)
    thin_floor = cad.box(40, 30, 20) - cad.translate(cad.box(36, 26, 20), 2, 2, 1)
    v = score_of(thin_floor, wall, tmp_path)
    assert v.score.components["check:wall"] == 0.0 and v.facts is not None
    assert v.facts.min_wall == pytest.approx(1.0, abs=0.01)
    solid = cad.box(40, 30, 20)
    assert score_of(solid, wall, tmp_path).score.components["check:wall"] == 0.0  # 20 mm is not a 2 mm wall


def test_two_pieces_fail_a_one_piece_task(tmp_path: Path) -> None:
    parts = cad.box(10, 20, 20) + cad.translate(cad.box(9, 20, 20), 11, 0, 0)
    v = score_of(parts, Constraints(bbox=BBox(size=(20, 20, 20)), holes=0), tmp_path)
    assert v.score.components["check:bodies"] == 0.0 and v.facts is not None and v.facts.shells == 2


# --- the reply ------------------------------------------------------------------------------------

def test_the_program_is_the_last_block_that_exports() -> None:
    reply = "Plan:\n```python\nx = 1\n```\nThen:\n```python\nfrom cad import *\nexport(box(1, 1, 1))\n```\nDone."
    assert extract_program(reply) == "from cad import *\nexport(box(1, 1, 1))\n"
    assert extract_program("from cad import *\nexport(box(1, 2, 3))") == "from cad import *\nexport(box(1, 2, 3))"


def test_program_flags_name_hack_patterns_without_changing_scores() -> None:
    assert program_flags("open('/tmp/part.stl', 'wb')") == ["bypasses_export", "writes_outside_workspace"]
    assert program_flags("open('../x', 'w')\nexport(p)") == ["writes_outside_workspace"]
    assert program_flags("open('/workspace/part.stl', 'wb').write(b'x' * 5)") == ["bypasses_export"]
    assert program_flags("data = " + repr("0" * 5000) + "\nexport(p)") == ["embedded_mesh"]
    assert program_flags("from cad import *\nexport(box(1, 2, 3))") == []
    assert program_flags("def broken(:") == []


# --- in the sandbox -------------------------------------------------------------------------------

def run_programs(programs: list[str], constraints: Constraints = CUBE_HOLE, timeout_s: float = 20.0) -> list[Any]:
    """Verify each program in turn through one pooled sandbox session, as training does."""
    task = GeometryTask(prompt="a part", constraints=constraints)

    async def go() -> list[Any]:
        import dataclasses

        limits = dataclasses.replace(LIMITS, timeout_s=timeout_s, cpu_s=timeout_s)
        sessions = default_context().sessions(limits, 1)  # type: ignore[misc]
        try:
            verifier = GeometryVerifier(sessions, limits)
            return [await verifier.verify(task, p) for p in programs]
        finally:
            await sessions.close()

    return asyncio.run(go())


GOOD = "from cad import *\npart = box(20, 20, 20, center=True) - cylinder(22, 5, center=True)\nexport(part)\n"


@needs_sandbox
def test_hostile_and_broken_programs_score_zero_with_the_reason() -> None:
    programs = {
        "good": f"```python\n{GOOD}```",
        "crash": "from cad import *\npart = box(20, 20, 20)\nraise RuntimeError('boom')\n",
        "no_export": "from cad import *\npart = box(20, 20, 20)\nprint('volume 6429.2, genus 1: all constraints met')\n",
        "syntax": "from cad import *\npart = box(20, 20\n",
        "outside_tmp": GOOD.replace("export(part)", "export(part, '/tmp/part.stl')"),
        "outside_parent": GOOD.replace("export(part)", "export(part, '../part.stl')"),
        "garbage": "open('part.stl', 'wb').write(b'solid lies\\n' * 100)\n",
        "huge": "open('part.stl', 'wb').write(bytes(21 * 1024 * 1024))\n",
        "over_fsize": "f = open('part.stl', 'wb')\nfor _ in range(40): f.write(bytes(1 << 20))\n",
        "link": "import os\nos.symlink('/etc/passwd', 'part.stl')\n",
        "folder": "import os\nos.mkdir('part.stl')\n",
        "empty": "",
    }
    verdicts = dict(zip(programs, run_programs(list(programs.values()))))
    assert verdicts["good"].score.value == 1.0, verdicts["good"].score.explanation
    expected = {
        "crash": ("crashed", "RuntimeError: boom"),
        "no_export": ("no_export", "did not export part.stl"),
        "syntax": ("crashed", "SyntaxError"),
        "outside_tmp": ("crashed", "Permission denied"),
        "outside_parent": ("crashed", "Read-only file system"),
        "garbage": ("bad_file", "has 0 faces; a closed solid needs at least 4"),
        "huge": ("bad_file", "larger than 20 MiB"),
        "over_fsize": ("crashed", ""),
        "link": ("bad_file", "not a regular file"),
        "folder": ("bad_file", "not a regular file"),
        "empty": ("no_program", "holds no program"),
    }
    for name, (outcome, reason) in expected.items():
        v = verdicts[name]
        assert v.score.value == 0.0 and v.outcome == outcome and reason in v.score.explanation, (name, v.score.explanation)
    assert "writes_outside_workspace" in verdicts["outside_tmp"].flags


@needs_sandbox
def test_a_program_that_never_ends_is_stopped_at_the_timeout() -> None:
    [v] = run_programs(["from cad import *\nwhile True:\n    pass\n"], timeout_s=2.0)
    assert v.score.value == 0.0 and v.outcome == "timeout" and "limit of 2 s" in v.score.explanation


@needs_sandbox
def test_a_premade_mesh_for_another_shape_gets_only_what_it_meets(tmp_path: Path) -> None:
    """A program may write any mesh; it is judged like any other: a plain 20 mm cube written as
    literal bytes has the right size and symmetry, not the hole or the volume."""
    blob = stl(cad.box(20, 20, 20), tmp_path)
    [v] = run_programs([f"open('part.stl', 'wb').write({blob!r})\n"])
    assert v.score.components["check:holes"] == 0.0 and v.score.components["check:volume"] == 0.0
    assert v.score.components["check:bbox"] == 1.0 and v.score.value == pytest.approx(5 / 7)
    assert "bypasses_export" in v.flags


@needs_sandbox
def test_the_plugin_scores_each_tiers_reference_program_one_in_the_sandbox(tmp_path: Path) -> None:
    tasks = [t for t in (draw(0, i) for i in range(30))]
    picked = [next(t for t in tasks if t.tier == tier) for tier in TIERS]
    for spec in picked:
        path = _write(tmp_path / "task.json", spec.model_dump(exclude_none=True))
        task = plugin.load_task(path)
        v = asyncio.run(plugin.verify(task, task.metadata["reference"], BuildContext()))
        assert v.score.value == 1.0, (spec.id, v.score.explanation)


@needs_sandbox
def test_an_episode_is_scored_and_its_part_rendered(tmp_path: Path) -> None:
    from PIL import Image

    section = DomainSection(name="geo", env="geometry", eval_size=2)
    domain = plugin.build(section, GeometryOptions(render_dir=str(tmp_path / "renders")),
                          BuildContext(seed=3, base_dir=tmp_path, home=tmp_path))

    async def episode() -> Any:
        try:
            task = domain.source.eval_tasks()[0]
            env = domain.make_env()
            obs = await env.reset(task)
            assert "export(part)" in obs.messages[0].content and "Your part is checked for" in obs.messages[-1].content
            return await env.step(task.metadata["reference"])
        finally:
            await domain.close()

    assert len(domain.source.eval_tasks()) == 2
    obs = asyncio.run(episode())
    assert obs.done and obs.score.value == 1.0
    assert obs.info["geometry"]["outcome"] == "measured" and obs.info["flags"] == []
    png = Path(obs.info["render"])
    assert png.parent == tmp_path / "renders" and Image.open(png).size == (640, 480)


@needs_sandbox
def test_practicum_verify_geometry_prints_the_verdict(tmp_path: Path) -> None:
    from practicum.cli import app

    task = _write(tmp_path / "task.json", {"prompt": "A 20 mm cube with a 10 mm hole along Z.",
                                           "constraints": json.loads(CUBE_HOLE.model_dump_json())})
    good = tmp_path / "good.txt"
    good.write_text(f"Here it is:\n```python\n{GOOD}```\n")
    short = tmp_path / "short.py"
    short.write_text(GOOD.replace("box(20, 20, 20", "box(20, 20, 19"))
    out = CliRunner().invoke(app, ["verify", "geometry", "--task", str(task), "--answer", str(good), "--answer",
                                   str(short), "--json"])
    assert out.exit_code == 0, out.output
    first, second = json.loads(out.output)
    assert first["value"] == 1.0 and first["components"]["all_met"] == 1.0
    assert second["value"] == pytest.approx(5 / 7) and "bbox: measured" in second["explanation"]
    bad = _write(tmp_path / "bad.json", {"prompt": "x", "constraints": {"bbox": {"size": [1, 2]}}})
    out = CliRunner().invoke(app, ["verify", "geometry", "--task", str(bad), "--answer", str(good)])
    assert out.exit_code == 2 and "bad.json" in out.output and "constraints.bbox.size" in out.output


@needs_sandbox
def test_sections_choose_the_held_out_set_and_task_files_can_be_the_source(tmp_path: Path) -> None:
    ctx = BuildContext(seed=0, base_dir=tmp_path, home=tmp_path)
    a = plugin.build(DomainSection(name="g", env="geometry", eval_size=3, eval_seed=1), GeometryOptions(), ctx)
    b = plugin.build(DomainSection(name="g", env="geometry", eval_size=3, eval_seed=2), GeometryOptions(), ctx)
    assert len(a.source.eval_tasks()) == 3 and [t.id for t in a.source.eval_tasks()] != [t.id for t in b.source.eval_tasks()]
    lines = [json.dumps({"prompt": f"A {n} mm cube.", "constraints": {"bbox": {"size": [n, n, n]}}}) for n in range(10, 15)]
    (tmp_path / "cubes.jsonl").write_text("\n".join(lines) + "\n")
    options = GeometryOptions.model_validate({"source": {"kind": "tasks", "path": "cubes.jsonl", "eval_fraction": 0.4}})
    files = plugin.build(DomainSection(name="g", env="geometry"), options, ctx)
    assert [t.id for t in files.source.eval_tasks()] == ["geometry/cubes/1", "geometry/cubes/2"]
    assert {files.source.train_task(i).id for i in range(6)} == {f"geometry/cubes/{n}" for n in (3, 4, 5)}
