"""The store keeps every group and episode exactly, tracks group states, and survives reopening."""

from __future__ import annotations

import pytest

from practicum.errors import StoreError
from practicum.records import (
    Episode,
    EpisodeError,
    EpisodeInfo,
    EpisodeState,
    Group,
    GroupState,
    Message,
    Score,
    Task,
    Turn,
)
from practicum.store import Store


def _group(step: int, tag: str, state: GroupState = GroupState.scored) -> Group:
    task = Task(
        id=f"task-{tag}",
        domain="arith",
        prompt=[Message(role="system", content="be brief"), Message(role="user", content=f"{tag}: 2 + 3 =")],
        target="5",
        metadata={"entry": {"question": "2 + 3 =", "nested": [1, 2.5, None]}, "difficulty": 0.3},
    )
    done = Episode(
        task_id=task.id,
        domain="arith",
        messages=[*task.prompt, Message(role="assistant", content="<answer>5</answer>")],
        turns=[
            Turn(prompt_ids=[1, 2, 3], completion_ids=[4, 5], logprobs=[-0.125, -1.0 / 3.0], text="think",
                 finish_reason="length", policy_version=2, gen_seconds=0.1),
            Turn(prompt_ids=[1, 2, 3, 4, 5, 6], completion_ids=[7, 0], logprobs=[-2.5e-7, -0.75],
                 text="<answer>5</answer>", finish_reason="stop", policy_version=2),
        ],
        score=Score(value=0.8, components={"strict": 1.0, "lenient": 1.0, "format": 0.0}, explanation="ok"),
        state=EpisodeState.done,
        seconds=1.25,
        info=EpisodeInfo(end_reason="done", tool_calls={"python": 2}, tool_errors={"malformed": 1},
                         flags=["eq_override"], extra={"exit_code": 0}),
    )
    failed = Episode(
        task_id=task.id,
        domain="arith",
        score=Score(value=0.0, explanation="environment failure: sandbox died"),
        errors=[EpisodeError(kind="environment", message="sandbox died"),
                EpisodeError(kind="turn_limit", message="no final answer in 1 turns")],
        state=EpisodeState.failed,
    )
    return Group(task=task, episodes=[done, failed], state=state, step=step, policy_version=2)


def test_groups_round_trip_exactly(tmp_path):
    """A group with turns, scores and errors comes back equal, field for field."""
    store = Store(tmp_path / "store.sqlite")
    g1, g2 = _group(1, "a"), _group(2, "b")
    store.add_group(g1, step=1)
    store.add_group(g2, step=2)
    assert store.groups() == [g1, g2]
    assert store.groups(step=2) == [g2]
    assert store.episode(g1.episodes[1].id) == g1.episodes[1]
    assert store.count("groups") == 2 and store.count("episodes") == 4 and store.count("tasks") == 2
    store.close()


def test_an_episode_stored_with_the_old_free_info_dict_still_loads(tmp_path):
    """Runs stored before EpisodeInfo kept ``info`` as a free dict: such a row loads, its known
    keys in their fields, the derived tool_error_count dropped, domain keys in ``extra``."""
    import json

    store = Store(tmp_path / "store.sqlite")
    g = _group(1, "a")
    store.add_group(g, step=1)
    ep = g.episodes[0]
    old = json.loads(ep.model_dump_json())
    old["info"] = {"end_reason": "turn_limit", "tools_presented": "system_prompt", "tool_calls": {"bash": 3},
                   "tool_errors": {"no_call": 2}, "tool_error_count": 2, "git_diff": "diff --git a/x b/x", "end": "turn_limit"}
    store.db.execute("UPDATE episodes SET json = ? WHERE id = ?", (json.dumps(old), ep.id))
    info = store.episode(ep.id).info
    assert info == EpisodeInfo(end_reason="turn_limit", tools_presented="system_prompt", tool_calls={"bash": 3},
                               tool_errors={"no_call": 2}, extra={"git_diff": "diff --git a/x b/x", "end": "turn_limit"})
    assert info.tool_error_count == 2
    store.close()


def test_same_task_in_two_groups_is_stored_once(tmp_path):
    """Tasks are keyed by id: two groups of one task share its row."""
    store = Store(tmp_path / "store.sqlite")
    g1, g2 = _group(1, "a"), _group(2, "a")
    store.add_group(g1, 1)
    store.add_group(g2, 2)
    assert store.count("tasks") == 1
    assert [g.id for g in store.groups()] == [g1.id, g2.id]
    store.close()


def test_unknown_episode_is_a_store_error(tmp_path):
    """Asking for an episode that is not there names it."""
    store = Store(tmp_path / "store.sqlite")
    with pytest.raises(StoreError, match="nope"):
        store.episode("nope")
    store.close()


def test_group_states_update_and_filter(tmp_path):
    """set_group_state moves groups through their lifecycle; queries filter by state and kind."""
    store = Store(tmp_path / "store.sqlite")
    a, b, ev = _group(1, "a"), _group(1, "b"), _group(0, "e", GroupState.evaluated)
    store.add_group(a, 1)
    store.add_group(b, 1)
    store.add_group(ev, 0, kind="eval")
    store.set_group_state([a.id], GroupState.trained)
    assert [g.id for g in store.groups(state=GroupState.trained)] == [a.id]
    assert [g.id for g in store.groups(state=GroupState.scored)] == [b.id]
    assert [g.id for g in store.groups(kind="eval")] == [ev.id]
    assert [g.id for g in store.groups(kind="train", step=1)] == [a.id, b.id]
    assert store.groups(step=1)[0].state == GroupState.trained
    store.close()


def test_metrics_and_meta_round_trip(tmp_path):
    """Metrics come back in insertion order with their step and kind; meta values as JSON."""
    store = Store(tmp_path / "store.sqlite")
    rows = [(1, "train", {"loss": -0.125, "reward": 0.5}), (1, "eval", {"arith/reward": 0.25}),
            (2, "train", {"loss": 0.0, "note": "x", "n": 3})]
    for step, kind, values in rows:
        store.add_metrics(step, kind, values)
    assert list(store.metrics()) == rows
    assert list(store.metrics("train")) == [rows[0], rows[2]]
    store.set_meta("config", {"run": {"seed": 3}, "domains": [1, 2]})
    assert store.get_meta("config") == {"run": {"seed": 3}, "domains": [1, 2]}
    assert store.get_meta("absent", "default") == "default"
    store.close()


def test_drop_after_forgets_later_steps(tmp_path):
    """drop_after(s) removes groups, their episodes and metrics of steps > s, and nothing else."""
    store = Store(tmp_path / "store.sqlite")
    groups = {s: _group(s, f"s{s}") for s in (1, 2, 3)}
    for s, g in groups.items():
        store.add_group(g, s)
        store.add_metrics(s, "train", {"step": s})
    dropped = store.drop_after(1)
    assert dropped == 2
    assert store.groups() == [groups[1]]
    assert store.count("episodes") == 2
    assert [s for s, _, _ in store.metrics()] == [1]
    for g in (groups[2], groups[3]):
        with pytest.raises(StoreError):
            store.episode(g.episodes[0].id)
    store.close()


def test_reopened_store_sees_the_data(tmp_path):
    """Everything written is on disk: a new Store on the same file reads it back."""
    path = tmp_path / "run" / "store.sqlite"
    store = Store(path)
    g = _group(4, "a")
    store.add_group(g, 4)
    store.set_group_state([g.id], GroupState.trained)
    store.add_metrics(4, "train", {"loss": 1.5})
    store.set_meta("model_path", "/x")
    store.close()
    again = Store(path)
    g.state = GroupState.trained
    assert again.groups() == [g]
    assert list(again.metrics()) == [(4, "train", {"loss": 1.5})]
    assert again.get_meta("model_path") == "/x"
    again.close()


def test_failed_write_leaves_nothing_behind(tmp_path):
    """A write that fails part-way is rolled back: no half-written group."""
    store = Store(tmp_path / "store.sqlite")
    g = _group(1, "a")
    store.add_group(g, 1)
    bad = _group(2, "b")
    # Corrupt the second episode behind pydantic's back so that writing it raises after the
    # group row, its task and the first episode were already inserted in the transaction.
    bad.episodes[1].__dict__["state"] = "not-a-state"  # a str has no .value
    with pytest.raises(AttributeError):
        store.add_group(bad, 2)
    assert store.count("groups") == 1 and store.count("episodes") == 2 and store.count("tasks") == 1
    store.close()


def test_a_file_that_is_not_a_database_is_a_store_error(tmp_path):
    """Opening a corrupt store fails with StoreError naming the file, not a bare sqlite error."""
    path = tmp_path / "store.sqlite"
    path.write_bytes(b"this is not sqlite, just some bytes " * 100)
    with pytest.raises(StoreError, match="store.sqlite"):
        Store(path)
