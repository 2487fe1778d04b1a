"""The rollout loop end to end with a scripted engine: scores, recorded failures, propagated bugs,
multi-turn contexts, and the samples GRPO trains on."""

from __future__ import annotations

import asyncio
import re

import pytest
import torch

from practicum import algorithms as A
from practicum.domains.math.env import DEFAULT_SYSTEM_PROMPT, MathDomain, ReasoningGymSource
from practicum.engines.base import SamplingParams
from practicum.engines.scripted import EOS, ScriptedEngine
from practicum.envs.base import Observation
from practicum.envs.toy import ToyDomain
from practicum.errors import EnvironmentFailure, ModelOutputFailure, VerifierFailure
from practicum.loop import build_samples
from practicum.orchestrator import draw_task
from practicum.records import EpisodeState, Group, GroupState, Message, Score, Task
from practicum.rollout import run_groups

PARAMS = SamplingParams(max_new_tokens=64)
N = 4  # group size


@pytest.fixture(scope="module")
def domain() -> MathDomain:
    src = ReasoningGymSource("arith", "chain_sum", {"min_terms": 2, "max_terms": 2, "min_digits": 1, "max_digits": 2},
                             DEFAULT_SYSTEM_PROMPT, seed=0, eval_seed=10_000_019, eval_size=20)
    from practicum.scoring import RewardWeights

    return MathDomain("arith", src, RewardWeights())


def solve(prompt_text: str) -> int:
    """Work out a chain_sum question ("... problem: 15 - 43 =") from the rendered prompt."""
    expr = re.findall(r"problem: ([-+\d ]+)=", prompt_text)[-1]
    terms = re.findall(r"[-+]?\s*\d+", expr)
    return sum(int(t.replace(" ", "")) for t in terms)


def first_of_group_is_right(prompt: str, call: int) -> str:
    """Episode 0 of each group answers right in tags, the others say nothing useful."""
    return f"<answer>{solve(prompt)}</answer>" if call % N == 0 else "I am not sure."


def test_run_groups_scores_every_episode(domain):
    """Groups come back in task order, scored, each episode with one turn whose ids are the
    engine's rendering of the prompt and the reply's tokens."""
    tasks = [domain.source.train_task(i) for i in range(3)]
    engine = ScriptedEngine(first_of_group_is_right)
    groups = asyncio.run(run_groups(tasks, N, lambda t: domain.make_env(), engine, PARAMS))
    assert [g.task for g in groups] == tasks
    for g in groups:
        assert g.state == GroupState.scored and len(g.episodes) == N
        assert g.rewards == [1.0, 0.0, 0.0, 0.0]
        for ep in g.episodes:
            assert ep.state == EpisodeState.done and ep.score is not None and not ep.errors
            assert ep.task_id == g.task.id and ep.domain == "arith"
            (turn,) = ep.turns
            assert turn.prompt_ids == engine.renderer.chat_ids(g.task.prompt)
            assert turn.completion_ids[-1] == EOS and turn.finish_reason == "stop"
            assert len(turn.logprobs) == len(turn.completion_ids)
            assert ep.messages[-1] == Message(role="assistant", content=turn.text)
        assert g.episodes[0].score.components == {"strict": 1.0, "lenient": 1.0, "format": 1.0}
    assert engine.calls == 3 * N


def test_build_samples_carries_a_domains_own_entropy_coef(domain):
    """A domain named in ``entropy_coefs`` gives each of its samples that weight; any other
    domain's samples name none (the trainer then uses algorithm.entropy_coef)."""
    tasks = [domain.source.train_task(0)]
    groups = asyncio.run(run_groups(tasks, N, lambda t: domain.make_env(), ScriptedEngine(first_of_group_is_right), PARAMS))
    own, _ = build_samples(groups, "grpo", entropy_coefs={"arith": 0.03})
    assert [s.entropy_coef for s in own] == [0.03] * N and {s.domain for s in own} == {"arith"}
    other, _ = build_samples(groups, "grpo", entropy_coefs={"equations": 0.0})
    assert [s.entropy_coef for s in other] == [None] * N


class FlakyEnv:
    """Wraps an environment and fails, as configured, on replies containing a trigger word."""

    def __init__(self, inner, exc: BaseException, trigger: str = "boom", on_reset: bool = False) -> None:
        self.inner, self.exc, self.trigger, self.on_reset = inner, exc, trigger, on_reset
        self.domain = inner.domain
        self.closed = False

    async def reset(self, task: Task) -> Observation:
        if self.on_reset and self.trigger in task.id:
            raise self.exc
        return await self.inner.reset(task)

    def tools(self):
        return self.inner.tools()

    async def step(self, reply: str) -> Observation:
        if self.trigger in reply:
            raise self.exc
        return await self.inner.step(reply)

    async def finish(self, reason: str) -> Observation:
        return await self.inner.finish(reason)

    async def close(self) -> None:
        self.closed = True


@pytest.mark.parametrize(
    "exc, kind",
    [(EnvironmentFailure("sandbox died"), "environment"), (VerifierFailure("checker timed out"), "verifier"),
     (ModelOutputFailure("no parseable answer"), "model_output")],
)
def test_rollout_failure_is_recorded_and_the_run_goes_on(domain, exc, kind):
    """An episode whose environment raises a RolloutFailure is failed with the error recorded
    and score 0; its neighbours are scored normally and its environment is closed."""
    tasks = [domain.source.train_task(i) for i in range(2)]
    envs: list[FlakyEnv] = []

    def make_env(_t):
        envs.append(FlakyEnv(domain.make_env(), exc))
        return envs[-1]

    def reply(prompt, call):
        return "boom" if call == 1 else f"<answer>{solve(prompt)}</answer>"

    groups = asyncio.run(run_groups(tasks, N, make_env, ScriptedEngine(reply), PARAMS))
    failed = groups[0].episodes[1]
    assert failed.state == EpisodeState.failed
    assert [(e.kind, e.message) for e in failed.errors] == [(kind, str(exc))]
    assert failed.reward == 0.0 and failed.score is not None and kind in failed.score.explanation
    assert len(failed.turns) == 1  # the reply that failed is kept: a bad rollout is data
    others = [e for g in groups for e in g.episodes if e is not failed]
    assert all(e.state == EpisodeState.done and e.reward == 1.0 for e in others)
    assert all(env.closed for env in envs)


def test_failure_on_reset_leaves_an_episode_without_turns(domain):
    """A failure before the model speaks records the error; build_samples skips that episode."""
    tasks = [domain.source.train_task(i) for i in range(2)]
    bad_id = tasks[1].id

    def make_env(_t):
        return FlakyEnv(domain.make_env(), EnvironmentFailure("no sandbox"), trigger=bad_id, on_reset=True)

    engine = ScriptedEngine(first_of_group_is_right)
    groups = asyncio.run(run_groups(tasks, N, make_env, engine, PARAMS))
    assert engine.calls == N  # only the healthy group reached the model
    assert all(e.state == EpisodeState.failed and not e.turns and e.errors[0].kind == "environment"
               for e in groups[1].episodes)
    samples, uniform = build_samples(groups, "grpo")
    assert len(samples) == N  # only the healthy group's episodes
    assert uniform == pytest.approx(0.5)  # the failed group scored uniformly 0


def test_a_bug_in_an_environments_reset_propagates(domain):
    """An exception that is not a RolloutFailure, before the model has said anything, is a bug:
    it stops the run."""
    tasks = [domain.source.train_task(0)]

    def make_env(_t):
        return FlakyEnv(domain.make_env(), RuntimeError("env bug"), trigger="train", on_reset=True)

    with pytest.raises(RuntimeError, match="env bug"):
        asyncio.run(run_groups(tasks, N, make_env, ScriptedEngine(first_of_group_is_right), PARAMS))


def test_a_bug_that_a_reply_sets_off_fails_that_episode_and_the_run_goes_on(domain, caplog):
    """A verifier that raises on a reply it never expected: that episode fails as an environment
    failure naming the exception, its traceback is logged, the other episodes are scored."""
    tasks = [domain.source.train_task(i) for i in range(2)]

    def make_env(_t):
        return FlakyEnv(domain.make_env(), RecursionError("nested too deep"))

    def reply(prompt, call):
        return "boom" if call == 1 else f"<answer>{solve(prompt)}</answer>"

    with caplog.at_level("ERROR", logger="practicum.rollout"):
        groups = asyncio.run(run_groups(tasks, N, make_env, ScriptedEngine(reply), PARAMS))
    failed = groups[0].episodes[1]
    assert failed.state == EpisodeState.failed and failed.reward == 0.0
    assert [(e.kind, e.message) for e in failed.errors] == [
        ("environment", "unexpected RecursionError while reading the reply: nested too deep")]
    assert "RecursionError: nested too deep" in caplog.text  # the traceback, for whoever fixes the bug
    others = [e for g in groups for e in g.episodes if e is not failed]
    assert all(e.state == EpisodeState.done and e.reward == 1.0 for e in others)


def test_multi_turn_episode_context_and_loss_mask():
    """A two-turn toy episode: turn 2's context extends turn 1's by the environment's message,
    and the training sequence masks exactly the two replies."""
    dom = ToyDomain(targets=["seven"], turns=2)
    engine = ScriptedEngine(lambda _p, call: "seven seven" if call == 0 else "seven six")
    (group,) = asyncio.run(run_groups([dom.source.train_task(0)], 1, lambda t: dom.make_env(), engine,
                                      PARAMS, max_turns=2))
    (ep,) = group.episodes
    assert ep.state == EpisodeState.done and len(ep.turns) == 2
    assert ep.reward == pytest.approx((1.0 + 0.5) / 2)  # turn scores 2/2 and 1/2
    t1, t2 = ep.turns
    observation = engine.renderer.append_ids(ep.messages[:3], [Message(role="user", content="please say seven")])
    assert t2.prompt_ids == t1.prompt_ids + t1.completion_ids + observation
    ids, mask, logps = ep.training_sequence()
    assert ids == t2.prompt_ids + t2.completion_ids
    expected_mask = [0] * len(t1.prompt_ids) + [1] * len(t1.completion_ids) + [0] * len(observation) + [1] * len(
        t2.completion_ids)
    assert mask == expected_mask
    assert [lp for lp, m in zip(logps, mask) if m] == t1.logprobs + t2.logprobs
    assert [m.role for m in ep.messages] == ["user", "assistant", "user", "assistant"]


def test_turn_limit_is_recorded():
    """An episode that is still going when max_turns runs out is closed with a turn_limit error
    and score 0."""
    dom = ToyDomain(targets=["seven"], turns=3)
    engine = ScriptedEngine(lambda _p, _c: "seven")
    (group,) = asyncio.run(run_groups([dom.source.train_task(0)], 2, lambda t: dom.make_env(), engine,
                                      PARAMS, max_turns=2))
    for ep in group.episodes:
        assert len(ep.turns) == 2 and ep.reward == 0.0
        assert [e.kind for e in ep.errors] == ["turn_limit"]


def _group(rewards: list[float]) -> Group:
    task = Task(id="t", domain="d", prompt=[Message(role="user", content="q")])
    engine = ScriptedEngine(lambda _p, _c: "")
    eps = []
    for r in rewards:
        eps += asyncio.run(run_groups([task], 1, lambda t, r=r: _FixedEnv(r), engine, PARAMS))[0].episodes
    return Group(task=task, episodes=eps, state=GroupState.scored)


class _FixedEnv:
    """Scores every reply with a fixed reward."""

    domain = "d"

    def __init__(self, reward: float) -> None:
        self.reward = reward

    async def reset(self, task: Task) -> Observation:
        return Observation(messages=list(task.prompt))

    def tools(self):
        return []

    async def step(self, reply: str) -> Observation:
        return Observation(messages=[], done=True, score=Score(value=self.reward))

    async def finish(self, reason: str) -> Observation:
        return Observation(messages=[])

    async def close(self) -> None:
        return None


def test_build_samples_advantages_and_uniform_fraction():
    """Uniform groups give zero advantages and count as uniform; others get group advantages,
    attached to each episode's own training sequence."""
    groups = [_group([1.0, 0.0, 0.0, 0.0]), _group([0.5, 0.5, 0.5, 0.5]), _group([0.0, 0.0, 0.0, 0.0])]
    samples, uniform = build_samples(groups, "grpo")
    assert uniform == pytest.approx(2 / 3)
    assert len(samples) == 12
    # group 0: mean 0.25, population std sqrt(0.1875) = 0.4330 -> 0.75/0.433 = 1.732, -0.25/0.433 = -0.577
    assert [s.advantage for s in samples[:4]] == pytest.approx([1.7320508, -0.5773503, -0.5773503, -0.5773503],
                                                               abs=1e-5)
    assert all(s.advantage == 0.0 for s in samples[4:])
    for s, ep in zip(samples, [e for g in groups for e in g.episodes]):
        assert (s.ids, s.mask, s.behaviour_logprobs) == ep.training_sequence()
    dr, _ = build_samples(groups[:1], "drgrpo")
    assert [s.advantage for s in dr] == pytest.approx([0.75, -0.25, -0.25, -0.25])
    torch.testing.assert_close(
        torch.tensor([s.advantage for s in samples[:4]]),
        A.group_advantages(torch.tensor([[1.0, 0.0, 0.0, 0.0]]))[0],
    )


def test_drawn_tasks_are_a_pure_function_of_seed_and_draw_index(domain):
    """The k-th drawn task depends on (seed, k) only: equal when repeated, different across
    draws, and drawn from every domain in proportion to its weight."""
    toy = ToyDomain("toy")
    doms = [domain, toy]
    a = [draw_task(doms, [1.0, 1.0], 5, k) for k in range(8)]
    assert a == [draw_task(doms, [1.0, 1.0], 5, k) for k in range(8)]
    assert [t.id for t in a] != [t.id for t in (draw_task(doms, [1.0, 1.0], 6, k) for k in range(8))]
    many = [draw_task(doms, [3.0, 1.0], 0, k) for k in range(400)]
    share = sum(t.domain == "arith" for t in many) / len(many)
    assert 0.65 < share < 0.85  # weight 3:1 -> 0.75
    assert len({t.id for t in many if t.domain == "arith"}) == sum(t.domain == "arith" for t in many)


def test_evaluate_reports_per_domain_means_and_per_task_components(domain):
    """Greedy evaluation: per-domain means of the score and its components, and one row per
    held-out task carrying that task's own components (what a breakdown by kind of task needs)."""
    from practicum.evaluation import evaluate

    def right_on_even_tasks(prompt: str, call: int) -> str:
        return f"<answer>{solve(prompt)}</answer>" if call % 2 == 0 else f"it is {solve(prompt)}"

    res = asyncio.run(evaluate(ScriptedEngine(right_on_even_tasks), [domain], 64, limit=6))
    assert [r.task for r in res.per_task] == [t.id for t in domain.source.eval_tasks()[:6]]
    assert [r.components for r in res.per_task] == [
        {"strict": 1.0, "lenient": 1.0, "format": 1.0}, {"strict": 0.0, "lenient": 1.0, "format": 0.0}] * 3
    assert res.per_domain["arith"] == pytest.approx({"reward": 0.65, "strict": 0.5, "lenient": 1.0, "format": 0.5, "n": 6})
    assert res.tallies["arith"].tasks == 6 and res.tallies["arith"].errors == 0 and res.tallies["arith"].seconds > 0


class _FlakyDomain:
    """A domain whose environments fail, as :class:`FlakyEnv`, on replies saying "boom"."""

    def __init__(self, inner, exc: BaseException) -> None:
        self.name, self.source, self.inner, self.exc = inner.name, inner.source, inner, exc

    def make_env(self):
        return FlakyEnv(self.inner.make_env(), self.exc)

    async def close(self) -> None:
        return None


def test_evaluate_counts_failed_and_limited_episodes_and_times_each_domain(domain):
    """The eval table's errors and seconds: a failed episode is an error of its kind; an episode
    stopped at the turn limit is scored and counted apart, not as an error; each domain has its own time."""
    from practicum.evaluation import evaluate

    def reply(prompt: str, call: int) -> str:
        if "problem:" not in prompt:  # the toy domain: says its word, but is asked twice and gets one turn
            return prompt.rsplit("say ", 1)[-1].split()[0]
        return "boom" if call == 1 else f"<answer>{solve(prompt)}</answer>"

    doms = [_FlakyDomain(domain, EnvironmentFailure("sandbox died")), ToyDomain("toy", turns=2)]
    res = asyncio.run(evaluate(ScriptedEngine(reply), doms, 64, max_turns=1, limit=4))
    arith, toy = res.tallies["arith"], res.tallies["toy"]
    assert (arith.tasks, arith.errors, arith.error_kinds, arith.limited) == (4, 1, {"environment": 1}, 0)
    assert (toy.tasks, toy.errors, toy.error_kinds, toy.limited) == (4, 0, {}, 4)
    assert res.per_domain["arith"]["reward"] == pytest.approx(0.75)  # the failed episode scores 0
    assert 0 < arith.seconds and 0 < toy.seconds and arith.seconds + toy.seconds <= res.seconds
