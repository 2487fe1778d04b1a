"""The curriculum in the training loop: what :class:`practicum.loop.Run` calls, and when.

:class:`Driver` holds a run's :class:`~practicum.curriculum.parts.Curriculum` and is the
orchestrator's planner (:class:`practicum.orchestrator.Planner`):

* **draw** (:meth:`plan`, the k-th task): the domain by a weighted coin seeded by (seed, k) or,
  under ``mixing.balance: trained``, by the deficit sampler; under ``revisit.enabled``, with its
  share, a task of that domain that failed before (with ``revisit.hint``, its answer in reach of
  a guided share of the group, and then not scaffolded again); else the task from the domain's source at
  the level its level curriculum draws; kept or redrawn by its difficulty pool; scaffolded by the
  domain's scaffold with the probability the schedule gives at the current step. With the
  defaults (static weights, nothing on) the k-th task is exactly :func:`~practicum.orchestrator.draw_task`'s.
* **group fate** (:meth:`settled`): trained, or left without training (dropped, failed), for the
  sampler's counts.
* **a step's groups** (:meth:`take`): every group the trainer takes is observed (pass rate per
  task, the level curriculum, the scaffold's success without help); under ``filter.enabled``
  groups outside the band are dropped (reason ``filtered: ...``) and more are taken, within
  ``max_draw_factor`` x the step's groups.
* **replay** (:meth:`replay_batch`): the step's share of groups loaded back from the store.
* **rewards** (:meth:`rewards`): shaped and normalised per domain, each component logged.
* **after the update** (:meth:`after_update`): trained groups offered to the replay buffer, the
  mixer fed, the sampler's targets moved.
* **after an evaluation** (:meth:`on_eval`): the drift guard's verdicts; up-weights applied here,
  a roll-back left to the run (it owns the checkpoints and the trainer).

Every decision worth auditing (a level change, a scaffold removed, a replay, a drift verdict) is
written to the store as an event (:meth:`practicum.store.Store.record_event`) and kept in
:attr:`notes` for the next step summary.
"""

from __future__ import annotations

import random
from collections import Counter
from collections.abc import Iterable
from typing import Any

from practicum.curriculum.difficulty import REVISIT, TASK_KEY, band_pass, refill, task_key
from practicum.curriculum.drift import DriftDecision
from practicum.curriculum.parts import Curriculum, CurriculumConfig
from practicum.curriculum.retain import retained_advantages
from practicum.curriculum.scaffold import is_scaffolded
from practicum.curriculum.shaping import attempt_of, shape_group
from practicum.envs.base import Domain
from practicum.eval_metrics import same_reply
from practicum.orchestrator import draw_seed
from practicum.records import Group, Task
from practicum.rollout import was_helped
from practicum.store import Store

POOL_REDRAWS = 16  # most candidates a difficulty pool may reject for one draw (the last one is kept)
REDRAW_STRIDE = 1_000_003  # candidate j of draw k is the source's task k + j x stride
FILTERED = "filtered"  # the head of the drop reason of a group the band-pass filter left out


def trainable_rewards(group: Group) -> list[float]:
    return [e.reward for e in group.episodes if e.trainable]


class Driver:
    def __init__(self, cfg: CurriculumConfig, domains: list[Domain], weights: list[float], seed: int,
                 store: Store) -> None:
        self.cfg, self.domains, self.raw, self.seed, self.store = cfg, domains, weights, seed, store
        self.cur = Curriculum(cfg, {d.name: w for d, w in zip(domains, weights)})
        self.by_name = {d.name: d for d in domains}
        self.factors = {d.name: 1.0 for d in domains}  # drift up-weights
        self.step = 1  # the step the groups drawn now are for (the loop sets it)
        self.version = 0  # the policy version now (the loop sets it)
        self.notes: list[str] = []  # for the next step summary
        self.step_counts: Counter = Counter()  # this step's filtered/replayed groups
        self.taken: list[Group] = []  # this step's groups taken from the orchestrator, kept or filtered (their spend)
        self._level_sources: dict[tuple[str, int], Any] = {}
        for name in cfg.levels:
            if not hasattr(self.by_name[name].source, "with_params"):
                raise ValueError(f"curriculum.levels.{name}: domain {name!r}'s task source takes no generator "
                                 "parameters (levels work on generated domains: reasoning-gym and longctx sources)")
        self._sync_targets()

    # --- the draw -----------------------------------------------------------------------------------
    def weights(self) -> dict[str, float]:
        """Draw weight of each domain now: configured (static) or adaptive, times any drift up-weight."""
        if self.cfg.mixing.mode == "static":
            base = {d.name: self.cfg.mixing.weights.get(d.name, w) for d, w in zip(self.domains, self.raw)}
        else:
            base = self.cur.mixer.targets()
        return {n: w * self.factors[n] for n, w in base.items()}

    def _sync_targets(self) -> None:
        self.cur.sampler.set_targets(self.weights())

    def plan(self, k: int) -> Task:
        rng = random.Random(draw_seed(self.seed, k))
        if self.cfg.mixing.balance == "trained":
            name = self.cur.sampler.next_domain()
        else:
            w = self.weights()
            name = self.domains[rng.choices(range(len(self.domains)), weights=[w[d.name] for d in self.domains])[0]].name
        task = self.cur.revisits.take(name, rng)  # a task of this domain that failed, again (keeps its level)
        if task is None:
            task = self._fresh(name, k, rng)
        scaffold = self.cur.scaffolds.get(name)
        # a failed task back with a hint carries its help already; the domain's scaffold still counts the draw
        if scaffold is not None and scaffold.decide(self.step, rng) and not is_scaffolded(task):
            # the help changes the prompt, not the question: its pass rate stays the plain task's
            task = task.model_copy(update={"metadata": {**task.metadata, TASK_KEY: task_key(task)}})
            task = scaffold.apply(task).task
        self.cur.sampler.drawn(name)
        return task

    def _fresh(self, name: str, k: int, rng: random.Random) -> Task:
        """Draw k's task of domain ``name``: at the level its curriculum draws, kept or redrawn by its pool."""
        source, level = self.by_name[name].source, None
        if name in self.cur.levels:
            level = self.cur.levels[name].draw_level(rng)
            source = self._level_source(name, level)
        task = source.train_task(k)
        if self.cfg.pools.enabled:
            for j in range(1, POOL_REDRAWS):
                if self.cur.pools.accept(task_key(task), rng):
                    break
                task = source.train_task(k + j * REDRAW_STRIDE)
        if level is not None:
            task = task.model_copy(update={"metadata": {**task.metadata, "level": level}})
        return task

    def _level_source(self, name: str, level: int) -> Any:
        key = (name, level)
        if key not in self._level_sources:
            base = self.by_name[name].source
            params = self.cur.levels[name].params(level)
            self._level_sources[key] = base.with_params(params, f"@L{level}") if params else base
        return self._level_sources[key]

    def settled(self, group: Group, trained: bool) -> None:
        """A group's fate. A group the filter dropped counts as served for the trained balance:
        its domain had its turn and had nothing to teach (counted as lagging, a domain whose
        groups are all filtered would be drawn again and again, and starve the others)."""
        served = trained or group.reason.startswith(FILTERED)
        (self.cur.sampler.trained if served else self.cur.sampler.settled)(group.task.domain)

    def resync(self, in_flight: Iterable[Group]) -> None:
        """After a resume: the groups in flight are those the orchestrator recovered."""
        counts = Counter(g.task.domain for g in in_flight)
        self.cur.sampler.in_flight = {d: counts.get(d, 0) for d in self.cur.sampler.targets}

    # --- a step's groups ----------------------------------------------------------------------------
    async def take(self, orch: Any, n: int) -> list[Group]:
        """``n`` groups from the orchestrator, every one observed; under the filter only those in
        the band. Groups are judged as they finish: a dropped one is replaced at once by asking
        the orchestrator for one more (while those asked for before still run), within the draw
        budget - fewer when it runs out. Nothing more is asked for than the step can take, so
        under ``max_staleness: 0`` no group is left in flight for the update to make stale."""
        fcfg = self.cfg.filter
        kept: list[Group] = []
        asked = taken = 0
        want = refill(n, 0, 0, fcfg) if fcfg.enabled else None
        first = want.draw if want is not None else n
        orch.ask(first)
        asked += first
        while taken < asked:
            g = await orch.get()
            taken += 1
            self.taken.append(g)
            self.observe(g)
            if not fcfg.enabled:
                kept.append(g)
                continue
            d = band_pass(trainable_rewards(g), fcfg)
            if d.keep:
                kept.append(g)
                continue
            orch.drop(g, f"{FILTERED}: {d.reason} (mean reward {d.mean:.2f})")
            self.step_counts["filtered"] += 1
            more = refill(n, len(kept) + (asked - taken), asked, fcfg)  # those still running may pass
            if not more.stop:
                orch.ask(more.draw)
                asked += more.draw
        return sorted(kept, key=lambda g: g.draw)

    def observe(self, group: Group) -> None:
        """What a finished group tells the curriculum: its task's pass rate, its level's, and
        (unscaffolded) whether its task is worth another try and the domain's success without help."""
        rewards = trainable_rewards(group)
        if not rewards:
            return
        task, name = group.task, group.task.domain
        self.cur.rates.observe(task_key(task), rewards)
        if not is_scaffolded(task):  # a helped group's failure says little about the task without help
            self.cur.revisits.offer(task, rewards)
        lc = self.cur.levels.get(name)
        if lc is not None and "level" in task.metadata:
            change = lc.observe(int(task.metadata["level"]), rewards, self.step)
            if change is not None:
                self.event("level", name, f"{name}: level {change.old} -> {change.new} "
                                          f"(pass rate {change.pass_rate:.2f} over {lc.cfg.window} groups)")
        scaffold = self.cur.scaffolds.get(name)
        if scaffold is not None:
            # the unaided episodes measure success without help: all of an unscaffolded group's, and
            # those of a guided group that ran without the prefix
            lacked_before = scaffold.lacking is not None
            unaided = [scaffold.measure(e.score) for e in group.episodes if e.trainable and not was_helped(e)]
            if scaffold.lacking is not None and not lacked_before:  # told once, the first time
                self.event("scaffold", name, f"{name}: a score without the scaffold's success component "
                                             f"{scaffold.cfg.success!r} counts 0 (its components: {scaffold.lacking})")
            removed = scaffold.observe(is_scaffolded(task) and not task.metadata["scaffold"].get("guided"),
                                       unaided, self.step)
            if removed is not None:
                what = f"{scaffold.cfg.success} " if scaffold.cfg.success else ""
                self.event("scaffold", name, f"{name}: scaffold removed ({what}success without it {removed.success:.2f} "
                                             f">= {scaffold.cfg.threshold})")

    def replay_batch(self, prompts: int) -> tuple[int, list[Group]]:
        """(fresh groups to take, groups replayed from the store) for this step."""
        if not self.cfg.replay.enabled:
            return prompts, []
        fresh, k = self.cur.replay.split(prompts, self.version)
        picks = self.cur.replay.sample(k, self.step, self.version, random.Random(draw_seed(self.seed, 10**9 + self.step)))
        groups = []
        for p in picks:
            groups.append(self.store.group(p.group_id))
            self.store.record_event("replay", p.group_id, "replayed", f"age {p.age} priority {p.priority:.3f}",
                                    self.step, self.version, group_id=p.group_id)
            self.cur.sampler.drawn(p.domain)
            self.cur.sampler.trained(p.domain)
        self.step_counts["replayed"] += len(groups)
        return fresh + (k - len(groups)), groups

    # --- rewards ------------------------------------------------------------------------------------
    def rewards(self, groups: list[Group], max_tokens: int) -> tuple[dict[str, float] | None, dict[str, float]]:
        """Shaped reward of each trainable episode by id (None: no domain is shaped), and the
        mean of each shaping component per domain (``<domain>/shaping_<component>``)."""
        if not self.cfg.shaping:
            return None, {}
        out: dict[str, float] = {}
        sums: dict[str, list[float]] = {}
        for g in groups:
            eps = [e for e in g.episodes if e.trainable]
            cfg = self.cfg.shaping.get(g.task.domain)
            if cfg is None or not eps:
                out.update({e.id: e.reward for e in eps})
                continue
            shaped = shape_group([attempt_of(e) for e in eps], cfg, max_tokens)
            totals = [s.total for s in shaped]
            if cfg.normalise:
                self.cur.norm.update(g.task.domain, totals)
                totals = self.cur.norm.apply(g.task.domain, totals)
            out.update({e.id: t for e, t in zip(eps, totals)})
            for s in shaped:
                for comp, v in s.components.items():
                    acc = sums.setdefault(f"{g.task.domain}/shaping_{comp}", [0.0, 0.0])
                    acc[0] += v
                    acc[1] += 1
        return out, {k: s / n for k, (s, n) in sums.items()}

    def retained(self, groups: list[Group], advantages: dict[str, list[float]]) -> dict[str, list[float]]:
        """The advantages each mastered group trains with (``curriculum.retain``), by group id, from
        their GRPO ``advantages``; counted for the step's metrics."""
        out: dict[str, list[float]] = {}
        if not self.cfg.retain.enabled:
            return out
        for g in groups:
            kept = retained_advantages(g, advantages.get(g.id, []), self.cfg.retain)
            if kept is not None:
                out[g.id] = kept
                self.step_counts["retained"] += 1
                self.step_counts[f"retained:{g.task.domain}"] += 1
        return out

    # --- after the update ---------------------------------------------------------------------------
    def after_update(self, fresh: list[Group], replayed: list[Group], advantages: dict[str, list[float]]) -> None:
        """``advantages``: group id -> advantages of its trainable episodes, as trained."""
        if self.cfg.replay.enabled:
            for g in fresh:
                gen = min((t.policy_version for e in g.episodes for t in e.turns), default=g.policy_version)
                self.cur.replay.add(g.id, g.task.domain, advantages.get(g.id, []), self.step, gen)
        by_domain: dict[str, tuple[list[float], list[float]]] = {}
        for g in fresh + replayed:
            r, a = by_domain.setdefault(g.task.domain, ([], []))
            r.extend(trainable_rewards(g))
            a.extend(advantages.get(g.id, []))
        for name, (r, a) in by_domain.items():
            self.cur.mixer.observe(name, r, a)
        self._sync_targets()

    # --- after an evaluation ------------------------------------------------------------------------
    def on_eval(self, step: int, per_task: Iterable[Any], episodes: dict[str, list[Any]] | None = None) -> list[DriftDecision]:
        """Record a held-out evaluation's per-task scores (rows with ``task``, ``domain``,
        ``reward``) and, from its ``episodes`` per domain, the reply given to the most tasks (for
        ``drift.collapse``); return the drift guard's verdicts (none when it is off)."""
        if not self.cfg.drift.enabled:
            return []
        scores: dict[str, dict[str, float]] = {}
        for row in per_task:
            scores.setdefault(row.domain, {})[row.task] = row.reward
        collapse = self.cfg.drift.collapse is not None  # else no reply is read or kept
        for name, s in scores.items():
            self.cur.drift.record(step, name, s, same_reply((episodes or {}).get(name, [])) if collapse else None)
        decisions = self.cur.drift.check(step)
        for d in decisions:
            if d.action == "upweight":
                self.factors[d.domain] = d.weight_factor
            elif not d.regressed or d.action == "rollback":  # back to weights from before the drop
                self.factors[d.domain] = 1.0
            if d.regressed:
                self.event(f"drift:{d.action if d.action != 'none' else 'noticed'}", d.domain, d.line(), step)
        self._sync_targets()
        return decisions

    # --- records ------------------------------------------------------------------------------------
    def event(self, kind: str, domain: str, line: str, step: int | None = None) -> None:
        self.store.record_event("curriculum", domain, kind, line, self.step if step is None else step, self.version)
        self.notes.append(line)

    def metrics(self, groups: list[Group], step: int) -> dict[str, float]:
        """Step ``step``'s curriculum figures: mix target and trained share, scaffold level and the
        share of groups scaffolded, level, groups revisited and failed tasks waiting, per domain;
        filtered, replayed and retained groups."""
        m: dict[str, float] = dict(self.cur.sampler.metrics())
        for name, s in self.cur.scaffolds.items():
            m[f"{name}/scaffold_level"] = s.level(step)
            mine = [g for g in groups if g.task.domain == name]
            if mine:
                m[f"{name}/scaffolded"] = sum(is_scaffolded(g.task) for g in mine) / len(mine)
        for name, lc in self.cur.levels.items():
            m[f"{name}/level"] = float(lc.level)
        m["filtered_groups"] = float(self.step_counts["filtered"])
        m["replayed_groups"] = float(self.step_counts["replayed"])
        if self.cfg.replay.enabled:
            m["replay_buffer"] = float(len(self.cur.replay.entries))
        if self.cfg.retain.enabled:
            m["retained_groups"] = float(self.step_counts["retained"])
            for name in self.by_name:
                m[f"{name}/retained"] = float(self.step_counts[f"retained:{name}"])
        if self.cfg.revisit.enabled:
            revisited = Counter(g.task.domain for g in groups if g.task.metadata.get(REVISIT))
            hinted = Counter(g.task.domain for g in groups if g.task.metadata.get(REVISIT) and is_scaffolded(g.task))
            waiting = self.cur.revisits.waiting()
            for name in self.by_name:
                m[f"{name}/revisited"] = float(revisited.get(name, 0))
                if self.cfg.revisit.hint is not None:
                    m[f"{name}/revisit_hinted"] = float(hinted.get(name, 0))
                m[f"{name}/revisit_waiting"] = float(waiting.get(name, 0))
        return m

    def state(self) -> dict[str, Any]:
        return {**self.cur.state(), "factors": dict(self.factors)}

    def rewind(self, state: dict[str, Any], lost: int) -> None:
        """A roll-back to a checkpoint whose curriculum was ``state``, ``lost`` steps back
        (:meth:`Curriculum.rewind`); the drift up-weights stay as the guard left them."""
        self.cur.rewind(state, lost)
        self._sync_targets()

    def load(self, state: dict[str, Any]) -> None:
        self.cur.load(state)
        self.factors = {n: float(state.get("factors", {}).get(n, 1.0)) for n in self.factors}
        self._sync_targets()
