"""`practicum view` in a real headless Chromium: the page loads over a run's store, an episode
opens, and its tool calls, score components and lifecycle show; the JSON filters by hand."""

from __future__ import annotations

import asyncio
import os
import shutil
import subprocess
from contextlib import closing
from pathlib import Path

import pytest
from test_agent_env import TASK, NotesEnv, call  # noqa: E402

from practicum.engines.base import SamplingParams
from practicum.engines.scripted import ScriptedEngine
from practicum.records import Episode, EpisodeError, EpisodeState, Group, GroupState, Score
from practicum.rollout import run_episode
from practicum.store import Store
from practicum.view import RunView, serve_in_thread

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def make_run(run_dir: Path) -> dict[str, str]:
    """A store with: a tool-using episode that recovers from a tool error and succeeds, a failed
    one, an errored one, a hack-flagged one; metrics for two steps."""
    run_dir.mkdir(parents=True, exist_ok=True)
    replies = [call("read_file", path="notes.txt"), call("write_file", path="notes.txt", text="seven"), call("submit")]
    engine = ScriptedEngine(lambda _p, n: replies[min(n, 2)])
    good = asyncio.run(run_episode(TASK, NotesEnv(), engine, SamplingParams(max_new_tokens=200), max_turns=4))
    bad = asyncio.run(run_episode(TASK, NotesEnv(), ScriptedEngine(lambda _p, _n: call("submit")),
                                  SamplingParams(max_new_tokens=200), max_turns=2))
    good.info.sandbox_cpu_s, good.info.sandbox_runs = 1.25, 3  # as the rollout's meter records them
    errored = Episode(task_id=TASK.id, domain="notes", state=EpisodeState.failed,
                      errors=[EpisodeError(kind="environment", message="the sandbox died")], score=Score(value=0.0))
    hack = Episode(task_id=TASK.id, domain="notes", state=EpisodeState.done, score=Score(value=0.0))
    hack.info.flags.append("reads_tests")
    with closing(Store(run_dir / "store.sqlite")) as store:
        store.set_meta("config", {"run": {"name": "viewer-test"}, "model": {"name": "scripted"}})
        store.add_group(Group(task=TASK, episodes=[good, bad, errored, hack], state=GroupState.trained), 1)
        store.add_metrics(1, "train", {"notes/reward": 0.25})
        store.add_metrics(2, "train", {"notes/reward": 0.5})
        store.add_metrics(2, "eval", {"notes/reward": 0.4})
    return {"good": good.id, "bad": bad.id, "errored": errored.id, "hack": hack.id}


def test_the_json_filters(tmp_path):
    ids = make_run(tmp_path / "run")
    view = RunView(tmp_path / "run")
    by = lambda status: {e["id"] for e in view.episodes(status=status)}  # noqa: E731
    assert by("recovered") == {ids["good"]}  # a tool error (no such file), then success
    assert by("failed") == {ids["bad"], ids["hack"]}
    assert by("errored") == {ids["errored"]}
    assert by("hack") == {ids["hack"]}
    assert len(view.episodes()) == 4 and view.curves()["notes"]["train"] == [[1, 0.25], [2, 0.5]]
    ep = view.episode(ids["good"])
    assert [c["name"] for m in ep["messages"] for c in m.get("tool_calls", [])] == ["read_file", "write_file", "submit"]
    assert ep["score"]["components"] == {"correct": 1.0} and ep["status"] == ["recovered"]
    assert ep["events"] == []  # this store was written without the orchestrator: no lifecycle events
    with pytest.raises(PermissionError):
        view.file("../../etc/passwd")


@pytest.mark.skipif(CHROMIUM is None and os.environ.get("CI") != "true", reason="no Chromium on this machine")
def test_the_page_in_headless_chromium(tmp_path):
    assert CHROMIUM, "Chromium is installed by `make setup` (apt-get install chromium)"
    ids = make_run(tmp_path / "run")
    server, url = serve_in_thread(RunView(tmp_path / "run"))
    try:
        cmd = [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=8000",
               f"--user-data-dir={tmp_path / 'profile'}"]
        page = subprocess.run([*cmd, "--dump-dom", f"{url}#episode={ids['good']}"], capture_output=True, text=True,
                              timeout=120).stdout
        shot = tmp_path / "episode.png"
        subprocess.run([*cmd, "--window-size=1400,1000", f"--screenshot={shot}", f"{url}#episode={ids['good']}"],
                       capture_output=True, timeout=120)
    finally:
        server.shutdown()
    assert "viewer-test" in page  # the run loaded
    assert sum(f'data-id="{i}"' in page for i in ids.values()) == 4  # the episode list
    assert "tool call: <b>write_file</b>" in page and "tool call: <b>read_file</b>" in page  # the episode opened
    assert 'id="components"' in page and "correct" in page  # its score components
    assert "no such file: notes.txt" in page  # the observation of the failed call
    assert "sandbox: 3 runs, 1.25 CPU s" in page  # what the episode cost in the sandbox
    assert shot.is_file() and shot.stat().st_size > 10_000
    out = Path(os.environ.get("PRACTICUM_VIEW_SHOT", "")) if os.environ.get("PRACTICUM_VIEW_SHOT") else None
    if out:
        shutil.copy(shot, out)
