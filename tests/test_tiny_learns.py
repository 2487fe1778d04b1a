"""The whole loop on a tiny random model: updates are exact and point the right way, the policy
learns the toy task within seconds, LoRA trains adapters only, checkpoints load into engines, and
a resumed run (after a clean stop or a crash) equals an uninterrupted one."""

from __future__ import annotations

import asyncio

import pytest
import torch
from safetensors.torch import load_file

from practicum.config import AlgorithmConfig, TrainerConfig
from practicum.engines.base import SamplingParams
from practicum.envs.base import Domain, Environment
from practicum.envs.toy import ToyDomain, word_score
from practicum.errors import CheckpointError, StoreError
from practicum.evaluation import evaluate
from practicum.loop import build_samples, train
from practicum.records import GroupState
from practicum.rollout import run_groups
from practicum.store import Store
from practicum.trainer import Sample, Trainer


def _engine(path):
    from practicum.engines.hf import HFEngine

    return HFEngine(path, dtype=torch.float32)


def _trainer(path, **kw) -> Trainer:
    return Trainer(path, TrainerConfig(autocast_dtype="none", **kw), AlgorithmConfig())


def test_toy_word_score():
    """The toy score is the fraction of the reply's words equal to the target."""
    assert word_score("seven seven", "seven") == 1.0
    assert word_score("seven three seven six", "seven") == 0.5
    assert word_score("  ", "seven") == 0.0
    assert word_score("sevens seven", "seven") == 0.5


def test_toy_tasks_are_pure_functions_of_index():
    """The toy domain implements the protocols; train_task(i) depends on (seed, i) only; eval
    tasks cover every target."""
    a, b = ToyDomain(seed=1), ToyDomain(seed=1)
    assert isinstance(a, Domain) and isinstance(a.make_env(), Environment)
    assert [a.source.train_task(i) for i in range(20)] == [b.source.train_task(i) for i in range(20)]
    assert {t.target for t in a.source.eval_tasks()} == {"seven", "three"}
    assert {a.source.train_task(i).target for i in range(50)} == {"seven", "three"}


def test_micro_batching_does_not_change_the_loss(tiny_model_path):
    """A large token budget packs each group behind one shared prompt in one micro-batch; a
    budget of 16 gives every sample its own row and micro-batch. Both give the same loss and
    gradient norm: packing and accumulation are exact, for every aggregation."""
    engine = _engine(tiny_model_path)
    dom = ToyDomain()
    tasks = [dom.source.train_task(i) for i in range(3)]
    groups = asyncio.run(run_groups(tasks, 4, lambda t: dom.make_env(), engine,
                                    SamplingParams(max_new_tokens=6, seed=3)))
    samples, _ = build_samples(groups, "grpo")
    assert any(s.advantage != 0 for s in samples)
    for aggregation in ("token_mean", "seq_mean_token_mean", "seq_mean_token_sum_norm"):
        stats = []
        for budget in (4096, 16):
            tr = Trainer(tiny_model_path, TrainerConfig(autocast_dtype="none", micro_batch_tokens=budget),
                         AlgorithmConfig(aggregation=aggregation))
            stats.append(tr.update(samples))
        whole, split = stats
        assert whole["loss"] == pytest.approx(split["loss"], abs=1e-6)
        assert whole["grad_norm"] == pytest.approx(split["grad_norm"], rel=1e-4)
        assert whole["grad_norm"] > 0


def test_zero_advantage_update_is_skipped(tiny_model_path):
    """With no KL term, samples with zero advantage carry no gradient: nothing is computed and
    the weights and version stay as they were."""
    tr = _trainer(tiny_model_path, lr=1e-2)
    before = {k: v.clone() for k, v in tr.export_weights().items()}
    stats = tr.update([Sample([1, 2, 3], [0, 1, 1], [0.0, -1.0, -1.0], 0.0)])
    assert stats["skipped"] == 1.0 and stats["samples_trained"] == 0.0
    assert tr.version == 0 and tr.step == 1
    assert all(torch.equal(before[k], v) for k, v in tr.export_weights().items())


async def _learn(model_path, steps: int, prompts: int = 8, group_size: int = 8, mode: str = "full",
                 lr: float = 5e-3) -> tuple[float, float, list[float]]:
    """Drive the loop by hand: roll out, store nothing, update, publish. Returns the greedy
    held-out reward before and after, and the mean training reward of every step."""
    dom = ToyDomain()
    engine = _engine(model_path)
    trainer = _trainer(model_path, lr=lr, mode=mode)
    before = (await evaluate(engine, [dom], max_new_tokens=6)).per_domain["toy"]["reward"]
    history = []
    for step in range(1, steps + 1):
        tasks = [dom.source.train_task(step * prompts + i) for i in range(prompts)]
        params = SamplingParams(max_new_tokens=6, temperature=1.0, seed=step)
        groups = await run_groups(tasks, group_size, lambda t: dom.make_env(), engine, params)
        history.append(sum(e.reward for g in groups for e in g.episodes) / (prompts * group_size))
        samples, _ = build_samples(groups, "grpo")
        stats = trainer.update(samples)
        if not stats["skipped"]:
            engine.load_weights(trainer.export_weights(), trainer.version)
            assert engine.policy_version == trainer.version
    after = (await evaluate(engine, [dom], max_new_tokens=6)).per_domain["toy"]["reward"]
    return before, after, history


@pytest.mark.parametrize("model_seed", [0, 1])
def test_tiny_model_learns_the_toy_task(tmp_path, model_seed):
    """GRPO on "say WORD" (two target words) takes a random model from about chance to saying
    the asked word almost always, held out (greedy) and in training, within 60 small steps
    (a few seconds). Two random initialisations, so that a lucky one cannot pass it alone."""
    from practicum.testing import make_tiny_model

    path = make_tiny_model(tmp_path / "tiny", seed=model_seed)
    before, after, history = asyncio.run(_learn(path, steps=60, prompts=8, lr=5e-3))
    assert before < 0.2  # a random 33-word model rarely says the word
    assert after > 0.8  # both targets: the policy reads the prompt (one word only would give 0.5)
    early, late = sum(history[:5]) / 5, sum(history[-5:]) / 5
    assert early < 0.2 and late > 0.8, history


def test_lora_updates_only_adapters_and_exports_merged_weights(tiny_model_path):
    """In LoRA mode an update changes adapter weights only; export_weights returns base-named
    weights with W + (alpha / r) B A merged in, which the engine loads."""
    tr = _trainer(tiny_model_path, mode="lora", lr=1e-2)
    base0 = {k: v.clone() for k, v in tr.model.get_base_model().state_dict().items() if "lora_" not in k}
    lora0 = {k: v.clone() for k, v in tr.model.state_dict().items() if "lora_" in k}
    trainable = {n for n, p in tr.model.named_parameters() if p.requires_grad}
    assert trainable and all("lora_" in n for n in trainable)
    engine = _engine(tiny_model_path)
    dom = ToyDomain()
    groups = asyncio.run(run_groups([dom.source.train_task(i) for i in range(4)], 8, lambda t: dom.make_env(),
                                    engine, SamplingParams(max_new_tokens=6, seed=5)))
    samples, _ = build_samples(groups, "grpo")
    for _ in range(2):  # B starts at zero, so A only moves from the second step
        assert not tr.update(samples)["skipped"]
    base1 = {k: v for k, v in tr.model.get_base_model().state_dict().items() if "lora_" not in k}
    lora1 = {k: v for k, v in tr.model.state_dict().items() if "lora_" in k}
    assert all(torch.equal(base0[k], base1[k]) for k in base0)  # also: the merge was undone
    assert all(not torch.equal(lora0[k], lora1[k]) for k in lora0)

    exported = tr.export_weights()
    assert set(exported) == set(engine.model.state_dict())
    q = "model.layers.0.self_attn.q_proj"
    sd = tr.model.state_dict()
    a = sd[f"base_model.model.{q}.lora_A.default.weight"]
    b = sd[f"base_model.model.{q}.lora_B.default.weight"]
    scale = tr.cfg.lora.alpha / tr.cfg.lora.r
    torch.testing.assert_close(exported[f"{q}.weight"], base0[f"{q}.base_layer.weight"] + scale * b @ a)
    engine.load_weights(exported, tr.version)
    assert torch.equal(engine.model.state_dict()[f"{q}.weight"], exported[f"{q}.weight"])
    assert engine.policy_version == 2


def _objective(trainer: Trainer, samples: list[Sample]) -> float:
    """sum_i A_i * (log-prob of sample i's generated tokens) under the trainer's current policy."""
    from practicum import algorithms as A

    total = 0.0
    with torch.no_grad():
        for s in samples:
            ids = torch.tensor([s.ids])
            logp = A.token_logprobs(trainer.model(input_ids=ids).logits[:, :-1], ids[:, 1:])[0]
            total += s.advantage * float((logp * torch.tensor(s.mask[1:], dtype=torch.float32)).sum())
    return total


@pytest.mark.parametrize("mode", ["full", "lora"])
def test_an_update_moves_the_policy_toward_positive_advantages(tiny_model_path, mode):
    """After two small steps, sequences with positive advantage became more likely relative to
    those with negative advantage: the update ascends the GRPO objective (its sign is right)."""
    engine = _engine(tiny_model_path)
    dom = ToyDomain()
    groups = asyncio.run(run_groups([dom.source.train_task(i) for i in range(4)], 8, lambda t: dom.make_env(),
                                    engine, SamplingParams(max_new_tokens=6, seed=9)))
    samples, _ = build_samples(groups, "grpo")
    tr = _trainer(tiny_model_path, mode=mode, lr=1e-3)
    before = _objective(tr, samples)
    tr.update(samples)
    tr.update(samples)  # LoRA: B starts at zero, so the first step cannot yet change the output much
    after = _objective(tr, samples)
    assert after > before + 1e-3, (before, after)


def test_full_export_is_accepted_by_the_engine(tiny_model_path):
    """Full fine-tune: the exported state dict has the engine's names and loads into it; a name
    the engine lacks is refused."""
    tr = _trainer(tiny_model_path)
    engine = _engine(tiny_model_path)
    exported = tr.export_weights()
    assert set(exported) <= set(engine.model.state_dict())
    engine.load_weights(exported, 7)
    assert engine.policy_version == 7
    with pytest.raises(KeyError, match="nope"):
        engine.load_weights({"nope": torch.zeros(1)}, 8)


# --- the real loop (practicum.loop.train) on the tiny model -----------------------------------


def _policy_weights(run_dir, step: int) -> dict[str, torch.Tensor]:
    """The trained weights of a checkpoint: full weights, or the LoRA adapter."""
    ckpt = run_dir / "checkpoints" / f"step_{step:06d}"
    full = ckpt / "model.safetensors"
    return load_file(str(full if full.is_file() else ckpt / "adapter" / "adapter_model.safetensors"))


def _train_groups(run_dir, step: int):
    store = Store(run_dir / "store.sqlite")
    try:
        return [(g.task.id, g.rewards, [e.turns[0].completion_ids for e in g.episodes])
                for g in store.groups(step=step, kind="train")]
    finally:
        store.close()


class Crash(Exception):
    """Stands for the process dying in the middle of a step."""


@pytest.mark.parametrize("mode, interruption", [("full", "stopped"), ("full", "crashed"), ("lora", "stopped")])
def test_resume_equals_an_uninterrupted_run(tiny_run_config, tiny_model_path, monkeypatch, mode, interruption):
    """4 steps straight vs a run interrupted after step 2 (stopped cleanly, or crashed inside
    step 3 after its groups were stored) and resumed to 4: the same tasks, samples, rewards
    and final weights, bit for bit."""
    quiet = lambda _msg: None  # noqa: E731
    mode_set = f"trainer.mode={mode}"
    straight = train(tiny_run_config("straight", mode_set), log=quiet)
    assert straight.steps_done == 4 and len(straight.history) == 4
    assert any(m["samples_trained"] > 0 for m in straight.history[2:])  # steps 3-4 do train

    if interruption == "stopped":
        first = train(tiny_run_config("resumed", mode_set, "run.steps=2"), log=quiet)
        assert first.steps_done == 2
    else:
        real_update, calls = Trainer.update, []

        def crash_in_step_3(self, samples, *args, **kwargs):
            calls.append(1)
            if len(calls) == 3:
                raise Crash
            return real_update(self, samples, *args, **kwargs)

        monkeypatch.setattr(Trainer, "update", crash_in_step_3)
        with pytest.raises(Crash):
            train(tiny_run_config("resumed", mode_set), log=quiet)
        monkeypatch.setattr(Trainer, "update", real_update)
        store = Store(straight.run_dir.parent / "resumed" / "store.sqlite")  # the crash left step 3's groups ready
        assert len(store.groups(kind="train", state=GroupState.ready)) == 3
        store.close()
    second = train(tiny_run_config("resumed", mode_set), resume=True, log=quiet)
    assert [m["policy_version"] for m in second.history] == [m["policy_version"] for m in straight.history[2:]]

    a, b = _policy_weights(straight.run_dir, 4), _policy_weights(second.run_dir, 4)
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    if mode == "full":
        initial = load_file(str(tiny_model_path / "model.safetensors"))
        shared = a.keys() & initial.keys()  # tied embeddings are saved under one of their names
        assert shared and any(not torch.equal(a[k], initial[k]) for k in shared)  # the run did train
    else:
        assert any("lora_B" in k and a[k].abs().sum() > 0 for k in a)  # B starts at 0: it trained
    for step in (1, 2, 3, 4):
        groups = _train_groups(straight.run_dir, step)
        assert groups and groups == _train_groups(second.run_dir, step)
    assert [m.get("loss") for m in straight.history[2:]] == [m.get("loss") for m in second.history]
    # the kept checkpoints are the latest two
    assert sorted(p.name for p in (second.run_dir / "checkpoints").iterdir()) == ["step_000002", "step_000004"]


def test_on_cpu_the_trainer_works_on_the_engine_decode_thread(tiny_run_config, monkeypatch):
    """On CPU the run loads its trainer, updates it and writes its checkpoints on the engine's
    decode thread (HFEngine.run_job), the process's one long-lived torch thread, not on the
    main thread or an executor thread of their own."""
    import threading

    where: list[tuple[str, str]] = []

    def watch(name, method):
        def watched(self, *args, **kwargs):
            where.append((name, threading.current_thread().name))
            return method(self, *args, **kwargs)
        monkeypatch.setattr(Trainer, name, watched)

    for name in ("__init__", "update", "save"):
        watch(name, getattr(Trainer, name))
    res = train(tiny_run_config("threads", "run.steps=2", "run.checkpoint_every=1"), log=lambda _m: None)
    assert res.steps_done == 2
    assert [n for n, _ in where] == ["__init__", "update", "save", "update", "save"]
    assert {t for _, t in where} == {"hf-engine-decode"}


def test_same_seed_same_lora_run(tiny_run_config):
    """run.seed fixes the whole run: two LoRA runs with the same config, one after the other in
    one process, write the same adapter (its random initialisation included)."""
    quiet = lambda _msg: None  # noqa: E731
    first = train(tiny_run_config("one", "trainer.mode=lora", "run.steps=1"), log=quiet)
    torch.rand(1)  # anything else in the process that draws from torch's global RNG
    second = train(tiny_run_config("two", "trainer.mode=lora", "run.steps=1"), log=quiet)
    a, b = _policy_weights(first.run_dir, 1), _policy_weights(second.run_dir, 1)
    assert a.keys() == b.keys()
    differing = [k for k in a if not torch.equal(a[k], b[k])]
    assert not differing, differing[:3]


def test_run_folder_guards(tiny_run_config):
    """A second run into the same folder needs --resume or --overwrite; resuming with a changed
    config section, or with nothing to resume, is refused."""
    quiet = lambda _msg: None  # noqa: E731
    train(tiny_run_config("r", "run.steps=1"), log=quiet)
    with pytest.raises(StoreError, match="resume"):
        train(tiny_run_config("r", "run.steps=1"), log=quiet)
    with pytest.raises(CheckpointError, match="trainer"):
        train(tiny_run_config("r", "run.steps=2", "trainer.lr=0.5"), resume=True, log=quiet)
    with pytest.raises(CheckpointError, match="nothing to resume"):
        train(tiny_run_config("elsewhere"), resume=True, log=quiet)
    again = train(tiny_run_config("r", "run.steps=1"), overwrite=True, log=quiet)
    assert again.steps_done == 1


def test_train_evaluates_before_and_after(tiny_run_config):
    """With eval on, train() reports held-out results per domain and stores eval groups."""
    quiet = lambda _msg: None  # noqa: E731
    res = train(tiny_run_config("ev", "run.steps=1", "eval.before=true", "eval.after=true"), log=quiet)
    assert res.before is not None and res.after is not None
    for r in (res.before, res.after):
        assert r.per_domain["say"]["n"] == 3  # 30% of 10 lines held out
        assert 0.0 <= r.per_domain["say"]["reward"] <= 1.0
    store = Store(res.run_dir / "store.sqlite")
    assert len(store.groups(kind="eval")) == 6
    assert [k for _, k, _ in store.metrics()] == ["eval", "train", "spend", "eval"]  # the spend after each step
    store.close()


@pytest.mark.parametrize("mode", ["full", "lora"])
def test_checkpoint_weights_load_into_an_engine(tiny_run_config, tiny_model_path, mode):
    """load_checkpoint_weights gives the base model folder and the policy's weights (LoRA
    merged); an engine loaded with them holds exactly what the trainer would publish."""
    from practicum.checkpoints import load_checkpoint_weights
    from practicum.engines.hf import HFEngine

    cfg = tiny_run_config("ck", f"trainer.mode={mode}", "run.steps=2")
    res = train(cfg, log=lambda _m: None)
    assert any(m["samples_trained"] > 0 for m in res.history)
    ckpt = res.run_dir / "checkpoints" / "step_000002"
    base, weights = load_checkpoint_weights(ckpt)
    assert base == tiny_model_path
    engine = HFEngine(base, dtype=torch.float32)
    engine.load_weights(weights, 1)

    trainer = Trainer(tiny_model_path, cfg.trainer, cfg.algorithm)
    trainer.load(ckpt)
    published = trainer.export_weights()
    own = engine.model.state_dict()
    assert set(published) == set(own)
    for k, v in published.items():
        torch.testing.assert_close(own[k], v, rtol=1e-6, atol=1e-6, msg=k)
    initial = HFEngine(tiny_model_path, dtype=torch.float32).model.state_dict()
    assert any(not torch.equal(initial[k], own[k]) for k in own)  # the checkpoint is not the base


def test_checkpoint_weights_of_a_non_checkpoint_is_refused(tmp_path):
    """A folder that is not a training checkpoint raises CheckpointError naming it."""
    from practicum.checkpoints import load_checkpoint_weights

    with pytest.raises(CheckpointError, match="not a checkpoint"):
        load_checkpoint_weights(tmp_path)


def test_lr_schedule_runs_on_the_run_clock(tiny_run_config):
    """trainer.lr_schedule linear (to 0) over run.steps 4: the four updates run at 1e-2 x (1, 3/4,
    1/2, 1/4), each step's progress being taken when it begins, and the summary line shows the
    rate. Under a time limit the run's training time counts too, whichever is further: 30 s of a
    1-minute limit is progress 0.5 at step 2 of 100, and step 61 is further (0.6)."""
    from practicum.loop import Run

    lines: list[str] = []
    res = train(tiny_run_config("sched", "trainer.lr_schedule=linear"), log=lines.append)
    assert [m["lr"] for m in res.history] == pytest.approx([1e-2, 7.5e-3, 5e-3, 2.5e-3])
    assert any("lr 7.50e-03" in line for line in lines)
    cfg = tiny_run_config("timed", "run.steps=100", "run.time_limit_minutes=1")
    run = Run(cfg, overwrite=True, log=lambda _m: None)
    try:
        run.train_seconds = 30.0
        assert run.progress(2) == pytest.approx(0.5) and run.progress(61) == pytest.approx(0.6)
        run.train_seconds = 90.0
        assert run.progress(2) == 1.0
    finally:
        asyncio.run(run.aclose())


def test_pcgrad_runs_in_the_loop_with_two_domains(tiny_run_config):
    """trainer.gradient_surgery pcgrad in a real two-domain run: the samples carry their task's domain,
    so each update with both domains in it reports how their gradients met (grad_conflicts, the
    share of the one pair that conflicted, 0 or 1; grad_cosine_min in [-1, 1]) and the summary
    line shows it."""
    cfg = tiny_run_config("pcgrad", "trainer.gradient_surgery=pcgrad")
    second = cfg.domains[0].model_copy(update={"name": "say2"})
    cfg = cfg.model_copy(update={"domains": [cfg.domains[0], second]})
    lines: list[str] = []
    res = train(cfg, log=lines.append)
    both = [m for m in res.history if "grad_conflicts" in m]
    assert both, "no update held both domains"
    assert all(m["grad_conflicts"] in (0.0, 1.0) and -1.0 <= m["grad_cosine_min"] <= 1.0 for m in both)
    assert sum("conflicts " in line for line in lines) == len(both)
