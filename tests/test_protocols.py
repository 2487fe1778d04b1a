"""Every shipped engine, renderer, environment and domain implements its whole protocol, so the
rollout and the loop call them without probing for optional methods; and episodes stored with
the old free ``info`` dict still load as typed records."""

from __future__ import annotations

import inspect
import json
from pathlib import Path
from typing import Protocol

import pytest
import torch

from practicum.config import DomainSection
from practicum.domains import build_domain
from practicum.domains.code.env import CodeDomain, CodeEnv, CodeEnvConfig, CodeSource, CodeToolEnv
from practicum.domains.code.tasks import load_tasks
from practicum.domains.gym import GymEnv
from practicum.domains.math.env import JsonlMathSource, MathDomain, MathEnv
from practicum.domains.terminal.env import TerminalDomain, TerminalEnv
from practicum.engines.base import ContinuousEngine, Engine, Renderer
from practicum.engines.batching import BatchingEngine
from practicum.engines.scripted import ByteRenderer, ScriptedEngine
from practicum.envs.agent import ToolEnvironment
from practicum.envs.base import Domain, Environment
from practicum.envs.toy import ToyDomain, ToyEnv
from practicum.records import Episode, EpisodeInfo
from practicum.sandbox import LoopPool
from practicum.scoring import RewardWeights
from practicum.verify import CodeVerifier

REPO = Path(__file__).resolve().parents[1]


def _members(proto: type) -> list[str]:
    names: set[str] = set()
    for base in proto.__mro__:
        if getattr(base, "_is_protocol", False) and base is not Protocol:
            names |= {n for n in (*vars(base), *getattr(base, "__annotations__", {})) if not n.startswith("_")}
    return sorted(names)


def assert_implements(obj: object, proto: type) -> None:
    """``obj`` passes ``isinstance`` and has every member of ``proto``; each method is async where
    the protocol's is, and takes the protocol's parameters under the same names, in the same
    order, with a default wherever the protocol has one (extra parameters must be optional)."""
    kind = type(obj).__name__
    assert isinstance(obj, proto), f"{kind} is not a {proto.__name__}"
    for name in _members(proto):
        want = inspect.getattr_static(proto, name, None)
        if want is None or isinstance(want, property):  # a data member
            assert hasattr(obj, name), f"{kind} has no {name}"
            continue
        have = getattr(obj, name)
        assert inspect.iscoroutinefunction(have) == inspect.iscoroutinefunction(want), f"{kind}.{name}: async or not"
        wanted = list(inspect.signature(want).parameters.values())[1:]  # without self
        given = list(inspect.signature(have).parameters.values())  # bound: without self
        assert [p.name for p in given[:len(wanted)]] == [p.name for p in wanted], f"{kind}.{name}{inspect.signature(have)}"
        for w, g in zip(wanted, given):
            assert w.default is inspect.Parameter.empty or g.default is not inspect.Parameter.empty, f"{kind}.{name}: {g.name}"
        for g in given[len(wanted):]:
            assert g.default is not inspect.Parameter.empty or g.kind in (g.VAR_POSITIONAL, g.VAR_KEYWORD), \
                f"{kind}.{name}: {g.name} is required"


def test_the_check_catches_a_missing_method_and_a_changed_signature():
    """The helper itself: an environment without finish, or with step(text), does not pass."""

    class NoFinish(ToyEnv):
        finish = None  # type: ignore[assignment]

    class Renamed(ToyEnv):
        async def step(self, text: str):  # type: ignore[override]
            return await super().step(text)

    class Blocking(ToyEnv):
        def close(self) -> None:  # type: ignore[override]
            return None

    for bad in (NoFinish(), Renamed(), Blocking()):
        with pytest.raises(AssertionError):
            assert_implements(bad, Environment)


def test_renderers_and_engines_implement_their_protocols(tiny_model_path):
    from practicum.engines.hf import HFEngine

    scripted = ScriptedEngine(lambda prompt, call: "")
    hf = HFEngine(tiny_model_path, dtype=torch.float32)
    for renderer in (ByteRenderer(), hf.renderer):
        assert_implements(renderer, Renderer)
    for engine in (scripted, hf, BatchingEngine(scripted), BatchingEngine(hf)):
        assert_implements(engine, Engine)
    assert_implements(hf, ContinuousEngine)
    assert not isinstance(scripted, ContinuousEngine) and not isinstance(BatchingEngine(hf), ContinuousEngine)
    assert BatchingEngine(hf).renderer is hf.renderer  # shared, not copied


def _domains(tmp_path: Path) -> list[Domain]:
    (tmp_path / "math.jsonl").write_text(json.dumps({"question": "1 + 1 =", "answer": "2"}) + "\n")
    math = MathDomain("math", JsonlMathSource("math", tmp_path / "math.jsonl", "Solve.", 0, 0.0), RewardWeights())
    pool = LoopPool(lambda: None)  # opens nothing until an episode asks for a session
    code_source = CodeSource("code", load_tasks(REPO / "tasks" / "code" / "easy.jsonl"), "Write Python.", 0, 0.0)
    code = [CodeDomain("code", code_source, pool, CodeVerifier(pool), CodeEnvConfig(mode=mode))  # type: ignore[arg-type]
            for mode in ("single", "multi")]
    gym = build_domain(DomainSection(name="gym", env="gym", eval_size=1), seed=0)
    return [math, ToyDomain(), *code, TerminalDomain("terminal", REPO / "tasks" / "terminal"), gym]


def test_shipped_environments_and_domains_implement_their_protocols(tmp_path):
    """Each domain and the environment it makes; and the environment classes on their own
    (the tool-use base included), with nothing to probe for."""
    made = []
    for dom in _domains(tmp_path):
        assert_implements(dom, Domain)
        env = dom.make_env()
        assert_implements(env, Environment)
        made.append(type(env))
    assert set(made) == {MathEnv, ToyEnv, CodeEnv, CodeToolEnv, TerminalEnv, GymEnv}
    assert_implements(ToolEnvironment(), Environment)


def test_an_info_dict_of_the_old_shape_loads_as_typed_fields():
    """Before EpisodeInfo, ``info`` was a free dict: its known keys fill the fields, the derived
    tool_error_count is dropped, and a domain's keys land in ``extra``."""
    old = {"end_reason": "done", "tools_presented": "chat_template", "tool_calls": {"python": 2, "submit": 1},
           "tool_errors": {"no_call": 1}, "tool_error_count": 1, "flags": ["eq_override"],
           "verify": {"rounds": 1}, "failed_runs": 1}
    record = json.loads(Episode(task_id="t", domain="code").model_dump_json())
    ep = Episode.model_validate_json(json.dumps({**record, "info": old}))
    assert ep.info == EpisodeInfo(end_reason="done", tools_presented="chat_template",
                                  tool_calls={"python": 2, "submit": 1}, tool_errors={"no_call": 1},
                                  flags=["eq_override"], extra={"verify": {"rounds": 1}, "failed_runs": 1})
    assert ep.info.tool_error_count == 1
    assert Episode.model_validate_json(ep.model_dump_json()) == ep  # and the new shape round-trips
    assert Episode(task_id="t", domain="d", info={}).info == EpisodeInfo()  # an episode stored before any info


def test_environments_report_through_merge_and_cannot_set_what_the_rollout_owns():
    info = EpisodeInfo()
    info.merge({"tool_calls": {"bash": 1}, "flags": [], "git_diff": "diff"})
    info.merge({"tool_calls": {"bash": 2}, "tool_errors": {"malformed": 1}})  # running totals replace
    assert (info.tool_calls, info.tool_error_count, info.extra) == ({"bash": 2}, 1, {"git_diff": "diff"})
    for owned in ("end_reason", "tools_presented", "extra"):
        with pytest.raises(ValueError, match="rollout owns it"):
            info.merge({owned: "done"})
    with pytest.raises(ValueError):
        info.end_reason = "gave_up"  # type: ignore[assignment]
