"""The curriculum wired into the real loop (tiny model, toy domains): draws, the forced prefix,
the filter with refill, replay, the scaffold, levels, checkpointed state, and a domain made to
regress on purpose that the drift guard catches and reacts to as configured."""

from __future__ import annotations

import asyncio
import json
import random
from collections import Counter
from contextlib import closing

import pytest
import torch
from safetensors.torch import load_file

from practicum.audit import audit
from practicum.config import load_config
from practicum.curriculum.difficulty import task_key
from practicum.curriculum.driver import Driver
from practicum.curriculum.parts import CurriculumConfig
from practicum.curriculum.scaffold import Scaffold, ScaffoldConfig, guided_slots, is_scaffolded, slot_task
from practicum.domains.math.env import DEFAULT_SYSTEM_PROMPT, MathDomain, ReasoningGymSource
from practicum.engines.base import SamplingParams
from practicum.engines.scripted import ScriptedEngine
from practicum.envs.base import Observation
from practicum.envs.toy import ToyDomain, ToyEnv, word_score
from practicum.errors import CheckpointError, ConfigError
from practicum.loop import Run, build_samples, train_async
from practicum.orchestrator import draw_task
from practicum.records import Episode, EpisodeState, Group, GroupState, Message, Score, Task, Turn
from practicum.rollout import run_episode, was_helped
from practicum.scoring import RewardWeights
from practicum.store import Store

ALPHA, BETA = ("seven", "three"), ("one", "two")


def two_domains(tiny_run_config, run_dir: str, curriculum: dict | None = None, *overrides: str):
    """The tiny config with two domain sections (alpha, beta) and a curriculum section; the
    domains themselves are toy domains passed to Run."""
    raw = json.loads(tiny_run_config.path.read_text())
    section = raw["domains"][0]
    raw["domains"] = [{**section, "name": "alpha"}, {**section, "name": "beta"}]
    if curriculum is not None:
        raw["curriculum"] = curriculum
    path = tiny_run_config.path.with_name(f"{run_dir}.yaml")
    path.write_text(json.dumps(raw))
    return load_config(path, [f"run.dir={path.parent / run_dir}", *overrides])


def toy(name: str, targets, eval_size: int = 16, **kw) -> ToyDomain:
    return ToyDomain(name, targets, seed=3, eval_size=eval_size, **kw)


# --- the draw -------------------------------------------------------------------------------------
def test_default_curriculum_draws_exactly_the_plain_draw():
    """With every part off, the driver's k-th task is draw_task's: a config without the section
    trains as before."""
    doms = [toy("alpha", ALPHA), toy("beta", BETA)]
    store = Store(":memory:")
    drv = Driver(CurriculumConfig(), doms, [1.0, 3.0], seed=7, store=store)
    assert [drv.plan(k) for k in range(200)] == [draw_task(doms, [1.0, 3.0], 7, k) for k in range(200)]


class SlowEnv(ToyEnv):
    """A toy environment that takes ``delay`` seconds to score: a slow, sandboxed domain."""

    def __init__(self, name: str, delay: float) -> None:
        super().__init__(name)
        self.delay = delay

    async def step(self, reply: str) -> Observation:
        await asyncio.sleep(self.delay)
        return await super().step(reply)


class SlowDomain(ToyDomain):
    def __init__(self, *a, delay: float, **kw) -> None:
        super().__init__(*a, **kw)
        self.delay = delay

    def make_env(self) -> SlowEnv:
        return SlowEnv(self.name, self.delay)


def trained_by_domain(store: Store) -> Counter:
    return Counter(g.task.domain for g in store.groups(state=GroupState.trained))


@pytest.mark.parametrize("balance", ["drawn", "trained"])
def test_trained_mix_under_unequal_domain_speeds(tiny_run_config, tiny_model_path, balance):
    """Beta's episodes take 40x longer than alpha's. Asynchronously (max_staleness 2) a weighted
    coin per draw under-trains beta: fast groups overtake it in the queue and the run ends with
    beta's groups still in flight. The deficit sampler holds the trained mix at the target (1:1)."""
    cfg = two_domains(tiny_run_config, f"mix_{balance}", {"mixing": {"balance": balance}},
                      "run.steps=12", "async.max_staleness=2", "rollout.prompts_per_step=4", "rollout.group_size=3",
                      "async.min_episodes=2")
    doms = [toy("alpha", ALPHA), SlowDomain("beta", BETA, seed=3, eval_size=4, delay=0.2)]
    run = Run(cfg, domains=doms, log=lambda _m: None)
    asyncio.run(train_async(cfg, run=run, log=lambda _m: None))
    with closing(Store(cfg.run.dir + "/store.sqlite")) as store:
        counts = trained_by_domain(store)
        assert audit(store).ok
    share = counts["beta"] / sum(counts.values())
    if balance == "trained":
        assert abs(share - 0.5) <= 0.1, counts  # 48 groups: within 5 groups of the target
    else:
        assert share < 0.4, counts


def test_per_domain_updates_step_once_per_domain_in_the_loop(tiny_run_config, tiny_model_path):
    """`mixing.updates: per_domain` reaches the trainer from the loop: a step whose groups hold
    both domains records each domain's gradient norm, and the policy's version still moves by one
    a step (the engine's weights are published once)."""
    cfg = two_domains(tiny_run_config, "per_domain", {"mixing": {"updates": "per_domain"}},
                      "run.steps=3", "rollout.prompts_per_step=4", "rollout.group_size=3")
    run = Run(cfg, domains=[toy("alpha", ALPHA), toy("beta", BETA)], log=lambda _m: None)
    asyncio.run(train_async(cfg, run=run, log=lambda _m: None))
    with closing(Store(cfg.run.dir + "/store.sqlite")) as store:
        train = [(s, m) for s, _k, m in store.metrics("train")]
        assert audit(store).ok
    versions = [0] + [m["policy_version"] for _s, m in train]
    assert len(train) == 3 and all(v - u == (0 if m["skipped"] else 1) for u, v, (_s, m) in zip(versions, versions[1:], train))
    both = [m for _s, m in train if "alpha/grad_norm" in m and "beta/grad_norm" in m]
    assert both, train
    assert all(m["grad_norm"] == pytest.approx((m["alpha/grad_norm"] + m["beta/grad_norm"]) / 2) for m in both)


def test_per_domain_updates_with_gradient_surgery_is_a_config_error(tiny_run_config):
    with pytest.raises(ConfigError, match="gradient_surgery"):
        two_domains(tiny_run_config, "both", {"mixing": {"updates": "per_domain"}}, "trainer.gradient_surgery=pcgrad")


# --- the forced prefix ----------------------------------------------------------------------------
class Recorder(ToyEnv):
    def __init__(self) -> None:
        super().__init__("alpha")
        self.replies: list[str] = []

    async def step(self, reply: str) -> Observation:
        self.replies.append(reply)
        return await super().step(reply)


def test_forced_prefix_is_context_for_the_model_and_part_of_the_reply_for_the_env():
    """A scaffold's prefix follows the generation cue in the prompt ids (trained with mask 0);
    the environment scores prefix + reply, and the transcript shows them together."""
    task = Task(id="alpha/train/0", domain="alpha", prompt=[Message(role="user", content="say seven")],
                target="seven", metadata={"scaffold": {"examples": 0, "hint": False, "prefix": "seven"}})
    engine = ScriptedEngine(lambda _prompt, _call: "seven")
    env = Recorder()
    ep = asyncio.run(run_episode(task, env, engine, SamplingParams(max_new_tokens=8)))
    (turn,) = ep.turns
    cue = engine.renderer.chat_ids(task.prompt)
    prefix_ids = engine.renderer.text_ids("seven")
    assert prefix_ids and turn.prompt_ids == cue + prefix_ids
    assert env.replies == ["seven" + turn.text] and ep.messages[-1].content == "seven" + turn.text
    ids, mask, _ = ep.training_sequence()
    assert ids[:len(turn.prompt_ids)] == turn.prompt_ids and not any(mask[:len(turn.prompt_ids)])



def test_guided_prefix_is_trained_as_the_models_own_tokens_after_the_plain_prompt():
    """Under a guided scaffold the engine still continues prompt + prefix, but the episode's turn
    holds the plain prompt and the prefix as the first completion tokens: mask 1, behaviour
    log-prob 0 (forced: probability 1); the environment scores prefix + reply as before."""
    marks = {"examples": 0, "hint": False, "prefix": "seven", "guided": 0.5}
    task = Task(id="alpha/train/0", domain="alpha", prompt=[Message(role="user", content="say seven")],
                target="seven", metadata={"scaffold": marks})
    seen: list[str] = []
    engine = ScriptedEngine(lambda prompt, _call: seen.append(prompt) or "seven")
    env = Recorder()
    ep = asyncio.run(run_episode(task, env, engine, SamplingParams(max_new_tokens=8)))
    (turn,) = ep.turns
    cue = engine.renderer.chat_ids(task.prompt)
    prefix_ids = engine.renderer.text_ids("seven")
    assert seen == [engine.renderer.decode(cue + prefix_ids)]  # the engine continued the forced start
    assert turn.prompt_ids == cue and turn.completion_ids[:len(prefix_ids)] == prefix_ids
    assert turn.logprobs[:len(prefix_ids)] == [0.0] * len(prefix_ids)
    assert turn.text == "seven" + "seven" and env.replies == [turn.text]
    ids, mask, logps = ep.training_sequence()
    assert ids == cue + turn.completion_ids
    assert mask == [0] * len(cue) + [1] * len(turn.completion_ids)
    assert was_helped(ep) and len(logps) == len(ids)


def test_guided_examples_and_hint_are_shown_to_the_engine_and_left_out_of_the_trained_context():
    """A guided scaffold with worked examples and a hint: the engine continues the helped
    conversation, while the episode (its messages and its training sequence) holds the plain
    prompt, so the reply is trained as the answer to the question without help."""
    plain = Task(id="alpha/train/0", domain="alpha", prompt=[Message(role="system", content="be brief"),
                                                             Message(role="user", content="say seven")], target="seven")
    scaffold = Scaffold("alpha", ScaffoldConfig(examples=[{"question": "say one", "reply": "one"}], hint="one word",
                                                guided=True))
    helped = scaffold.apply(plain).task
    seen: list[str] = []
    engine = ScriptedEngine(lambda prompt, _call: seen.append(prompt) or "seven")
    ep = asyncio.run(run_episode(helped, Recorder(), engine, SamplingParams(max_new_tokens=8)))
    (turn,) = ep.turns
    assert seen == [engine.renderer.decode(engine.renderer.chat_ids(helped.prompt))]
    assert "say one" in seen[0] and "one word" in seen[0]
    assert [m.content for m in ep.messages[:2]] == ["be brief", "say seven"]
    assert turn.prompt_ids == engine.renderer.chat_ids(plain.prompt)
    ids, mask, _ = ep.training_sequence()
    assert ids == turn.prompt_ids + turn.completion_ids and sum(mask) == len(turn.completion_ids)
    assert was_helped(ep) and ep.reward == 1.0


def test_only_a_guided_groups_helped_episodes_become_guided_samples():
    """build_samples marks the samples of episodes a guided scaffold helped (the trainer takes
    them as the policy's own), and neither the group's unaided episodes nor those of a scaffold
    that shows its help in the trained context (not guided: its log-probs are of that context)."""
    plain = Task(id="alpha/train/0", domain="alpha", prompt=[Message(role="user", content="say seven")], target="seven")
    guided = Scaffold("alpha", ScaffoldConfig(hint="one word", guided=True, share=0.5)).apply(plain).task
    shown = Scaffold("alpha", ScaffoldConfig(hint="one word")).apply(plain).task
    replies = iter(["seven", "three", "seven", "three", "seven", "three"])
    engine = ScriptedEngine(lambda _p, _c: next(replies))

    def episodes(task: Task) -> list[Episode]:
        return [asyncio.run(run_episode(slot_task(task, i, 2), Recorder(), engine, SamplingParams(max_new_tokens=8)))
                for i in range(2)]

    samples, _ = build_samples([Group(task=guided, episodes=episodes(guided), state=GroupState.ready),
                                Group(task=shown, episodes=episodes(shown), state=GroupState.ready),
                                Group(task=plain, episodes=episodes(plain), state=GroupState.ready)], "grpo")
    assert [s.guided for s in samples] == [True, False, False, False, False, False]
    assert [s.advantage > 0 for s in samples] == [True, False] * 3  # "seven" right, "three" wrong in every group


def test_a_guided_episode_whose_environment_moved_the_help_is_a_recorded_failure():
    """An environment that rewrites the prompt (here: drops the hint) cannot be guided: the
    episode fails with an environment error, the rollout goes on."""
    class Rewriter(ToyEnv):
        async def reset(self, task):
            await super().reset(task)
            return Observation(messages=[Message(role="user", content="something else")])

    task = Scaffold("alpha", ScaffoldConfig(hint="one word", guided=True)).apply(
        Task(id="alpha/train/0", domain="alpha", prompt=[Message(role="user", content="say seven")], target="seven")).task
    ep = asyncio.run(run_episode(task, Rewriter(), ScriptedEngine(lambda _p, _c: "seven"), SamplingParams(max_new_tokens=8)))
    assert ep.state == EpisodeState.failed and ep.errors[-1].kind == "environment"
    assert "hint" in ep.errors[-1].message and not ep.turns


def test_a_guided_group_prefixes_only_its_share_of_slots():
    """slot_task: in a group of 8 with share 0.5 slots 0-3 carry the scaffold and 4-7 run the plain
    task; any share gives at least one guided slot; unguided scaffolds are the same for every slot."""
    plain = Task(id="alpha/train/0", domain="alpha", prompt=[Message(role="user", content="q")], target="seven")
    guided = plain.model_copy(update={"metadata": {"scaffold": {"prefix": "<a>", "guided": 0.5}}})
    assert [is_scaffolded(slot_task(guided, i, 8)) for i in range(8)] == [True] * 4 + [False] * 4
    assert slot_task(guided, 5, 8) == plain
    helped = Scaffold("alpha", ScaffoldConfig(examples=[{"question": "q1", "reply": "r1"}], hint="h", guided=True,
                                              share=0.25)).apply(plain).task
    assert len(helped.prompt) == 3 and helped.prompt[-1].content == "q\n\nh"
    assert [slot_task(helped, i, 8) == plain for i in range(8)] == [False] * 2 + [True] * 6  # the help taken out
    assert guided_slots(0.01, 8) == 1 and guided_slots(1.0, 8) == 8 and guided_slots(0.3, 8) == 2
    hint = plain.model_copy(update={"metadata": {"scaffold": {"prefix": "<a>"}}})
    assert all(slot_task(hint, i, 8) is hint for i in range(8))
    with pytest.raises(ValueError, match="at least one of"):
        ScaffoldConfig(guided=True)


def test_guided_groups_unaided_episodes_measure_success_without_help():
    """The driver's observation of a guided group: only the episodes that ran without the prefix
    count towards the scaffold's success without help (here 2 of 4, both right: 1.0)."""
    doms = [toy("alpha", ALPHA)]
    cur = CurriculumConfig.model_validate({"scaffold": {"alpha": {"prefix": "seven", "guided": True, "window": 2,
                                                                  "threshold": 0.9}}})
    drv = Driver(cur, doms, [1.0], seed=0, store=Store(":memory:"))
    task = doms[0].source.train_task(0)
    guided = drv.cur.scaffolds["alpha"].apply(task).task
    eps = []
    for i, r in enumerate([0.0, 0.0, 1.0, 1.0]):  # the guided two failed, the unaided two were right
        ep = Episode(task_id=task.id, domain="alpha", state=EpisodeState.done, score=Score(value=r))
        ep.turns.append(Turn(prompt_ids=[1], completion_ids=[2], logprobs=[0.0], text="x", finish_reason="stop",
                             policy_version=0))
        if i < 2:
            ep.info.extra["scaffold"] = {"prefix": "seven", "guided": 0.5}
        eps.append(ep)
    drv.observe(Group(task=guided, episodes=eps, state=GroupState.ready))
    assert drv.cur.scaffolds["alpha"].unaided == [1.0, 1.0]
    assert drv.cur.scaffolds["alpha"].removed_at is not None  # 1.0 >= 0.9 over the window of 2


def test_success_measured_on_a_missing_component_is_told_once_in_the_store():
    """`success` names a component the domain's scores do not have (a typo, or another verifier):
    the episodes count 0 - the scaffold stays - and the store records why, once."""
    doms = [toy("alpha", ALPHA)]
    cur = CurriculumConfig.model_validate({"scaffold": {"alpha": {"hint": "h", "schedule": "constant", "window": 2,
                                                                  "threshold": 0.5, "success": "strcit"}}})
    store = Store(":memory:")
    drv = Driver(cur, doms, [1.0], seed=0, store=store)
    task = doms[0].source.train_task(0)
    for _ in range(2):
        ep = Episode(task_id=task.id, domain="alpha", state=EpisodeState.done,
                     score=Score(value=1.0, components={"strict": 1.0}))
        ep.turns.append(Turn(prompt_ids=[1], completion_ids=[2], logprobs=[0.0], text="x", finish_reason="stop",
                             policy_version=0))
        drv.observe(Group(task=task, episodes=[ep, ep.model_copy()], state=GroupState.ready))
    assert drv.cur.scaffolds["alpha"].unaided == [0.0, 0.0] and drv.cur.scaffolds["alpha"].removed_at is None
    told = [e for e in store.events() if e[1] == "curriculum" and e[4] == "scaffold"]
    assert len(told) == 1 and "'strcit' counts 0 (its components: ['strict'])" in told[0][5]


# --- filter, replay, scaffold on the real loop --------------------------------------------------
def test_filter_drops_groups_without_signal_and_refills(tiny_run_config, tiny_model_path):
    """Under the band-pass filter no uniform group is trained; dropped ones carry the reason;
    each step still trains prompts_per_step groups while the draw budget lasts; the audit holds.
    At max_staleness 0 a dropped group is replaced by one the step asks for, so no other group is
    generated: every group drawn is trained or filtered, none left to go stale."""
    cfg = two_domains(tiny_run_config, "filter", {"filter": {"enabled": True, "max_draw_factor": 4}},
                      "run.steps=6", "rollout.group_size=4")
    assert cfg.async_.max_staleness == 0
    run = Run(cfg, domains=[toy("alpha", ALPHA), toy("beta", BETA)], log=lambda _m: None)
    res = asyncio.run(train_async(cfg, run=run, log=lambda _m: None))
    with closing(Store(cfg.run.dir + "/store.sqlite")) as store:
        trained = store.groups(state=GroupState.trained)
        assert trained and all(max(g.rewards) > min(g.rewards) for g in trained)
        dropped = store.groups(state=GroupState.dropped)
        filtered = [g for g in dropped if g.reason.startswith("filtered")]
        assert filtered and all(max(g.rewards) - min(g.rewards) < 1e-9 for g in filtered)
        assert filtered == dropped, sorted({g.reason.split(":")[0] for g in dropped})  # none stale, none left over
        assert audit(store).ok
    assert sum(m["filtered_groups"] for m in res.history) == len(filtered)
    for m in res.history:  # 3 per step unless the budget (4 x 3 draws) ran out
        assert m["filtered_groups"] >= 9 or len([g for g in trained if g.step == res.history.index(m) + 1]) == 3


def test_replay_trains_groups_again_corrected_and_the_audit_counts_it(tiny_run_config, tiny_model_path):
    """Replayed groups are loaded from the store, trained with the off-policy correction, recorded
    as replays (not second trainings), and the buffer survives a resume."""
    cur = {"replay": {"enabled": True, "share": 0.34, "min_signal": 0.0, "max_age": 20}}
    with pytest.raises(ConfigError, match="off_policy"):
        two_domains(tiny_run_config, "replay_bad", cur)
    cfg = two_domains(tiny_run_config, "replay", cur, "algorithm.off_policy=tis", "run.steps=6",
                      "run.checkpoint_every=3")
    run = Run(cfg, domains=[toy("alpha", ALPHA), toy("beta", BETA)], log=lambda _m: None)
    res = asyncio.run(train_async(cfg, run=run, log=lambda _m: None))
    replayed = sum(m["replayed_groups"] for m in res.history)
    assert replayed >= 4  # one of three groups per step once the buffer holds some
    with closing(Store(cfg.run.dir + "/store.sqlite")) as store:
        rep = audit(store)
        assert rep.ok and sum(rep.replayed.values()) == replayed and not rep.trained_twice
        assert any("replayed" in line for line in rep.lines())
    state = json.loads((run.checkpoints.latest() / "state.json").read_text())
    assert state["curriculum"]["replay"]["entries"]
    resumed = two_domains(tiny_run_config, "replay", cur, "algorithm.off_policy=tis", "run.steps=8",
                          "run.checkpoint_every=3")
    again = Run(resumed, resume=True, domains=[toy("alpha", ALPHA), toy("beta", BETA)], log=lambda _m: None)
    assert again.driver.cur.replay.state() == state["curriculum"]["replay"]
    again.close()


def scored(task: Task, rewards: list[float]) -> Group:
    eps = []
    for r in rewards:
        ep = Episode(task_id=task.id, domain=task.domain, state=EpisodeState.done, score=Score(value=r))
        ep.turns.append(Turn(prompt_ids=[1], completion_ids=[2], logprobs=[0.0], text="x", finish_reason="stop",
                             policy_version=0))
        eps.append(ep)
    return Group(task=task, episodes=eps, state=GroupState.ready)


def test_a_question_drawn_again_under_a_new_id_keeps_its_pass_rate():
    """A generator names each draw by its index, so one question comes back under ever new ids
    (the toy source: two words; reasoning-gym products: 100 questions). Pass rates are kept by the
    question's content, so a pool sees a mastered question when it recurs: with easy questions
    never accepted, once "say seven" has been answered right 8 times every later draw is "say
    three", though each of them has a fresh id. A scaffolded draw of a question shares its plain
    draw's pass rate."""
    doms = [toy("alpha", ALPHA)]
    cur = CurriculumConfig.model_validate({"pools": {"enabled": True, "min_attempts": 4,
                                                     "accept": {"easy": 0.0, "normal": 1.0, "hard": 1.0}}})
    drv = Driver(cur, doms, [1.0], seed=0, store=Store(":memory:"))
    first = next(t for t in (drv.plan(k) for k in range(20)) if t.target == "seven")
    drv.observe(scored(first, [1.0] * 8))
    later = [drv.plan(k) for k in range(100, 160)]
    assert {t.target for t in later} == {"three"} and len({t.id for t in later}) == 60

    plain = doms[0].source.train_task(5)
    helped = Driver(CurriculumConfig.model_validate({"scaffold": {"alpha": {"hint": "h", "schedule": "constant"}}}),
                    doms, [1.0], seed=0, store=Store(":memory:"))
    task = helped.plan(5)
    assert task.prompt != plain.prompt and task_key(task) == task_key(plain)  # the help is not the question
    helped.observe(scored(task, [1.0, 0.0]))
    assert helped.cur.rates.rate(task_key(plain)) == 0.5


def test_a_failed_task_comes_back_in_its_own_domains_draws():
    """Under revisit (share 1) the driver's next draw of a domain re-issues the task its last group
    failed, within that domain's turn of the balance; a task whose group had a right reply, and one
    whose visits are spent, does not come back."""
    doms = [toy("alpha", ALPHA), toy("beta", BETA)]
    cur = CurriculumConfig.model_validate({"mixing": {"balance": "trained"}, "revisit": {"enabled": True, "share": 1.0,
                                                                                        "visits": 1}})
    drv = Driver(cur, doms, [1.0, 1.0], seed=0, store=Store(":memory:"))
    first, second = drv.plan(0), drv.plan(1)
    assert {first.domain, second.domain} == {"alpha", "beta"} and "revisit" not in first.metadata
    drv.observe(scored(first, [0.0, 0.0, 0.0, 0.0]))  # failed: queued
    drv.observe(scored(second, [0.0, 1.0, 0.0, 0.0]))  # one right: not queued
    for t in (first, second):
        drv.settled(Group(task=t), trained=True)
    third, fourth = drv.plan(2), drv.plan(3)
    again = next(t for t in (third, fourth) if t.domain == first.domain)
    fresh = next(t for t in (third, fourth) if t.domain == second.domain)
    assert again.id == first.id and again.prompt == first.prompt and again.metadata == {**first.metadata, "revisit": 1}
    assert fresh.id != second.id and "revisit" not in fresh.metadata
    drv.observe(scored(again, [0.0] * 4))  # failed again, its one visit spent: not queued
    assert drv.cur.revisits.waiting() == {first.domain: 0}
    assert drv.metrics([scored(again, [0.0])], 2)[f"{first.domain}/revisited"] == 1.0


def test_a_task_every_reply_failed_comes_back_with_its_answer_and_the_right_reply_is_trained_on_the_plain_question():
    """revisit.hint through the driver and the rollout. A group all wrong has no advantage to
    give; its task comes back (share 1) with the hint on 2 of its 8 slots, and not under the
    domain's own scaffold on top. An engine that gets the answer only when the prompt holds it
    (a confidently wrong fact) writes it on those 2: they become guided samples with a positive
    advantage, trained against the plain question, and the 6 unaided ones a negative one."""
    doms = [toy("alpha", ALPHA)]
    cur = CurriculumConfig.model_validate({
        "revisit": {"enabled": True, "share": 1.0, "hint": "the word is {answer}", "hint_share": 0.25},
        "scaffold": {"alpha": {"hint": "one word", "schedule": "constant", "probe_share": 0.0, "threshold": None}}})
    drv = Driver(cur, doms, [1.0], seed=0, store=Store(":memory:"))
    first = drv.plan(0)
    assert first.prompt[-1].content.endswith("one word")  # the domain's scaffold, always on
    plain = first.model_copy(update={"prompt": [Message(role="user", content=first.prompt[-1].content[:-len("\n\none word")])],
                                     "metadata": {k: v for k, v in first.metadata.items() if k not in ("scaffold", "task_key")}})
    drv.observe(scored(plain, [0.0] * 8))  # an unscaffolded group, every reply wrong: queued
    back = drv.plan(1)
    assert back.id == plain.id and back.prompt[-1].content == f"{plain.prompt[-1].content}\n\nthe word is {plain.target}"
    assert back.metadata["scaffold"]["guided"] == 0.25 and task_key(back) == task_key(plain)
    engine = ScriptedEngine(lambda prompt, _c: plain.target if "the word is" in prompt else "wrong")
    episodes = [asyncio.run(run_episode(slot_task(back, i, 8), Recorder(), engine, SamplingParams(max_new_tokens=8)))
                for i in range(8)]
    samples, _ = build_samples([Group(task=back, episodes=episodes, state=GroupState.ready)], "grpo")
    assert [s.guided for s in samples] == [True] * 2 + [False] * 6
    assert [s.advantage > 0 for s in samples] == [True] * 2 + [False] * 6
    plain_ids = engine.renderer.chat_ids(plain.prompt)
    for s in samples[:2]:  # the right reply after the plain question, the hint nowhere in the trained context
        assert s.ids[:len(plain_ids)] == plain_ids and engine.renderer.decode(s.ids[len(plain_ids):]).startswith(plain.target)
    m = drv.metrics([Group(task=back, episodes=episodes, state=GroupState.ready)], 2)
    assert m["alpha/revisited"] == 1.0 and m["alpha/revisit_hinted"] == 1.0


@pytest.mark.parametrize("hint", [None, "the word is {answer}"])
def test_revisited_tasks_train_and_survive_a_resume(tiny_run_config, tiny_model_path, hint):
    """A run with revisits (plain, and back with a hint): some task ids are trained in more than
    one group, every group is accounted for by the audit, and the queues come back on resume."""
    cur = {"revisit": {"enabled": True, "share": 0.5, "hint": hint}}
    cfg = two_domains(tiny_run_config, "revisit", cur, "run.steps=6", "run.checkpoint_every=3", "rollout.group_size=4")
    run = Run(cfg, domains=[toy("alpha", ALPHA), toy("beta", BETA)], log=lambda _m: None)
    res = asyncio.run(train_async(cfg, run=run, log=lambda _m: None))
    revisited = sum(m.get("alpha/revisited", 0) + m.get("beta/revisited", 0) for m in res.history)
    with closing(Store(cfg.run.dir + "/store.sqlite")) as store:
        assert audit(store).ok
        per_task = Counter(g.task.id for g in store.groups(kind="train", state=GroupState.trained))
    assert revisited >= 1 and sum(n - 1 for n in per_task.values()) == revisited  # each revisit is one more group of a task
    if hint is not None:  # the toy's targets are words: every revisit came back with its hint
        assert sum(m.get("alpha/revisit_hinted", 0) + m.get("beta/revisit_hinted", 0) for m in res.history) == revisited
    state = json.loads((run.checkpoints.latest() / "state.json").read_text())
    resumed = two_domains(tiny_run_config, "revisit", cur, "run.steps=8", "run.checkpoint_every=3", "rollout.group_size=4")
    again = Run(resumed, resume=True, domains=[toy("alpha", ALPHA), toy("beta", BETA)], log=lambda _m: None)
    assert again.driver.cur.revisits.state() == state["curriculum"]["revisits"]
    again.close()


def test_scaffold_fades_and_never_reaches_evaluation(tiny_run_config, tiny_model_path):
    """A hint scaffold on alpha: early groups are scaffolded (the hint in the prompt), none after
    fade_end; the held-out tasks are never scaffolded; the level is in the step metrics."""
    cur = {"scaffold": {"alpha": {"hint": "please say the word", "fade_start": 2, "fade_end": 6, "probe_share": 0.0,
                                  "threshold": None}}}
    cfg = two_domains(tiny_run_config, "scaffold", cur, "run.steps=8", "eval.before=true", "eval.after=true")
    run = Run(cfg, domains=[toy("alpha", ALPHA), toy("beta", BETA)], log=lambda _m: None)
    res = asyncio.run(train_async(cfg, run=run, log=lambda _m: None))
    levels = [m["alpha/scaffold_level"] for m in res.history]
    assert levels == [1.0, 1.0, 0.75, 0.5, 0.25, 0.0, 0.0, 0.0]
    with closing(Store(cfg.run.dir + "/store.sqlite")) as store:
        alpha = [g for g in store.groups(state=GroupState.trained) if g.task.domain == "alpha"]
        early = [g for g in alpha if g.step <= 2]
        late = [g for g in alpha if g.step >= 6]
        assert early and all("scaffold" in g.task.metadata for g in early)
        assert all("please say the word" in g.task.prompt[-1].content for g in early)
        assert late and not any("scaffold" in g.task.metadata for g in late)
        evals = store.groups(kind="eval")
        assert evals and not any("scaffold" in g.task.metadata for g in evals)


# --- levels -----------------------------------------------------------------------------------------
def test_level_sources_tag_their_ids_and_are_graded_at_their_own_parameters():
    """A level source draws at its parameters under tagged ids, never from the held-out set; the
    domain's environment grades its tasks against the level's own entries."""
    src = ReasoningGymSource("arith", "chain_sum", {"min_terms": 2, "max_terms": 2, "min_digits": 1, "max_digits": 1},
                             DEFAULT_SYSTEM_PROMPT, seed=0, eval_seed=10_000_019, eval_size=20)
    dom = MathDomain("arith", src, RewardWeights())
    hard = src.with_params({"min_digits": 3, "max_digits": 3}, "@L1")
    for i in range(5):
        t = hard.train_task(i)
        assert t.id.startswith("chain_sum@L1/train/") and t.metadata["draw"]["params"]["min_digits"] == 3
        assert all(len(n) == 3 for n in t.metadata["entry"]["question"].split(":")[-1].replace("=", " ")
                   .replace("+", " ").replace("-", " ").split())
        env = dom.make_env()
        asyncio.run(env.reset(t))
        right = asyncio.run(env.step(f"<answer>{t.target}</answer>"))
        env2 = dom.make_env()
        asyncio.run(env2.reset(t))
        wrong = asyncio.run(env2.step(f"<answer>{int(t.target) + 1}</answer>"))
        assert right.score.value == 1.0 and wrong.score.value < 1.0
    assert src.train_task(0).id == "chain_sum/train/0"  # the base source is unchanged


def test_levels_need_a_generated_domain(tiny_run_config):
    cfg = two_domains(tiny_run_config, "levels_bad", {"levels": {"alpha": {"levels": [{"x": 1}]}}})
    with pytest.raises(ValueError, match="takes no generator parameters"):
        Run(cfg, domains=[toy("alpha", ALPHA), toy("beta", BETA)], log=lambda _m: None)


def test_unknown_domain_in_a_curriculum_section_is_a_config_error(tiny_run_config):
    with pytest.raises(ConfigError, match="no domain named alhpa"):
        two_domains(tiny_run_config, "typo", {"scaffold": {"alhpa": {"hint": "x"}}})


# --- drift guard: a domain made to regress on purpose -----------------------------------------------
class PoisonEnv(ToyEnv):
    """Training episodes of a poisoned domain score 1 - the true score once ``flag["on"]``;
    held-out episodes always score truly."""

    def __init__(self, name: str, flag: dict) -> None:
        super().__init__(name)
        self.flag = flag

    async def step(self, reply: str) -> Observation:
        obs = await super().step(reply)
        if self.flag["on"] and "/train/" in self.task.id and obs.score is not None:
            obs.score = obs.score.model_copy(update={"value": 1.0 - obs.score.value})
        return obs


class PoisonDomain(ToyDomain):
    def __init__(self, *a, flag: dict, **kw) -> None:
        super().__init__(*a, **kw)
        self.flag = flag

    def make_env(self) -> PoisonEnv:
        return PoisonEnv(self.name, self.flag)


def run_turned_at_40(tiny_run_config, run_dir: str, drift: dict, beta_cls, flag: dict, *overrides: str):
    """A Run of alpha and a ``beta_cls`` beta (toy targets) with the drift guard's section
    ``drift``, a held-out evaluation every 5 steps from step 0, and ``flag["on"]`` turned on from
    step 41: both domains learn honestly for 40 steps first. Returns (run, config, log lines)."""
    cfg = two_domains(tiny_run_config, run_dir, {"drift": drift}, "run.eval_every=5", "rollout.prompts_per_step=8",
                      "rollout.group_size=8", "trainer.lr=0.005", "eval.before=true", "eval.after=false", *overrides)
    torch.manual_seed(0)
    random.seed(0)
    lines: list[str] = []
    run = Run(cfg, domains=[toy("alpha", ALPHA), beta_cls("beta", BETA, seed=3, eval_size=16, flag=flag)],
              log=lines.append)
    orig_step = run.train_step

    async def step_turned(step: int):
        flag["on"] = step > 40
        return await orig_step(step)

    run.train_step = step_turned  # type: ignore[method-assign]
    return run, cfg, lines


@pytest.mark.parametrize("reaction", ["warn", "upweight", "rollback", "escalate"])
def test_drift_guard_catches_a_poisoned_domain(tiny_run_config, tiny_model_path, reaction, tmp_path):
    """Both domains learn for 40 steps; then beta's training reward is inverted (poisoned) and its
    held-out score falls. The guard, on held-out evaluations every 5 steps, finds the drop
    significant (paired test on the same tasks), reacts as configured, records it in the store,
    shows it in the step summary and in the audit; nothing is flagged before the poison.
    ``escalate``: up-weight first; the poison stays on, so the next check rolls back."""
    flag = {"on": False}
    drift = {"enabled": True, "margin": 0.1, "patience": 1, "reaction": reaction, "min_tasks": 10}
    if reaction == "escalate":
        drift.update(reaction="upweight", escalate_after=1)
    run, cfg, lines = run_turned_at_40(tiny_run_config, f"drift_{reaction}", drift, PoisonDomain, flag,
                                       "run.steps=90", "run.checkpoint_every=5", "run.keep_checkpoints=1")
    caught: dict[str, object] = {}
    orig_rollback = run.rollback

    async def rollback(to_step: int, step: int) -> None:
        mixer_before = run.driver.state()["mixer"]
        await orig_rollback(to_step, step)
        exported = run.trainer.export_weights()
        folder = run.checkpoints.dir / f"step_{to_step:06d}"
        saved = load_file(str(folder / "model.safetensors"))
        caught.setdefault("same", all(torch.equal(exported[k], saved[k]) for k in saved))
        # the curriculum's view of the policy went back with it (the mixer's signal: it moved since)
        mixer_then = json.loads((folder / "state.json").read_text())["curriculum"]["mixer"]
        caught.setdefault("rewound", run.driver.state()["mixer"] == mixer_then != mixer_before)
        caught.setdefault("to", to_step)  # the first roll-back (the poison stays on: more follow)

    run.rollback = rollback  # type: ignore[method-assign]
    asyncio.run(train_async(cfg, run=run, log=lines.append))

    guard = [ln for ln in lines if ln.startswith("drift guard at step")]
    assert guard and "beta:" in guard[0], lines
    first = int(guard[0].split()[4].rstrip(":"))
    assert first > 40  # no false alarm while both domains learned honestly
    # (later, alpha may be flagged too: the poisoned updates move the weights both domains share)
    with closing(Store(cfg.run.dir + "/store.sqlite")) as store:
        events = [e for e in store.events() if e[1] == "curriculum"]
        assert events and events[0][2] == "beta" and events[0][6] == first
        assert f"drift:{drift['reaction']}" in {e[4] for e in events}
        rep = audit(store)
        assert rep.ok and any(f"drift:{drift['reaction']}" in line for line in rep.lines())
        evals = {s: m for s, _k, m in store.metrics("eval")}
    # under the mean, at the flagged check: more of beta's held-out tasks lost since its best than
    # gained, each of them below its own best (forgotten); nothing to forget at the first evaluation
    at = evals[first]
    assert at["beta/lost"] > at["beta/gained"] and at["beta/forgotten"] >= at["beta/lost"] > 0, at
    assert evals[0]["beta/forgotten"] == evals[0]["alpha/forgotten"] == 0.0
    last = evals[max(evals)]  # the run keeps the last evaluation's verdicts, with the counts it wrote
    assert {d.domain: d.forgotten for d in run.guard_decisions} == {n: last[f"{n}/forgotten"] for n in ("alpha", "beta")}
    summaries = [ln for ln in lines if ln.startswith(f"step {first + 1}/")]
    assert summaries and "beta" in summaries[0] and drift["reaction"] in summaries[0]
    if reaction == "escalate":  # up-weighted at the first regressed check, rolled back at the next
        beta = [e for e in events if e[2] == "beta"]
        assert beta[0][4] == "drift:upweight" and beta[1][4] == "drift:rollback", beta
        assert beta[1][6] == first + 5 and caught["same"] is True and caught["to"] <= first - 5
        assert caught["rewound"] is True
    if reaction == "upweight":
        assert run.driver.weights()["beta"] in (2.0, 1.0)  # 2 while regressed; back to 1 once it is not
        assert any(e[4] == "drift:upweight" and e[2] == "beta" for e in events)
    if reaction == "rollback":
        assert caught["same"] is True and caught["to"] <= first - 5 and caught["rewound"] is True
        assert "rolled back to the checkpoint of step" in "\n".join(lines)


def test_resume_restores_the_curriculum_and_refuses_a_changed_one(tiny_run_config, tiny_model_path):
    cur = {"scaffold": {"alpha": {"hint": "please", "fade_end": 50, "window": 4, "threshold": 0.99}},
           "mixing": {"balance": "trained"}}
    cfg = two_domains(tiny_run_config, "resume", cur, "run.steps=4", "run.checkpoint_every=2")
    run = Run(cfg, domains=[toy("alpha", ALPHA), toy("beta", BETA)], log=lambda _m: None)
    asyncio.run(train_async(cfg, run=run, log=lambda _m: None))
    saved = json.loads((run.checkpoints.latest() / "state.json").read_text())["curriculum"]
    assert saved["scaffolds"]["alpha"]["unaided"] or saved["sampler"]["trained"]["alpha"] > 0
    more = two_domains(tiny_run_config, "resume", cur, "run.steps=6", "run.checkpoint_every=2")
    again = Run(more, resume=True, domains=[toy("alpha", ALPHA), toy("beta", BETA)], log=lambda _m: None)
    assert again.driver.state()["scaffolds"] == saved["scaffolds"]
    assert again.driver.state()["sampler"]["trained"] == saved["sampler"]["trained"]
    again.close()
    changed = two_domains(tiny_run_config, "resume", {**cur, "mixing": {"balance": "drawn"}}, "run.steps=6")
    with pytest.raises(CheckpointError, match="curriculum"):
        Run(changed, resume=True, domains=[toy("alpha", ALPHA), toy("beta", BETA)], log=lambda _m: None)


def test_long_context_levels_change_the_haystack_length(tmp_path):
    """A length curriculum on longctx: a level source draws at its own lengths under tagged ids;
    the base source and its held-out set keep theirs."""
    from practicum.domains.longctx import LongctxOptions
    from practicum.domains.longctx.env import LongctxSource

    opts = LongctxOptions.model_validate({"corpora": ["kjv"], "kinds": ["needle"], "lengths": [10000]})
    base = LongctxSource("lc", opts, 3, tmp_path, [])
    longer = base.with_params({"lengths": [20000]}, "@L1")
    t = longer.train_task(0)
    assert t.id.startswith("longctx@L1/kjv/needle/20000/")
    assert base.train_task(0).id.startswith("longctx/kjv/needle/10000/")
    assert all("/10000/" in e.id for e in base.eval_tasks()[:2])
    with pytest.raises(Exception, match="lengths"):
        base.with_params({"lengths": "long"}, "@L2")


def test_filtered_groups_count_as_served_for_the_trained_balance():
    """A domain whose groups the filter drops has had its turn: under balance 'trained' it is not
    drawn again and again (it would starve the others), while a stale or failed group's domain is."""
    doms = [toy("alpha", ALPHA), toy("beta", BETA)]
    drv = Driver(CurriculumConfig.model_validate({"mixing": {"balance": "trained"}}), doms, [1.0, 1.0], seed=0,
                 store=Store(":memory:"))
    drawn = Counter()
    for k in range(40):
        task = drv.plan(k)
        drawn[task.domain] += 1
        g = Group(id=f"g{k}", task=task, draw=k)
        if task.domain == "beta":  # every beta group is all-wrong: filtered
            g.reason = "filtered: too hard (mean reward 0.00)"
            drv.settled(g, trained=False)
        else:
            drv.settled(g, trained=True)
    assert drawn == {"alpha": 20, "beta": 20}
    stale = Driver(CurriculumConfig.model_validate({"mixing": {"balance": "trained"}}), doms, [1.0, 1.0], seed=0,
                   store=Store(":memory:"))
    first = stale.plan(0)
    stale.settled(Group(id="g0", task=first, draw=0, reason="stale: generated 3 versions ago"), trained=False)
    assert stale.plan(1).domain == first.domain  # it still lags: drawn again


# --- drift guard: a domain made to collapse onto one reply -----------------------------------------
class OneReplyEnv(PoisonEnv):
    """A hacked verifier, once ``flag["on"]``: training episodes score how much of the reply is
    "one", whatever the task asks; held-out episodes always score truly."""

    async def step(self, reply: str) -> Observation:
        obs = await ToyEnv.step(self, reply)
        if self.flag["on"] and "/train/" in self.task.id and obs.score is not None:
            hit = word_score(reply, "one")
            obs.score = obs.score.model_copy(update={"value": hit, "components": {"hit": hit}})
        return obs


class OneReplyDomain(PoisonDomain):
    def make_env(self) -> OneReplyEnv:
        return OneReplyEnv(self.name, self.flag)


def test_drift_guard_catches_a_domain_collapsing_onto_one_reply(tiny_run_config, tiny_model_path):
    """Both domains learn for 40 steps (beta: "say one" / "say two"); then beta's verifier is
    hacked to reward "one" whatever the task asks. With ``collapse: 0.8`` the guard flags the
    first evaluation where one reply answers 80% of beta's held-out tasks after they were told
    apart, records it, shows it in the step summary and reacts (warn); nothing before the hack."""
    flag = {"on": False}
    drift = {"enabled": True, "patience": 1, "reaction": "warn", "min_tasks": 10, "collapse": 0.8}
    run, cfg, lines = run_turned_at_40(tiny_run_config, "drift_collapse", drift, OneReplyDomain, flag,
                                       "run.steps=70", "run.checkpoint_every=100")
    asyncio.run(train_async(cfg, run=run, log=lines.append))
    guard = [ln for ln in lines if ln.startswith("drift guard at step") and "beta:" in ln]
    assert guard and all(int(ln.split()[4].rstrip(":")) > 40 for ln in guard), lines  # nothing before the hack
    collapse = [ln for ln in guard if "the same reply to" in ln]
    assert collapse and "-> warn" in collapse[0], guard
    first = int(collapse[0].split()[4].rstrip(":"))
    share, reply = run.driver.cur.drift.same["beta"][first]
    assert share >= 0.8 and "one" in reply
    hist = run.driver.cur.drift.history["beta"]
    mean = {s: sum(v.values()) / len(v) for s, v in hist.items()}
    assert mean[first] >= max(m for s, m in mean.items() if s <= 40)  # no drop there: only the collapse check saw it
    with closing(Store(cfg.run.dir + "/store.sqlite")) as store:
        events = [e for e in store.events() if e[1] == "curriculum" and e[2] == "beta" and e[6] == first]
        assert events and events[0][4] == "drift:warn" and "the same reply to" in events[0][5]
    summaries = [ln for ln in lines if ln.startswith(f"step {first + 1}/")]
    assert summaries and "beta" in summaries[0] and "warn" in summaries[0]
