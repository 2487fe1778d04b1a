"""The closed loop on one machine: generate -> execute -> score -> store -> update.

:func:`train` runs a whole training run from a :class:`~practicum.config.RunConfig`:
held-out evaluation before, steps of (take ready groups from the orchestrator, compute group
advantages, update, publish weights to the engine, record the groups trained), periodic
evaluation and checkpoints, evaluation after. The orchestrator (:mod:`practicum.orchestrator`)
draws tasks and runs episodes concurrently, within the staleness bound of ``async``; every
transition is in the store, so ``resume=True`` continues from the latest checkpoint after any
crash with nothing lost and nothing trained twice (``practicum runs audit`` checks it).
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import torch

from practicum import algorithms as A
from practicum import entropy_control
from practicum.budget import Spend
from practicum.checkpoints import Checkpoints
from practicum.config import RunConfig
from practicum.curriculum.drift import DriftDecision
from practicum.curriculum.driver import Driver
from practicum.domains import build_domain, get_plugin
from practicum.engines.base import Engine, SamplingParams
from practicum.engines.batching import BatchingEngine
from practicum.envs.base import Domain
from practicum.errors import CheckpointError, ConfigError, StoreError
from practicum.evaluation import EvalResult, evaluate
from practicum.hardware import resolve_dtype
from practicum.metrics import MetricsWriter
from practicum.orchestrator import Limits, Orchestrator, Policy
from practicum.records import Group
from practicum.rollout import was_guided
from practicum.store import Store
from practicum.trainer import Sample, Trainer

T = TypeVar("T")


@dataclass
class TrainResult:
    run_dir: Path
    steps_done: int
    before: EvalResult | None
    after: EvalResult | None
    history: list[dict[str, Any]] = field(default_factory=list)


def group_advantages(groups: list[Group], kind: A.AdvantageKind,
                     rewards: dict[str, float] | None = None) -> dict[str, list[float]]:
    """Group-normalised advantages of each group's trainable episodes, by group id, from their
    rewards (``rewards``: a shaped reward per episode id, else each episode's own)."""
    out: dict[str, list[float]] = {}
    for g in groups:
        eps = [e for e in g.episodes if e.trainable]
        if not eps:
            out[g.id] = []
            continue
        vals = torch.tensor([rewards[e.id] if rewards is not None else e.reward for e in eps],
                            dtype=torch.float32).unsqueeze(0)  # [1, n]
        out[g.id] = A.group_advantages(vals, kind)[0].tolist()
    return out


def build_samples(groups: list[Group], kind: A.AdvantageKind, rewards: dict[str, float] | None = None,
                  entropy_coefs: dict[str, float] | None = None,
                  overrides: dict[str, list[float]] | None = None) -> tuple[list[Sample], float]:
    """Group-normalised advantages -> training samples. Returns also the fraction of groups
    whose rewards were all equal (no learning signal).

    Only trainable episodes count (:attr:`~practicum.records.Episode.trainable`): one that
    failed before the model spoke has nothing to train on, and one that an infrastructure
    failure ended (its retries spent) is kept out of the loss and out of its group's baseline.
    ``rewards`` (episode id -> reward) replaces the episodes' own rewards: shaped ones.
    ``entropy_coefs`` (domain -> weight): the domains whose entropy bonus is their own.
    ``overrides`` (group id -> advantages of its trainable episodes): what those groups train with
    instead (``curriculum.retain``'s mastered groups); the uniform share reads their own.
    """
    samples: list[Sample] = []
    uniform = 0
    advantages = group_advantages(groups, kind, rewards)
    for g in groups:
        eps = [e for e in g.episodes if e.trainable]
        adv = advantages[g.id]
        if all(abs(a) <= A.NO_SIGNAL for a in adv):  # nothing to train on, or all rewards equal (centred to 0): no signal
            uniform += 1
        adv = (overrides or {}).get(g.id, adv)
        for ep, a in zip(eps, adv):
            ids, mask, logps = ep.training_sequence()
            samples.append(Sample(ids, mask, logps, a, guided=was_guided(ep), domain=g.task.domain,
                                  entropy_coef=(entropy_coefs or {}).get(g.task.domain)))
    return samples, uniform / max(len(groups), 1)


class Run:
    """Everything a training run holds: domains, engine, trainer, store, orchestrator, metrics.

    The parts are built from the config unless given (``engine``, ``trainer``, ``domains``,
    ``store``):
    tests and benchmarks pass their own (a scripted engine, a toy domain) and run the real loop.
    """

    def __init__(self, cfg: RunConfig, resume: bool = False, overwrite: bool = False,
                 log: Callable[[str], None] = print, *, engine: Engine | None = None,
                 trainer: Trainer | None = None, domains: list[Domain] | None = None,
                 store: Store | None = None) -> None:
        from practicum.models import resolve_model

        if engine is None and cfg.model.endpoint is not None:
            raise ConfigError("model.endpoint: an OpenAI-compatible endpoint evaluates and generates data "
                              "(practicum eval); it cannot be trained - remove the endpoint to train the model in process")
        if engine is not None and not getattr(engine, "trainable", True):
            raise ConfigError(f"{type(engine).__name__} is evaluation-only (its episodes carry no token ids or "
                              "log-probs of the model): it can evaluate and generate data, not train")
        self.cfg = cfg
        self.log = log
        if cfg.run.threads:
            torch.set_num_threads(cfg.run.threads)
        self.run_dir = Path(cfg.run.dir)
        store_path = self.run_dir / "store.sqlite"
        if store_path.exists() and not resume:
            if not overwrite:
                raise StoreError(
                    f"{self.run_dir} already holds a run; pass --resume to continue it, "
                    f"--overwrite to start again, or set run.dir"
                )
            shutil.rmtree(self.run_dir)
        if resume and not store_path.exists():
            raise CheckpointError(f"nothing to resume: {store_path} does not exist")
        self.run_dir.mkdir(parents=True, exist_ok=True)
        self.checkpoints = Checkpoints(self.run_dir, cfg.run.keep_checkpoints)
        ray_mode = cfg.distributed.backend == "ray"
        self._closers: list[Callable[[], None]] = []  # synchronous parts to close (Ray actors)
        ctx = None
        self.sandbox_workers: Any = None  # RemoteSessions in Ray mode with sandbox workers
        if domains is None and ray_mode and cfg.distributed.sandbox_workers:  # sandbox sessions held by Ray actors
            from practicum.distributed.sandbox import RemoteSessions
            from practicum.domains import default_context

            remote = self.sandbox_workers = RemoteSessions(cfg.distributed)
            self._closers.append(remote.close)
            ctx = dataclasses.replace(default_context(cfg.run.seed, cfg.base_dir, run_dir=self.run_dir), sessions=remote)
        self.domains = domains if domains is not None else [build_domain(d, cfg.run.seed, cfg.base_dir, ctx=ctx,
                                                                         run_dir=self.run_dir) for d in cfg.domains]
        self.weights = [d.weight for d in cfg.domains]
        model_path = self.model_path = resolve_model(cfg.model.name)
        self._owned: list[Any] = []  # parts built here, closed by aclose(); those passed in belong to the caller
        if engine is None:
            dtype = resolve_dtype(cfg.model.engine_dtype, cfg.model.device)
            if ray_mode:  # rollout workers as Ray actors (docs/distributed.md)
                from practicum.distributed.rollout import RayEngine

                engine = RayEngine(model_path, dtype, cfg.distributed, device=cfg.model.device,
                                   kind=cfg.model.engine, options=cfg.model.vllm, hf=cfg.model.hf_options())
            elif cfg.model.engine == "vllm":
                from practicum.engines.vllm import VLLMEngine

                engine = VLLMEngine(model_path, dtype, options=cfg.model.vllm, seed=cfg.run.seed)
            else:
                from practicum.engines.hf import HFEngine

                engine = HFEngine(model_path, dtype=dtype, device=cfg.model.device, **cfg.model.hf_options())
            self._owned.append(engine)
        self.engine = BatchingEngine(engine)
        # On CPU a local trainer's work runs on the engine's decode thread (HFEngine.run_job):
        # torch's CPU kernels keep a libgomp pool per thread that ever ran parallel work, and a
        # second pool (the trainer loading and updating on threads of its own) makes libgomp
        # throttle both (hardware.in_own_thread). Measured: see benchmarks/RESULTS.md step_speed.
        # Only an in-process Trainer: a Ray actor's handle or a test's stand-in is called in place.
        local = isinstance(trainer, Trainer) if trainer is not None else not ray_mode
        run_job = getattr(engine, "run_job", None)
        self._torch_thread = run_job if local and torch.device(cfg.model.device).type == "cpu" else None
        torch.manual_seed(cfg.run.seed)  # LoRA's initialisation draws from torch's global RNG
        if trainer is None and ray_mode:
            from practicum.distributed.trainer import RemoteTrainer

            trainer = RemoteTrainer(model_path, cfg.trainer, cfg.algorithm, cfg.distributed, device=cfg.model.device,
                                    seed=cfg.run.seed)
            self._closers.append(trainer.close)
        if trainer is None:
            trainer = self._on_torch_thread(Trainer, model_path, cfg.trainer, cfg.algorithm, device=cfg.model.device)
        self.trainer = trainer
        self._owns_store = store is None
        self.store = store if store is not None else Store(store_path)
        self.metrics = MetricsWriter(self.run_dir)
        self.spend = Spend()  # what the run consumed, per domain (budget:)
        r = cfg.rollout
        params = SamplingParams(max_new_tokens=r.max_new_tokens, temperature=r.temperature, top_p=r.top_p)
        self.driver = Driver(cfg.curriculum, self.domains, self.weights, cfg.run.seed, self.store)
        self.entropy = entropy_control.from_config(cfg.algorithm, cfg.domains)  # adaptive bonus per domain, or None
        self._own_entropy_coef = {d.name: d.entropy_coef for d in cfg.domains if d.entropy_coef is not None}
        self.orch = Orchestrator(
            self.domains, self.weights, self.engine, self.store,
            Limits(r.group_size, r.prompts_per_step, params, r.max_turns, r.max_episode_tokens, r.max_episode_seconds),
            Policy(cfg.async_.max_staleness, dict(cfg.async_.domain_concurrency), dict(cfg.async_.retries),
                   min(cfg.async_.min_episodes, r.group_size), cfg.async_.stop_after_failed_groups),
            cfg.run.seed, log, planner=self.driver)
        self.start_step = 0
        self.train_seconds = 0.0
        self.guard_decisions: list[DriftDecision] = []  # the drift guard's verdicts at the last evaluation
        self._throughput_mark = (0, time.perf_counter())  # (engine tokens, time) at the last step's end
        self._checkpoint_step = 0
        self.resuming = resume
        if resume:
            self._resume()
        else:
            self.store.set_meta("config", cfg.model_dump(mode="json"))
            self.store.set_meta("model_path", str(model_path))

    def _on_torch_thread(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Call ``fn`` where this process's torch work runs: on the engine's decode thread for an
        in-process trainer on CPU, else here."""
        if self._torch_thread is None:
            return fn(*args, **kwargs)
        return self._torch_thread(functools.partial(fn, *args, **kwargs))

    # --- checkpoints ------------------------------------------------------------------------
    def save_checkpoint(self, step: int) -> Path:
        return self._on_torch_thread(self.checkpoints.save, self.trainer, step, {
            "next_step": step + 1, "train_seconds": self.train_seconds, "model_path": str(self.model_path),
            "mode": self.cfg.trainer.mode, "sampler": {"kind": "stateless", "seed": self.cfg.run.seed},
            "curriculum": self.driver.state(),
            **({"entropy_control": self.entropy.state()} if self.entropy is not None else {})})

    def _resume(self) -> None:
        old = self.store.get_meta("config") or {}
        for key in ("model", "domains", "rollout", "algorithm", "trainer", "curriculum"):
            if old.get(key) != self.cfg.model_dump(mode="json")[key]:
                raise CheckpointError(f"cannot resume: config section {key!r} differs from the stored run's")
        if old.get("run", {}).get("seed") != self.cfg.run.seed:
            raise CheckpointError("cannot resume: run.seed differs from the stored run's")
        spent = [v for _s, _k, v in self.store.metrics(kind="spend")]
        if spent:
            self.spend.load(spent[-1])
        latest = self.checkpoints.latest()
        if latest is not None:
            state = self._on_torch_thread(self.trainer.load, latest)
            if "curriculum" in state:
                self.driver.load(state["curriculum"])
            if self.entropy is not None and "entropy_control" in state:
                self.entropy.load(state["entropy_control"])
            self.start_step = int(state["next_step"]) - 1
            self.train_seconds = float(state.get("train_seconds", 0.0))
            self.engine.load_weights(self.trainer.export_weights(), self.trainer.version)
        self._checkpoint_step = self.start_step
        self._pin_last_good()
        self.store.drop_after(self.start_step, kind="eval")
        self.store.drop_metrics_after(self.start_step)
        where = f"from {latest.name} (step {self.start_step})" if latest else "with no checkpoint yet, from step 1"
        self._resume_note = where

    def _pin_last_good(self) -> None:
        """Under the drift guard's roll-back, the checkpoint of the last good evaluation is kept."""
        good = self.driver.cur.drift.last_good
        self.checkpoints.pinned = {good} if good is not None and self.cfg.curriculum.drift.may_roll_back else set()

    async def rollback(self, to_step: int, step: int) -> None:
        """At step ``step``, put back the policy (and optimizer) of step ``to_step``'s checkpoint,
        and the curriculum's view of that policy (:meth:`Driver.rewind`). The clock goes on:
        the weights become a new policy version, so groups generated by the discarded weights
        are stale (dropped at ``max_staleness`` 0, corrected like any stale group otherwise)."""
        path = self.checkpoints.path(to_step)
        version = self.trainer.version
        state = self._on_torch_thread(self.trainer.load, path)
        if "curriculum" in state:
            self.driver.rewind(state["curriculum"], step - to_step)
        self.trainer.version = version + 1
        await self.engine.publish(self.trainer.export_weights(), self.trainer.version)
        self.orch.version = self.driver.version = self.trainer.version
        self.driver.cur.drift.rolled_back(to_step)

    # --- the loop -----------------------------------------------------------------------------
    async def evaluate(self, step: int, limit: int | None = None) -> EvalResult:
        """Held-out evaluation of every domain (never scaffolded), then the drift guard's
        verdicts and reactions (curriculum.drift)."""
        res = await evaluate(self.engine, self.domains, self.cfg.eval.max_new_tokens, self.cfg.rollout.max_turns,
                             self.store, step, limit, self.cfg.rollout.max_episode_tokens,
                             self.cfg.rollout.max_episode_seconds)
        flat = {f"{d}/{k}": v for d, m in res.per_domain.items() for k, v in m.items()}
        drift = self.cfg.curriculum.drift
        decisions = self.guard_decisions = self.driver.on_eval(step, res.per_task, res.episodes) if drift.enabled else []
        for d in decisions:  # what moved under each domain's mean since its best, and since each task's own best
            flat.update({f"{d.domain}/lost": float(d.lost), f"{d.domain}/gained": float(d.gained),
                         f"{d.domain}/forgotten": float(d.forgotten)})
        self.store.add_metrics(step, "eval", flat)
        self.metrics.write(step, "eval", flat)
        if drift.enabled:
            await self._guard(step, decisions)
        return res

    async def _guard(self, step: int, decisions: list[DriftDecision]) -> None:
        drift = self.cfg.curriculum.drift
        for d in decisions:
            if d.regressed:
                self.log(f"drift guard at step {step}: {d.line()}")
        back = next((d.rollback_to for d in decisions if d.action == "rollback" and d.rollback_to is not None), None)
        if back is not None:
            await self.rollback(back, step)
            self.log(f"drift guard: rolled back to the checkpoint of step {back} (policy version {self.trainer.version})")
            if self.checkpoints.path(step).is_dir():  # a resume must not restore the discarded weights
                self.save_checkpoint(step)
        elif drift.may_roll_back and self.driver.cur.drift.last_good == step:
            # a good evaluation: its checkpoint is the one a later roll-back goes to
            if not self.checkpoints.path(step).is_dir():
                self.save_checkpoint(step)
        self._pin_last_good()

    async def start(self) -> None:
        """Start the orchestrator (settling what a crash left first, on resume)."""
        if self.resuming:
            done = self.orch.recover(self._checkpoint_step, self.trainer.version)
            self.log(f"resume: {self._resume_note}; {done['reverted']} group(s) whose update was lost go back to "
                     f"the queue, {done['kept_ready']} ready group(s) kept, {done['requeued']} re-queued")
        self.orch.remaining = (self.cfg.run.steps - self.start_step) * self.cfg.rollout.prompts_per_step
        self.driver.resync(self.orch.in_flight.values())
        self.driver.version, self.driver.step = self.trainer.version, self.start_step + 1
        await self.orch.start(self.trainer.version)
        self._throughput_mark = (self.engine.tokens, time.perf_counter())

    def progress(self, step: int) -> float:
        """How far the run is when ``step`` begins, 0 to 1: the steps done of ``run.steps``, or the
        training time of ``run.time_limit_minutes``, whichever is further - the learning-rate
        schedule's clock. A roll-back does not rewind it (the time was spent)."""
        r = self.cfg.run
        done = (step - 1) / r.steps
        if r.time_limit_minutes is not None:
            done = max(done, self.train_seconds / (r.time_limit_minutes * 60))
        return min(max(done, 0.0), 1.0)

    async def train_step(self, step: int) -> dict[str, Any]:
        cfg = self.cfg
        t0 = time.perf_counter()
        counts0 = dict(self.orch.counts)
        driver = self.driver
        driver.step, driver.version = step, self.trainer.version
        driver.step_counts.clear()
        driver.taken = []
        fresh_n, replayed = driver.replay_batch(cfg.rollout.prompts_per_step)
        groups = await driver.take(self.orch, fresh_n)
        self.spend.add(driver.taken)
        wait_seconds = time.perf_counter() - t0
        trained = groups + replayed
        r = cfg.rollout
        rewards, shaping = driver.rewards(trained, r.max_episode_tokens or r.max_new_tokens * r.max_turns)
        advantages = group_advantages(trained, cfg.algorithm.advantage, rewards)
        own = dict(self._own_entropy_coef)  # domains with a fixed weight of their own
        sampled = entropy_control.sampled_entropy(groups)  # this step's fresh groups (replayed ones are old)
        if self.entropy is not None:  # the adaptive bonus: each controlled domain's weight from its entropy now
            self.entropy.observe(sampled)
            own.update(self.entropy.weights())
        samples, uniform = build_samples(trained, cfg.algorithm.advantage, rewards, own,
                                         driver.retained(trained, advantages))
        version_before = self.trainer.version
        # the update runs off the event loop: episodes of later groups keep going meanwhile
        stats = await asyncio.to_thread(self._on_torch_thread, self.trainer.update, samples, cfg.rollout.temperature or 1.0,
                                        self.progress(step), cfg.curriculum.mixing.updates == "per_domain")
        if not stats["skipped"]:
            await self.engine.publish(self.trainer.export_weights(), self.trainer.version)
        lags = [version_before - t.policy_version for g in groups for e in g.episodes if e.trainable for t in e.turns]
        driver.version, driver.step = self.trainer.version, step + 1  # groups drawn from now on are for the next step
        self.orch.trained(groups, step, self.trainer.version)
        driver.after_update(groups, replayed, advantages)
        gen_tokens = sum(len(t.completion_ids) for g in groups for e in g.episodes for t in e.turns)
        # generation throughput: what the engine produced since the last step ended (for any
        # group, trained now or later, and any evaluation between) over that wall time - with
        # groups generated ahead, the tokens of this step's groups over its waiting time would
        # mean nothing
        tokens0, since = self._throughput_mark
        now = time.perf_counter()
        self._throughput_mark = (self.engine.tokens, now)
        m: dict[str, Any] = {
            **stats,
            "uniform_groups": uniform,
            "lag_mean": sum(lags) / max(len(lags), 1),
            "lag_max": max(lags, default=0),
            "dropped_groups": self.orch.counts["dropped"] - counts0["dropped"],
            "failed_groups": self.orch.counts["failed_groups"] - counts0["failed_groups"],
            "retried_episodes": self.orch.counts["retried"] - counts0["retried"],
            "in_flight": len(self.orch.in_flight),
            "wait_seconds": wait_seconds,  # waiting for ready groups: the whole rollout at max_staleness 0
            "gen_tokens": gen_tokens,
            "gen_tok_per_s": (self.engine.tokens - tokens0) / max(now - since, 1e-9),
            "completion_len": gen_tokens / max(sum(len(g.episodes) for g in groups), 1),
            "episode_errors": sum(len(e.errors) for g in groups for e in g.episodes),
            "step_seconds": time.perf_counter() - t0,
            "policy_version": self.trainer.version,
            **driver.metrics(trained, step),
            **shaping,
        }
        for d, h in sampled.items():
            m[f"{d}/entropy"] = h  # mean -log p of the tokens it sampled: its exploration left, all-alike groups included
        if self.entropy is not None:
            m.update({f"{d}/entropy_coef": w for d, w in self.entropy.weights().items()})
        for dom, section in zip(self.domains, cfg.domains):
            eps = [e for g in groups if g.task.domain == dom.name for e in g.episodes]
            if not eps:
                continue
            m[f"{dom.name}/reward"] = sum(e.reward for e in eps) / len(eps)
            for comp in get_plugin(section.env).components:  # the headline components its plugin declares
                vals = [e.score.components.get(comp) for e in eps if e.score and comp in e.score.components]
                if vals:
                    m[f"{dom.name}/{comp}"] = sum(vals) / len(vals)  # type: ignore[arg-type]
        numeric = {k: v for k, v in m.items() if isinstance(v, (int, float))}
        self.store.add_metrics(step, "train", numeric)
        self.store.add_metrics(step, "spend", self.spend.state(cfg.budget.prices))
        self.metrics.write(step, "train", numeric)
        m["notes"], driver.notes = driver.notes, []  # curriculum decisions since the last step, for the summary
        return m

    def summary(self, step: int, m: dict[str, Any]) -> str:
        rewards = " ".join(f"{d.name} {m[f'{d.name}/reward']:.2f}" for d in self.domains if f"{d.name}/reward" in m)
        loss = f"loss {m['loss']:+.4f} kl {m['kl']:.4f}" if "loss" in m else "no update (all groups uniform)"
        if "entropy" in m:  # the policy's entropy, estimated on the trained tokens (nats): exploration left
            loss += f" entropy {m['entropy']:.3f}"
        t = self.cfg.trainer
        if "lr" in m and (t.lr_schedule != "constant" or t.warmup_fraction > 0):
            loss += f" lr {m['lr']:.2e}"
        if "grad_conflicts" in m:  # gradient surgery: the share of domain pairs whose gradients conflicted
            loss += f" conflicts {m['grad_conflicts']:.2f}"
        mismatch = f" | mismatch {m['mismatch_abs_logp']:.4f}" if "mismatch_abs_logp" in m else ""
        shown = {**m, "dropped_groups": m.get("dropped_groups", 0) - int(m.get("filtered_groups", 0))}  # filtered: below
        lost = "".join(f" {shown[k]} {k.split('_')[0]}" for k in ("dropped_groups", "failed_groups", "retried_episodes")
                       if shown.get(k))
        cur = "".join(f" {int(m[k])} {k.split('_')[0]}" for k in ("filtered_groups", "replayed_groups") if m.get(k))
        cur += "".join(f" | scaffold {d.name} {m[f'{d.name}/scaffold_level']:.2f}" for d in self.domains
                       if f"{d.name}/scaffold_level" in m and m[f"{d.name}/scaffold_level"] > 0)
        bonus = [f"{d.name} {m[f'{d.name}/entropy_coef']:.3f}" for d in self.domains if m.get(f"{d.name}/entropy_coef")]
        if bonus:  # the domains whose adaptive entropy bonus is on at this step
            cur += " | entropy bonus " + " ".join(bonus)
        notes = "".join(f" | {n}" for n in m.get("notes", []))
        b = self.cfg.budget
        if b.limited:
            notes += " | " + self.spend.line(b.prices)
        return (f"step {step}/{self.cfg.run.steps} | reward {rewards} | {loss}{mismatch} | lag {m['lag_mean']:.2f}"
                f"{lost}{cur} | {m['gen_tok_per_s']:.0f} tok/s | {m['step_seconds']:.1f} s{notes}")

    async def aclose(self) -> None:
        await self.orch.close()
        await self.engine.close()
        for part in self._owned:
            await part.close()
        for close in self._closers:
            close()
        self.close()

    def close(self) -> None:
        self.metrics.close()
        if self._owns_store:
            self.store.close()


async def train_async(cfg: RunConfig, resume: bool = False, overwrite: bool = False,
                      log: Callable[[str], None] = print, progress: Any = None, run: Run | None = None) -> TrainResult:
    """The whole run; ``run``: a :class:`Run` built by the caller with its own parts (a test's
    domains), else one built from ``cfg``."""
    run = run if run is not None else Run(cfg, resume=resume, overwrite=overwrite, log=log)
    try:
        await run.start()
        before = None
        if cfg.eval.before and run.start_step == 0:
            before = await run.evaluate(0)
            log(f"held-out before training: {before.line()}")
        history = []
        step = run.start_step
        ec = cfg.run.eval_every
        limit_hit = False
        for step in range(run.start_step + 1, cfg.run.steps + 1):
            t0 = time.perf_counter()
            m = await run.train_step(step)
            run.train_seconds += time.perf_counter() - t0
            run.spend.wall_seconds += time.perf_counter() - t0
            history.append(m)
            log(run.summary(step, m))
            if progress is not None:
                progress(step, cfg.run.steps)
            budget = run.spend.reached(cfg.budget)
            limit_hit = (cfg.run.time_limit_minutes is not None and run.train_seconds >= cfg.run.time_limit_minutes * 60
                         ) or budget is not None
            if step % cfg.run.checkpoint_every == 0 or step == cfg.run.steps or limit_hit:
                run.save_checkpoint(step)
            if ec and step % ec == 0 and step != cfg.run.steps and not limit_hit:
                t1 = time.perf_counter()
                res = await run.evaluate(step)
                run.spend.wall_seconds += time.perf_counter() - t1
                log(f"held-out at step {step}: {res.line()}")
            if limit_hit:
                log(f"{budget} after step {step} (checkpoint written)" if budget is not None
                    else f"time limit of {cfg.run.time_limit_minutes} min reached after step {step}")
                break
        if step >= cfg.run.steps or limit_hit:
            dropped = await run.orch.finish()
            if dropped:
                log(f"{dropped} group(s) drawn ahead were not trained (dropped: the run ended)")
        after = None
        if cfg.eval.after:
            after = await run.evaluate(step)
            log(f"held-out after training:  {after.line()}")
        return TrainResult(run.run_dir, step, before, after, history)
    finally:
        await run.orch.close()
        for dom in run.domains:  # domains that keep sandbox sessions warm release them here
            await dom.close()
        await run.aclose()


def train(cfg: RunConfig, resume: bool = False, overwrite: bool = False,
          log: Callable[[str], None] = print, progress: Any = None) -> TrainResult:
    return asyncio.run(train_async(cfg, resume, overwrite, log, progress))
