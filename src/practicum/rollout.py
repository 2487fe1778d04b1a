"""Rollouts: run many episodes at once, in lockstep turns, through one engine.

Each turn, every episode that is still running contributes its context to one batched
``generate`` call; each reply then goes to that episode's own environment. Episodes finish
independently (``done``, a turn limit, or a recorded failure), so single-turn and multi-turn
domains share this loop. A :class:`~practicum.errors.RolloutFailure` raised by an environment
ends that episode with the error recorded and score 0. Any other exception is a bug: raised
while the environment reads the model's reply (``step``, ``finish``), it fails that episode as an
environment failure with the traceback in the log (a reply can be anything; one that trips a
verifier must not end the run); raised anywhere else (``reset``, the engine) it propagates.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar

from practicum.curriculum.scaffold import unaided_messages
from practicum.engines.base import Engine, SamplingParams
from practicum.envs.base import Environment
from practicum.errors import EnvironmentFailure, RolloutFailure
from practicum.records import (
    ACTIVE_EPISODE,
    EndReason,
    Episode,
    EpisodeError,
    EpisodeState,
    Group,
    GroupState,
    Message,
    Score,
    Task,
    Turn,
)
from practicum.sandbox.meter import Meter, metering
from practicum.tools import with_tool_prompt

log = logging.getLogger(__name__)

T = TypeVar("T")


@dataclass
class _Live:
    episode: Episode
    env: Environment
    ids: list[int]  # the full context so far, as token ids
    tools: list[dict[str, Any]] | None = None  # schemas rendered by the chat template (None: not, or none)
    prefix: str = ""  # forced start of the next reply (a scaffold's), context for the model, part of the reply for the env
    forced: list[int] = dataclasses.field(default_factory=list)  # its token ids, which the engine continues
    train_forced: bool = False  # guided scaffold: the forced ids are trained as the model's own (mask 1), not context
    shown: list[int] | None = None  # guided scaffold: the helped start of the context the engine sees instead of
    plain: int = 0  # ... the first `plain` ids of `ids` (the plain prompt, which is what is trained)

    def context(self) -> list[int]:
        """What the engine continues: the context (its start as the engine was shown it), then any
        forced start of the reply."""
        ids = self.ids if self.shown is None else self.shown + self.ids[self.plain:]
        return ids + self.forced


async def run_episodes(
    tasks: list[Task],
    make_env: Callable[[Task], Environment],
    engine: Engine,
    params: SamplingParams,
    max_turns: int = 1,
    max_tokens: int | None = None,
    max_seconds: float | None = None,
) -> list[Episode]:
    """Run one episode per task and return them, in order, each done or failed.

    Limits end an episode cleanly with its reason in ``Episode.info.end_reason``:
    ``turn_limit`` (``max_turns`` model turns), ``token_limit`` (``max_tokens`` generated tokens
    in all), ``time_limit`` (``max_seconds`` of wall time). The environment's ``finish(reason)``
    scores the state reached (a terminal task runs its tests on it), or gives no score (the
    episode scores 0).
    """
    envs = [make_env(task) for task in tasks]
    live = list(await asyncio.gather(*(_start(task, env, engine) for task, env in zip(tasks, envs))))

    for turn_no in range(max_turns):
        active = [x for x in live if x.episode.state in ACTIVE_EPISODE]
        if not active:
            break
        turn_params = dataclasses.replace(params, keep_prefix=turn_no + 1 < max_turns)
        try:
            results: list[Any] = list(await engine.generate([x.context() for x in active], turn_params))
        except RolloutFailure as e:  # an engine failure is the episodes' record, never the caller's crash
            submit = getattr(engine, "submit", None)
            if submit is None or len(active) == 1:
                results = [e] * len(active)
            else:  # one request's failure (an endpoint's time-out) must not fail the others: one by one
                results = list(await asyncio.gather(*(submit(x.context(), turn_params) for x in active),
                                                    return_exceptions=True))
        for x, r in zip(active, results):
            if isinstance(r, RolloutFailure):
                _fail(x.episode, r)
                await x.env.close()
            elif isinstance(r, BaseException):
                raise r
        steps = [_advance(x, c, engine, turn_no + 1 == max_turns) for x, c in zip(active, results)
                 if not isinstance(c, BaseException)]
        await asyncio.gather(*steps)
        ends = []
        for x in active:
            if x.episode.state not in ACTIVE_EPISODE:
                continue
            generated = sum(len(t.completion_ids) for t in x.episode.turns)
            if max_tokens is not None and generated >= max_tokens:
                ends.append(_end(x, "token_limit", f"{generated} tokens generated (limit {max_tokens})"))
            elif max_seconds is not None and time.time() - x.episode.started_at >= max_seconds:
                ends.append(_end(x, "time_limit", f"episode ran past {max_seconds} s"))
        await asyncio.gather(*ends)

    await asyncio.gather(*(_end(x, "turn_limit", f"no final answer in {max_turns} turns")
                           for x in live if x.episode.state in ACTIVE_EPISODE))
    for x in live:
        x.episode.seconds = time.time() - x.episode.started_at
    return [x.episode for x in live]


StateHook = Callable[[Episode], Awaitable[None] | None]


async def run_episode(
    task: Task,
    env: Environment,
    engine: Engine,
    params: SamplingParams,
    max_turns: int = 1,
    max_tokens: int | None = None,
    max_seconds: float | None = None,
    on_state: StateHook | None = None,
    episode: Episode | None = None,
) -> Episode:
    """Run one episode on its own, turn by turn, and return it ready (scored) or failed.

    The same rules as :func:`run_episodes` (limits, failures as data), but nothing waits for
    other episodes: ``engine`` batches concurrent calls itself (:class:`BatchingEngine`).
    ``on_state(episode)`` is called after every lifecycle transition (generating, executing,
    scoring, ready, failed), so that the store records it when it happens. An engine failure
    (:class:`~practicum.errors.EngineFailure`) fails the episode like any rollout failure.
    """

    async def moved(state: EpisodeState) -> None:
        x.episode.state = state
        if on_state is not None:
            r = on_state(x.episode)
            if r is not None:
                await r

    x = await _start(task, env, engine, episode)
    if on_state is not None and x.episode.state == EpisodeState.failed:
        await moved(EpisodeState.failed)
    for turn_no in range(max_turns):
        if x.episode.state not in ACTIVE_EPISODE:
            break
        await moved(EpisodeState.generating)
        turn_params = dataclasses.replace(params, keep_prefix=turn_no + 1 < max_turns,
                                          seed=None if params.seed is None else params.seed + 7919 * turn_no)
        try:
            [completion] = await engine.generate([x.context()], turn_params)
        except RolloutFailure as e:
            _fail(x.episode, e)
            await x.env.close()
            break
        await moved(EpisodeState.executing)
        await _advance(x, completion, engine, turn_no + 1 == max_turns)
        if x.episode.state not in ACTIVE_EPISODE:
            break
        generated = sum(len(t.completion_ids) for t in x.episode.turns)
        if max_tokens is not None and generated >= max_tokens:
            await moved(EpisodeState.scoring)
            await _end(x, "token_limit", f"{generated} tokens generated (limit {max_tokens})")
        elif max_seconds is not None and time.time() - x.episode.started_at >= max_seconds:
            await moved(EpisodeState.scoring)
            await _end(x, "time_limit", f"episode ran past {max_seconds} s")
    if x.episode.state in ACTIVE_EPISODE:
        await moved(EpisodeState.scoring)
        await _end(x, "turn_limit", f"no final answer in {max_turns} turns")
    x.episode.seconds = time.time() - x.episode.started_at
    if on_state is not None:
        await moved(x.episode.state)
    return x.episode


async def _start(task: Task, env: Environment, engine: Engine, episode: Episode | None = None) -> _Live:
    ep = episode if episode is not None else Episode(task_id=task.id, domain=task.domain)
    ep.state = EpisodeState.executing
    try:
        obs = await _metered(ep, env.reset(task))
    except RolloutFailure as e:
        _fail(ep, e)
        await env.close()
        return _Live(ep, env, [])
    ep.messages = list(obs.messages)
    tools = [t.schema() for t in env.tools()] or None
    renderer = engine.renderer
    if tools and renderer.supports_tools:
        ep.info.tools_presented = "chat_template"
    elif tools:  # the documented system-prompt convention (practicum.tools)
        ep.messages = with_tool_prompt(ep.messages, tools)
        ep.info.tools_presented = "system_prompt"
    use_tools = tools if tools and renderer.supports_tools else None
    live = _Live(ep, env, renderer.chat_ids(ep.messages, tools=use_tools) if use_tools else renderer.chat_ids(ep.messages),
                 use_tools)
    marks = task.metadata.get("scaffold")
    if marks:  # a scaffold helps this episode (see practicum.curriculum.scaffold)
        ep.info.extra["scaffold"] = {k: marks.get(k) for k in ("examples", "hint", "prefix", "guided")}
        if marks.get("guided"):  # the engine sees the help; the episode, and so the update, the plain prompt
            try:
                ep.messages = unaided_messages(ep.messages, marks)
            except ValueError as e:  # the environment moved the help: a recorded failure, not a crash
                _fail(ep, EnvironmentFailure(f"task {task.id!r}: {e}"))
                await env.close()
                return _Live(ep, env, [])
            live.shown, live.ids = live.ids, (renderer.chat_ids(ep.messages, tools=use_tools) if use_tools
                                              else renderer.chat_ids(ep.messages))
            live.plain = len(live.ids)
    prefix = forced_prefix(task)
    if prefix:  # its tokens follow the generation cue: context (mask 0), or under a guided scaffold the model's own (mask 1)
        live.prefix, live.forced = prefix, renderer.text_ids(prefix)
        live.train_forced = bool(marks.get("guided"))
    return live


def forced_prefix(task: Task) -> str:
    """The forced start of the first reply a scaffolded task carries (see
    :mod:`practicum.curriculum.scaffold`), or ""."""
    return str((task.metadata.get("scaffold") or {}).get("prefix") or "")


def was_helped(ep: Episode) -> bool:
    """Whether a scaffold helped this episode (its prompt, or the start of its reply)."""
    return "scaffold" in ep.info.extra


def was_guided(ep: Episode) -> bool:
    """Whether a guided scaffold helped this episode: the engine saw help that the context it is
    trained against lacks (see :mod:`practicum.curriculum.scaffold`)."""
    return bool((ep.info.extra.get("scaffold") or {}).get("guided"))


async def _end(x: _Live, reason: EndReason, message: str) -> None:
    """End a running episode at a limit: let the environment score what was reached."""
    ep = x.episode
    ep.errors.append(EpisodeError(kind=reason, message=message))
    ep.info.end_reason = reason
    try:
        obs = await _on_reply(ep, x.env.finish(reason))
    except RolloutFailure as e:
        _fail(ep, e)
        await x.env.close()
        return
    if obs.score is not None:
        ep.score = obs.score
        ep.info.merge(obs.info)
    else:
        ep.score = Score(value=0.0, explanation=f"{reason}: {message}")
    ep.state = EpisodeState.done
    await x.env.close()


async def _advance(x: _Live, completion, engine: Engine, last_turn: bool) -> None:
    ep = x.episode
    reply, x.prefix = x.prefix + completion.text, ""  # the environment reads the forced prefix as part of the reply
    if x.train_forced:  # forced tokens as the model's own: the behaviour policy emitted them with probability 1
        prompt_ids, ids, logps, text = x.ids, x.forced + completion.ids, [0.0] * len(x.forced) + completion.logprobs, reply
    else:
        prompt_ids, ids, logps, text = x.ids + x.forced, completion.ids, completion.logprobs, completion.text
    x.ids, x.forced, x.train_forced = x.ids + x.forced, [], False
    ep.turns.append(
        Turn(
            prompt_ids=list(prompt_ids),
            completion_ids=ids,
            logprobs=logps,
            text=text,
            finish_reason=completion.finish_reason,
            policy_version=completion.policy_version,
            gen_seconds=completion.seconds,
        )
    )
    ep.messages.append(Message(role="assistant", content=reply))
    x.ids = x.ids + completion.ids
    try:
        obs = await _on_reply(ep, x.env.step(reply))
    except RolloutFailure as e:
        _fail(ep, e)
        await x.env.close()
        return
    ep.info.merge(obs.info)
    if obs.done:
        ep.score = obs.score if obs.score is not None else Score(value=0.0, explanation="environment gave no score")
        ep.info.end_reason = "done"
        ep.state = EpisodeState.done
        await x.env.close()
        return
    if not last_turn:
        x.ids = x.ids + engine.renderer.append_ids(ep.messages, obs.messages, x.ids, tools=x.tools)
    ep.messages.extend(obs.messages)


async def _on_reply(ep: Episode, call: Awaitable[T]) -> T:
    """An environment call that reads the model's reply (``step``, ``finish``). A reply can be
    anything, so an exception other than a RolloutFailure that it sets off (a verifier's bug on
    output it never expected) fails this episode as an environment failure - logged with its
    traceback, retried and kept out of the loss like any other - and does not stop the run; a
    bug that fails every group still stops it (``async.stop_after_failed_groups``)."""
    try:
        return await _metered(ep, call)
    except RolloutFailure:
        raise
    except Exception as e:  # noqa: BLE001 - see the docstring
        log.exception("episode %s: the environment raised on the model's reply", ep.task_id)
        raise EnvironmentFailure(f"unexpected {type(e).__name__} while reading the reply: {e}") from e


async def _metered(ep: Episode, call: Awaitable[T]) -> T:
    """An environment call; the sandbox executions it makes are charged to the episode
    (``Episode.info.sandbox_cpu_s`` and ``sandbox_runs``, see :mod:`practicum.sandbox.meter`)."""
    meter = Meter()
    try:
        with metering(meter):
            return await call
    finally:
        ep.info.sandbox_cpu_s += meter.cpu_s
        ep.info.sandbox_runs += meter.runs


def _fail(ep: Episode, e: RolloutFailure) -> None:
    ep.errors.append(EpisodeError(kind=e.kind, message=str(e)))
    ep.info.end_reason = "failed"
    ep.score = Score(value=0.0, explanation=f"{e.kind} failure: {e}")
    ep.state = EpisodeState.failed


async def run_groups(
    tasks: list[Task],
    group_size: int,
    make_env: Callable[[Task], Environment],
    engine: Engine,
    params: SamplingParams,
    max_turns: int = 1,
    max_tokens: int | None = None,
    max_seconds: float | None = None,
) -> list[Group]:
    """Roll out ``group_size`` episodes of each task in one batch and return scored groups."""
    flat = [t for t in tasks for _ in range(group_size)]
    episodes = await run_episodes(flat, make_env, engine, params, max_turns, max_tokens, max_seconds)
    groups = []
    for i, task in enumerate(tasks):
        eps = episodes[i * group_size:(i + 1) * group_size]
        groups.append(Group(task=task, episodes=eps, state=GroupState.scored, policy_version=engine.policy_version))
    return groups
