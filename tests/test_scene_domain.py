"""The scene domain: reference scenes score 1; each kind of broken scene is rejected or loses the
credit docs/scene.md says it does; the geometry is exact against hand-computed numbers; task files
fail naming file and field; the documented `practicum verify scene` example gives the documented
output; generated tasks are many, seeded and held out; scenes render to PNGs that show them."""

from __future__ import annotations

import asyncio
import copy
import json
import math
import os
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from practicum.cli import app
from practicum.config import DomainSection
from practicum.domains.plugin import BuildContext
from practicum.domains.scene import SceneOptions, SceneTask, load_task, plugin
from practicum.domains.scene import geometry as g
from practicum.domains.scene.env import prompt_text, to_task
from practicum.domains.scene.generators import TIERS, generate
from practicum.domains.scene.schema import Asset, Scene, SceneObject
from practicum.domains.scene.verifier import check, parse_scene
from practicum.errors import TaskError

REPO = Path(__file__).resolve().parents[1]
DOC = REPO / "docs" / "scene.md"
runner = CliRunner()

# The task file of docs/scene.md (a test below checks that the two agree).
TASK = {
    "id": "living-room",
    "room": {"width": 4.0, "depth": 3.0, "height": 2.6},
    "assets": [
        {"name": "table", "size": [1.2, 0.8, 0.75], "shape": "table", "color": "wood"},
        {"name": "chair", "size": [0.45, 0.5, 0.9], "shape": "chair", "color": "dark_wood"},
        {"name": "lamp", "size": [0.25, 0.25, 0.45], "shape": "lamp", "color": "ceramic"},
        {"name": "sofa", "size": [2.0, 0.9, 0.85], "shape": "sofa", "color": "fabric_grey"},
        {"name": "book", "size": [0.15, 0.22, 0.04]},
    ],
    "request": "A table with a lamp on it, two chairs facing the table, and a blue sofa against the back wall, right of the table.",
    "constraints": [
        {"kind": "object", "id": "table_1", "asset": "table"},
        {"kind": "object", "id": "lamp_1", "asset": "lamp"},
        {"kind": "object", "id": "sofa_1", "asset": "sofa"},
        {"kind": "count", "asset": "chair", "min": 2, "max": 2},
        {"kind": "on_top_of", "a": "lamp_1", "b": "table_1"},
        {"kind": "facing", "a": "all:chair", "b": "table_1"},
        {"kind": "near", "a": "all:chair", "b": "table_1", "d": 1.0},
        {"kind": "against_wall", "a": "sofa_1", "wall": "back"},
        {"kind": "left_of", "a": "table_1", "b": "sofa_1"},
        {"kind": "material", "a": "sofa_1", "material": "fabric_blue"},
        {"kind": "distance", "a": "lamp_1", "b": "sofa_1", "min": 2.0, "max": 2.6},
    ],
}
# Its answer: the table turned 90 degrees, the lamp and both chairs in the table's frame.
ANSWER = {"objects": [
    {"id": "table_1", "asset": "table", "position": [1.1, 1.0, 0], "rotation": 90},
    {"id": "lamp_1", "asset": "lamp", "parent": "table_1", "position": [0, 0.3, 0.75]},
    {"id": "chair_1", "asset": "chair", "parent": "table_1", "position": [0, -0.77, 0], "rotation": 180},
    {"id": "chair_2", "asset": "chair", "parent": "table_1", "position": [0, 0.77, 0]},
    {"id": "sofa_1", "asset": "sofa", "position": [2.6, 2.54, 0], "material": "fabric_blue"},
]}


def spec(task: dict | None = None) -> SceneTask:
    return SceneTask.model_validate(task or TASK)


def reply(scene: dict, prose: str = "Here is the layout:") -> str:
    return f"{prose}\n```json\n{json.dumps(scene)}\n```\nDone."


def edited(**changes: dict) -> dict:
    """ANSWER with some objects' fields changed (by id); a value of None removes the object."""
    scene = copy.deepcopy(ANSWER)
    out = []
    for o in scene["objects"]:
        change = changes.get(o["id"], {})
        if change is None:
            continue
        out.append({**o, **change})
    return {"objects": out}


def verdict(scene: dict | str, task: dict | None = None):  # -> Verdict
    return check(spec(task), scene if isinstance(scene, str) else reply(scene))


# --- the reference and the documented example -----------------------------------------------------

def test_the_documented_answer_gets_full_marks_and_its_geometry_is_where_the_doc_says():
    v = verdict(ANSWER)
    assert v.score.value == 1.0, v.score.explanation
    assert v.score.components == {"valid": 1.0, "physical": 1.0, "constraints": 1.0}
    boxes = g.world_boxes({a.name: a for a in spec().assets}, Scene.model_validate(ANSWER))
    # table turned 90: its 1.2 m width now runs along y
    assert boxes["table_1"].aabb == pytest.approx((0.7, 0.4, 1.5, 1.6))
    # local (0, 0.3) in a frame turned 90 degrees is world (-0.3, 0): the lamp is at (0.8, 1.0), on the top
    assert (boxes["lamp_1"].x, boxes["lamp_1"].y, boxes["lamp_1"].z0) == pytest.approx((0.8, 1.0, 0.75))
    # chair_1: local (0, -0.77) -> world (+0.77, 0); yaw 180 + 90 = 270, so it faces -x, at the table
    c1 = boxes["chair_1"]
    assert (c1.x, c1.y, c1.yaw) == pytest.approx((1.87, 1.0, 270.0))
    assert c1.front == pytest.approx((-1.0, 0.0), abs=1e-12)
    assert g.facing_angle(c1, boxes["table_1"]) == pytest.approx(0.0, abs=1e-9)


@pytest.mark.parametrize("tier", TIERS)
def test_generated_reference_scenes_score_one_through_the_plugin(tier):
    for seed in range(12):
        t = generate(tier, seed)
        rec = to_task(t, "scene", [])
        v = asyncio.run(plugin.verify(rec, rec.metadata["reference"], BuildContext()))
        assert v.score.value == 1.0, (t.id, v.score.explanation)
        assert t.tier == tier and t.reference is not None


def test_tiers_grow_in_objects_constraints_and_tightness():
    stats = {}
    for tier in TIERS:
        tasks = [generate(tier, s) for s in range(10)]
        objects = [len(t.reference.objects) for t in tasks]
        cons = [len(t.constraints) for t in tasks]
        cover = [sum(4 * b.hw * b.hd for b in g.world_boxes({a.name: a for a in t.assets}, t.reference).values()
                     if b.z0 < 0.01) / (t.room.width * t.room.depth) for t in tasks]
        parents = [max(_depth(t.reference, o.id) for o in t.reference.objects) for t in tasks]
        stats[tier] = (max(objects), min(objects), sum(cons) / 10, sum(cover) / 10, max(parents))
    assert stats["easy"][0] <= 2
    assert stats["hard"][1] >= 10 and stats["hard"][4] >= 2  # nested parents: a cup on a tray on a table
    assert stats["easy"][2] < stats["medium"][2] < stats["hard"][2]
    assert stats["hard"][3] > 1.5 * stats["medium"][3] > 0  # a tighter room


def _depth(scene: Scene, oid: str) -> int:
    parents = {o.id: o.parent for o in scene.objects}
    n = 0
    while parents[oid] is not None:
        oid, n = parents[oid], n + 1
    return n


def test_prompts_stay_within_two_thousand_tokens():
    longest = max(len(prompt_text(generate("hard", s))) for s in range(20))
    assert longest / 4 < 2000  # characters / 4, the project's token estimate


# --- what is rejected outright (structure: score 0) -------------------------------------------------

@pytest.mark.parametrize("scene, why", [
    (edited(chair_2={"asset": "stool"}), "chair_2: asset 'stool' is not in the library"),
    (edited(chair_2={"id": "chair_1"}), "duplicate id 'chair_1'"),
    (edited(table_1={"parent": "lamp_1"}), "parent cycle: table_1 -> lamp_1 -> table_1"),
    (edited(lamp_1={"parent": "desk_9"}), "lamp_1: parent 'desk_9' is not an object of the scene"),
    (edited(lamp_1={"parent": "lamp_1"}), "parent cycle: lamp_1 -> lamp_1"),
    (edited(sofa_1={"scale": 0}), "sofa_1: scale [0.0, 0.0, 0.0] is outside [0.5, 2]"),
    (edited(sofa_1={"scale": [1, 0, 1]}), "sofa_1: scale [1.0, 0.0, 1.0] is outside"),
    (edited(sofa_1={"scale": 0.1}), "is outside [0.5, 2]"),  # no shrinking a sofa to fit
    (edited(sofa_1={"material": "gold"}), "sofa_1: material 'gold' is not one of the task's"),
])
def test_a_scene_that_cannot_be_built_scores_zero_and_says_why(scene, why):
    v = verdict(scene)
    assert v.score.value == 0.0 and v.score.components["valid"] == 0.0
    assert why in v.score.explanation


def test_nan_and_infinite_numbers_are_invalid_transforms():
    text = reply(ANSWER).replace('"position": [2.6, 2.54, 0]', '"position": [2.6, 2.54, 0], "scale": NaN')
    assert "NaN" in text
    v = verdict(text)
    assert v.score.value == 0.0 and "sofa_1: scale [nan, nan, nan] is outside" in v.score.explanation
    v = verdict(reply(ANSWER).replace('"rotation": 90', '"rotation": Infinity'))
    assert v.score.value == 0.0 and "table_1: position or rotation is not finite" in v.score.explanation


@pytest.mark.parametrize("text, why", [
    ("I would put the sofa by the back wall.", "no JSON found"),
    ('```json\n{"objects": [{"id": "a", "asset": "sofa", "position": [1, 1, 0],}]}\n```', "not valid JSON"),
    ('```json\n{"objects": [{"id": "a", "asset": "sofa"}]}\n```', "objects.0.position: Field required"),
    ('```json\n{"objects": [{"id": "a", "asset": "sofa", "position": ["1", 1, 0]}]}\n```', "objects.0.position.0: Input should be a valid number"),
    ('```json\n{"objects": [{"id": "a", "asset": "sofa", "position": [1, 1]}]}\n```', "objects.0.position.2: Field required"),
    ('```json\n{"objects": [{"id": "a", "asset": "sofa", "position": [1, 1, 0], "colour": "red"}]}\n```', "objects.0.colour: Extra inputs are not permitted"),
    ('```json\n[{"id": "a", "asset": "sofa", "position": [1, 1, 0]}]\n```', "not a scene graph"),
    ('```json\n{"objects": []}\n```', "objects: List should have at least 1 item"),
])
def test_a_reply_that_is_not_a_scene_graph_scores_zero_and_says_why(text, why):
    v = verdict(text)
    assert v.score.value == 0.0
    assert why in v.score.explanation


def test_prose_around_the_json_is_ignored_but_the_json_is_read_strictly():
    assert verdict(reply(ANSWER, prose="Thinking... the table goes left.")).score.value == 1.0
    assert verdict(f"<answer>{json.dumps(ANSWER)}</answer>").score.value == 1.0
    assert verdict(json.dumps(ANSWER)).score.value == 1.0  # a bare JSON reply
    assert verdict("```\n" + json.dumps(ANSWER) + "\n```").score.value == 1.0  # a fence without a language
    assert verdict("```json " + json.dumps(ANSWER) + "```").score.value == 1.0  # a fence on one line
    assert verdict("```python\nprint(1)\n```\n" + reply(ANSWER)).score.value == 1.0  # other languages' blocks skipped
    # the last block counts: a draft, then the answer
    draft = reply(edited(sofa_1={"asset": "nope"}))
    assert verdict(draft + "\nCorrected:\n" + reply(ANSWER)).score.value == 1.0
    assert parse_scene("```json\n{'objects': []}\n```")[0] is None  # Python, not JSON


# --- partial credit (physics and constraints) -------------------------------------------------------

def test_an_object_floating_in_the_air_loses_its_share_of_physics():
    v = verdict(edited(lamp_1={"position": [0, 0.3, 0.9]}))  # 15 cm above the table top
    assert v.score.components["physical"] == pytest.approx(4 / 5)
    assert v.score.components["constraints"] == pytest.approx(10 / 11)  # and it is no longer on the table
    assert v.score.value == pytest.approx(4 / 5 * 10 / 11)
    assert "lamp_1: floats (bottom at z=0.900" in v.score.explanation
    # within the 1 cm contact tolerance it rests
    assert verdict(edited(lamp_1={"position": [0, 0.3, 0.758]})).score.value == 1.0
    # on the floor is resting too; centred beyond the table's edge it is not on the table
    off = verdict(edited(lamp_1={"position": [0, 0.75, 0.75]}))
    assert "lamp_1: floats" in off.score.explanation


def test_two_interpenetrating_objects_both_lose_their_share():
    v = verdict(edited(chair_1={"position": [0, -0.5, 0]}))  # pushed into the table's box
    assert v.score.components["physical"] == pytest.approx(3 / 5)
    assert "chair_1: interpenetrates table_1" in v.score.explanation
    assert "table_1: interpenetrates chair_1" in v.score.explanation
    assert v.score.value == pytest.approx(3 / 5)  # the constraints still hold
    # touching is not interpenetrating: the chair's edge on the table's edge
    touching = verdict(edited(chair_1={"position": [0, -0.65, 0]}))
    assert touching.score.components["physical"] == 1.0


def test_an_object_outside_the_room_loses_its_share():
    v = verdict(edited(sofa_1={"position": [2.6, 2.7, 0]}))  # its back 15 cm through the back wall
    assert v.score.components["physical"] == pytest.approx(4 / 5)
    assert "sofa_1: outside the room" in v.score.explanation
    below = verdict(edited(sofa_1={"position": [2.6, 2.54, -0.2]}))
    assert "sofa_1: floats (bottom at z=-0.200" in below.score.explanation
    assert "), outside the room (x 1.60..3.60, y 2.09..2.99, z -0.20..0.65)" in below.score.explanation


def test_a_swapped_left_of_costs_one_constraint():
    swapped = copy.deepcopy(TASK)
    swapped["constraints"][8] = {"kind": "left_of", "a": "sofa_1", "b": "table_1"}
    v = verdict(ANSWER, swapped)
    assert v.score.components == {"valid": 1.0, "physical": 1.0, "constraints": pytest.approx(10 / 11)}
    assert "Unmet: `sofa_1` is left of `table_1`." in v.score.explanation
    # and the answer that swaps them instead: the sofa on the left, the table on the right
    moved = edited(table_1={"position": [2.9, 1.0, 0]}, sofa_1={"position": [1.05, 2.54, 0]})
    assert "Unmet: `table_1` is left of `sofa_1`." in verdict(moved).score.explanation


def test_a_wrong_count_costs_one_constraint():
    v = verdict(edited(chair_2=None))
    assert v.score.value == pytest.approx(10 / 11)
    assert "Place exactly 2 chair object(s)" in v.score.explanation
    assert verdict(edited(chair_1=None, chair_2=None)).score.value == pytest.approx(8 / 11)  # count, facing, near


def test_each_relation_kind_against_hand_placed_boxes():
    t = spec()
    assets = {a.name: a for a in t.assets}
    scene = Scene.model_validate({"objects": [
        {"id": "a", "asset": "book", "position": [1.0, 1.0, 0]},
        {"id": "b", "asset": "book", "position": [2.0, 1.0, 0]},  # right of a, 1 m between centres
        {"id": "c", "asset": "book", "position": [1.0, 2.0, 0], "rotation": 180},  # behind a, facing +y
        {"id": "d", "asset": "book", "position": [1.5, 1.5, 0], "rotation": 45},  # front (0.71, -0.71): at b
    ]})
    boxes = g.world_boxes(assets, scene)
    from practicum.domains.scene.schema import DistanceC, NearC, RelationC
    from practicum.domains.scene.verifier import holds

    def rel(kind, a, b):
        return holds(RelationC(kind=kind, a=a, b=b), t, boxes)

    assert rel("left_of", "a", "b") and rel("right_of", "b", "a") and not rel("left_of", "b", "a")
    assert rel("in_front_of", "a", "c") and rel("behind", "c", "a") and not rel("behind", "a", "c")
    assert not rel("left_of", "a", "c")  # same x: neither is left of the other
    assert g.facing_angle(boxes["d"], boxes["b"]) == pytest.approx(0.0, abs=1e-6)
    assert g.facing_angle(boxes["d"], boxes["a"]) == pytest.approx(90.0)
    assert g.facing_angle(boxes["c"], boxes["a"]) == pytest.approx(180.0)  # c faces +y, away from a
    assert rel("facing", "d", "b") and not rel("facing", "d", "a") and not rel("facing", "a", "b")
    assert holds(NearC(kind="near", a="a", b="b", d=1.0), t, boxes)
    assert not holds(NearC(kind="near", a="a", b="b", d=0.99), t, boxes)
    assert holds(DistanceC(kind="distance", a="a", b="c", min=0.9, max=1.1), t, boxes)


# --- exact geometry -----------------------------------------------------------------------------------

def test_overlap_of_turned_boxes_matches_hand_computed_areas():
    a = g.Box("a", "cube", 0, 0, 0, 1, 0.5, 0.5, 0)
    b = g.Box("b", "cube", 0, 0, 0, 1, 0.5, 0.5, 45)
    assert g.footprint_overlap(a, b) == pytest.approx(2 * (math.sqrt(2) - 1))  # the regular octagon
    shifted = g.Box("c", "cube", 0.5, 0.25, 0, 1, 0.5, 0.5, 0)
    assert g.footprint_overlap(a, shifted) == pytest.approx(0.5 * 0.75)
    assert g.footprint_overlap(a, g.Box("d", "cube", 1.0, 0, 0, 1, 0.5, 0.5, 0)) == 0.0  # sharing an edge
    # interpenetration: height overlap less the 1 cm contact slack
    high = g.Box("e", "cube", 0.5, 0.25, 0.6, 1.6, 0.5, 0.5, 0)
    assert g.interpenetration(a, high, 0.01) == pytest.approx(0.375 * 0.39)


def test_parent_frames_compose_down_a_chain_of_turned_parents():
    assets = {"slab": Asset(name="slab", size=(2.0, 1.0, 0.5)), "cup": Asset(name="cup", size=(0.1, 0.1, 0.1))}
    scene = Scene(objects=[
        SceneObject(id="base", asset="slab", position=(3, 2, 0), rotation=90),
        SceneObject(id="mid", asset="slab", parent="base", position=(0.5, 0, 0.5), rotation=90, scale=0.5),
        SceneObject(id="top", asset="cup", parent="mid", position=(0.2, 0, 0.25)),
    ])
    b = g.world_boxes(assets, scene)
    # mid: (0.5, 0) turned 90 -> (0, 0.5): world (3, 2.5, 0.5), yaw 180; its scale halves only its own box
    assert (b["mid"].x, b["mid"].y, b["mid"].z0, b["mid"].z1, b["mid"].yaw) == pytest.approx((3, 2.5, 0.5, 0.75, 180))
    # top: (0.2, 0) turned 180 -> (-0.2, 0): world (2.8, 2.5, 0.75); the parent's scale does not reach it
    assert (b["top"].x, b["top"].y, b["top"].z0) == pytest.approx((2.8, 2.5, 0.75))


# --- task files -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("change, message", [
    (lambda t: t.pop("room"), "room: Field required"),
    (lambda t: t["assets"][0].update(size=[1.2, -0.8, 0.75]), "assets.0.size: size [1.2, -0.8, 0.75] must be three finite lengths"),
    (lambda t: t["assets"][1].update(name="Chair"), "assets.1.name: asset name 'Chair'"),
    (lambda t: t["assets"][0].update(shape="teapot"), "assets.0.shape: Input should be"),
    (lambda t: t["constraints"][4].update(a="lamp_9"), "constraints.4.a: object 'lamp_9' is not declared"),
    (lambda t: t["constraints"][3].update(asset="stool"), "constraints.3.asset: asset 'stool' is not in the library"),
    (lambda t: t["constraints"][5].update(b="all:table"), "constraints.5.b: 'all:' selects only"),
    (lambda t: t["constraints"][9].update(material="gold"), "constraints.9.material: 'gold' is not among"),
    (lambda t: t["constraints"][0].update(kind="beside"), "constraints.0: Input tag 'beside' found using 'kind' does not match"),
    (lambda t: t.update(colour="red"), "colour: Extra inputs are not permitted"),
])
def test_a_bad_task_file_names_the_file_and_the_field(tmp_path, change, message):
    task = copy.deepcopy(TASK)
    change(task)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(task))
    with pytest.raises(TaskError) as e:
        load_task(path)
    assert str(path) in str(e.value) and message in str(e.value), str(e.value)


def test_unreadable_or_non_object_task_files_fail_clearly(tmp_path):
    (tmp_path / "a.json").write_text("{room: 1")
    with pytest.raises(TaskError, match=r"a.json: not valid JSON"):
        load_task(tmp_path / "a.json")
    (tmp_path / "b.json").write_text("[1, 2]")
    with pytest.raises(TaskError, match=r"b.json: a scene task must be a JSON object, got list"):
        load_task(tmp_path / "b.json")
    with pytest.raises(TaskError, match="cannot read task file"):
        load_task(tmp_path / "missing.json")


def _doc_blocks() -> list[str]:
    return re.findall(r"```(?:json|bash|text)\n(.*?)```", DOC.read_text(), re.DOTALL)


def test_the_documented_task_and_answer_are_the_ones_tested_here():
    blocks = [json.loads(b) for b in re.findall(r"```json\n(.*?)```", DOC.read_text(), re.DOTALL)
              if b.lstrip().startswith("{")]
    assert TASK in blocks, "docs/scene.md's task file differs from TASK"
    assert ANSWER in blocks, "docs/scene.md's answer differs from ANSWER"


def test_practicum_verify_scene_prints_the_documented_json(tmp_path):
    (tmp_path / "task.json").write_text(json.dumps(TASK, indent=1))
    (tmp_path / "answer.txt").write_text(reply(ANSWER))
    (tmp_path / "floating.txt").write_text(reply(edited(lamp_1={"position": [0, 0.3, 0.9]})))
    out = runner.invoke(app, ["verify", "scene", "--task", str(tmp_path / "task.json"), "--answer",
                              str(tmp_path / "answer.txt"), "--json"])
    assert out.exit_code == 0, out.output
    got = json.loads(out.output)
    assert got["value"] == 1.0 and got["components"] == {"valid": 1.0, "physical": 1.0, "constraints": 1.0}
    assert got["explanation"] in DOC.read_text()  # the doc shows this very output
    two = runner.invoke(app, ["verify", "scene", "--task", str(tmp_path / "task.json"), "--answer",
                              str(tmp_path / "answer.txt"), "--answer", str(tmp_path / "floating.txt"), "--json"])
    values = [r["value"] for r in json.loads(two.output)]
    assert values == [1.0, pytest.approx(4 / 5 * 10 / 11)]
    (tmp_path / "bad.json").write_text(json.dumps({**TASK, "room": {"width": -1, "depth": 3, "height": 2}}))
    bad = runner.invoke(app, ["verify", "scene", "--task", str(tmp_path / "bad.json"), "--answer", str(tmp_path / "answer.txt")])
    assert bad.exit_code == 2 and "room.width: Input should be greater than 0" in bad.output


# --- the domain: sources, held-out split, envs commands ---------------------------------------------------

def test_held_out_tasks_come_from_the_sections_eval_fields_and_never_occur_in_training():
    section = DomainSection(name="sc", env="scene", eval_size=12, eval_seed=7)
    domain = plugin.build(section, SceneOptions(), BuildContext(seed=1))
    held = domain.source.eval_tasks()
    assert len(held) == 12 and [t.metadata["tier"] for t in held[:3]] == ["easy", "medium", "hard"]
    again = plugin.build(section, SceneOptions(), BuildContext(seed=1)).source
    assert [t.model_dump() for t in again.eval_tasks()] == [t.model_dump() for t in held]
    prompts = {t.prompt[-1].content for t in held}
    train = [domain.source.train_task(i) for i in range(60)]
    assert not prompts & {t.prompt[-1].content for t in train}
    assert len({t.prompt[-1].content for t in train}) == 60
    default = plugin.build(DomainSection(name="sc", env="scene"), SceneOptions(tiers=["easy"]), BuildContext(seed=1))
    tasks = default.source.eval_tasks()
    assert len(tasks) == 40 and {t.metadata["tier"] for t in tasks} == {"easy"}
    assert len({t.prompt[-1].content for t in tasks}) == 40  # 40 distinct held-out tasks


def test_an_episode_is_scored_by_the_environment_as_by_verify():
    domain = plugin.build(DomainSection(name="sc", env="scene"), SceneOptions(), BuildContext(seed=3))
    task = domain.source.train_task(0)

    async def run(text: str):
        env = domain.make_env()
        obs = await env.reset(task)
        assert obs.messages[-1].content.startswith("Lay out a room") and env.tools() == []
        done = await env.step(text)
        await env.close()
        return done

    done = asyncio.run(run(task.metadata["reference"]))
    assert done.done and done.score.value == 1.0 and "render" not in done.info
    assert asyncio.run(run("no idea")).score.value == 0.0


def test_envs_list_and_show_report_the_scene_domain(monkeypatch):
    import practicum.domains

    monkeypatch.setattr(practicum.domains, "plugin_names", lambda: ["scene"])  # list only this domain: seconds, not minutes
    out = runner.invoke(app, ["envs", "list", "--json", "--draws", "20"])
    assert out.exit_code == 0, out.output
    row = next(r for r in json.loads(out.output) if r["name"] == "scene")
    assert row["components"] == ["valid", "physical", "constraints"] and row["tools"] == []
    assert row["held_out"] == 40 and row["training"] == "20+"
    show = runner.invoke(app, ["envs", "show", "scene", "--n", "3", "--json"])
    assert show.exit_code == 0, show.output
    assert [t["verdict"]["value"] for t in json.loads(show.output)["tasks"]] == [1.0, 1.0, 1.0]


# --- renders ------------------------------------------------------------------------------------------------

def _need_renderer() -> None:
    from practicum.domains.scene.render import renderer_available

    problem = renderer_available()
    if problem:
        if os.environ.get("CI") == "true":
            pytest.fail(f"renderer not present under CI: {problem}")
        pytest.skip(f"renderer not present: {problem}")


def test_a_scene_renders_to_a_png_that_shows_its_objects(tmp_path):
    _need_renderer()
    from PIL import Image

    from practicum.domains.scene.render import render_reply, render_scene

    room = render_scene(spec(), None, tmp_path / "empty.png")
    full = render_reply(spec(), reply(ANSWER), tmp_path / "scene.png")
    with Image.open(full) as a, Image.open(room) as b:
        assert a.size == (640, 480)
        pa, pb = a.convert("RGB").load(), b.convert("RGB").load()
        changed = sum(pa[x, y] != pb[x, y] for x in range(0, 640, 4) for y in range(40, 480, 4))
        # the blue of the sofa's fabric shows (shaded), and the objects change a good share of the picture
        blue = sum(1 for x in range(0, 640, 4) for y in range(0, 480, 4) if pa[x, y][2] > pa[x, y][0] + 60)
    assert changed > 500 and blue > 50


def test_an_episode_with_render_dir_keeps_its_png_path(tmp_path):
    _need_renderer()
    domain = plugin.build(DomainSection(name="sc", env="scene"), SceneOptions(tiers=["easy"], render_dir="renders"),
                          BuildContext(seed=0, base_dir=tmp_path))
    task = domain.source.train_task(0)

    async def run():
        env = domain.make_env()
        await env.reset(task)
        return await env.step(task.metadata["reference"])

    obs = asyncio.run(run())
    path = Path(obs.info["render"])
    assert obs.score.value == 1.0 and path.is_file() and path.is_relative_to(tmp_path / "renders")
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
