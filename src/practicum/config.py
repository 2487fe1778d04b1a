"""Run configuration: YAML in, validated pydantic models out.

Every field is documented here (``practicum train --help-config`` prints them). Unknown fields
are errors, so a typo never silently falls back to a default. Command-line overrides use dotted
paths: ``--set trainer.lr=1e-5 --set rollout.group_size=8``; values are parsed as YAML scalars.
A bad file or override raises :class:`~practicum.errors.ConfigError` naming the file and field.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from practicum.budget import BudgetConfig
from practicum.curriculum.parts import CurriculumConfig
from practicum.curriculum.replay import check_correction
from practicum.distributed.config import DistributedConfig
from practicum.engines.openai_api import EndpointConfig
from practicum.errors import ConfigError


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True, populate_by_name=True)


class RunSection(_Strict):
    name: str = Field("run", description="Name of the run, used in logs.")
    dir: str = Field("runs/run", description="Run folder: store, metrics, checkpoints. Relative to the working directory.")
    seed: int = Field(0, description="Seed of task sampling, generation and training.")
    steps: int = Field(20, ge=1, description="Training steps (one update each).")
    time_limit_minutes: float | None = Field(None, gt=0, description="Stop after this much training time (evaluation excluded).")
    eval_every: int = Field(0, ge=0, description="Evaluate held-out accuracy every N steps (0: only before and after).")
    checkpoint_every: int = Field(10, ge=1, description="Write a checkpoint every N steps (and at the end).")
    keep_checkpoints: int = Field(2, ge=1, description="How many recent checkpoints to keep.")
    threads: int | None = Field(None, ge=1, description="torch intra-op threads (default: torch's choice).")


class ModelSection(_Strict):
    name: str = Field("smollm2-135m-instruct", description="Built-in model name or a local transformers checkpoint folder.")
    device: str = Field("cpu", description="torch device of engine and trainer.")
    engine_dtype: Literal["auto", "bfloat16", "float32", "float16"] = Field("auto", description="Generation dtype. auto: bf16 where the device has bf16 instructions (GPUs, CPUs with AVX512-BF16/AMX), fp32 where it would be emulated (about 4x slower).")
    max_batch: int = Field(64, ge=1, description="Most sequences decoding at once.")
    prefix_cache_mb: float = Field(1024, ge=0, description="Memory for KV caches of ended rows, reused by the next turn of their conversation (only its new tokens are prefilled; emptied when weights change). 0: off.")
    kv_room: int = Field(64, ge=0, description="hf engine: spare KV-cache columns a layer grows by, so that decoding copies a layer once per kv_room tokens instead of every token. 0: transformers' own cache layers (no spare memory, a copy of the layer per token).")
    kv_row_room: int = Field(16, ge=0, description="hf engine: spare KV-cache rows a layer grows by when requests join a running batch, so that admitting one copies its own rows, not the batch's (with kv_room > 0). 0: no spare rows.")
    engine: Literal["hf", "vllm"] = Field("hf", description="Generation engine: hf (transformers, in process, continuous batching) or vllm (the vllm extra, a GPU; docs/distributed.md).")
    vllm: dict[str, Any] = Field(default_factory=dict, description="engine: vllm - extra arguments of vllm.LLM (gpu_memory_utilization, max_model_len, tensor_parallel_size...).")
    endpoint: EndpointConfig | None = Field(None, description="Generate with an OpenAI-compatible chat-completions endpoint instead of the in-process model (docs/endpoints.md): evaluation and data generation only, never training.")

    def hf_options(self) -> dict[str, Any]:
        """The in-process hf engine's sizes from this section: ``HFEngine(path, dtype, device, **this)``."""
        return {"max_batch": self.max_batch, "prefix_cache_mb": self.prefix_cache_mb,
                "kv_room": self.kv_room, "kv_row_room": self.kv_row_room}


class ExampleSection(_Strict):
    question: str = Field(..., description="An example question, as the user turn.")
    reply: str = Field(..., description="The reply to show for it, in the requested format.")


_MOVED = {"code": "options: (the code domain's settings: mode, scoring, sandbox, concurrency...)",
          "reward": "options.reward (the math domain's component weights)"}


class DomainSection(_Strict):
    """One domain of a run. Which kinds exist, and what each takes under ``source:`` and
    ``options:``, is up to its plugin (``practicum envs list``, docs/domains.md); both are
    validated by the plugin's options model when the config loads."""

    name: str = Field(..., description="Domain name, used in metrics and the store.")
    env: str = Field("math", description="Domain kind: the name of an installed domain plugin (`practicum envs list`): math, code (docs/code.md), terminal (docs/terminal.md), gym, or a third-party one (docs/domains.md).")
    weight: float = Field(1.0, gt=0, description="Share of prompts drawn from this domain.")
    source: dict[str, Any] | None = Field(None, description="Where tasks come from ({kind: ..., and the kind's fields}); the kinds a domain takes are its plugin's (docs/domains.md).")
    system_prompt: str | None = Field(None, description="System prompt (default: the environment's).")
    examples: list[ExampleSection] = Field(default_factory=list, description="Worked examples shown before each question as earlier turns (few-shot).")
    eval_size: int = Field(200, ge=1, description="Held-out problems used for evaluation.")
    eval_seed: int = Field(10_000_019, description="Seed of the held-out set (disjoint questions from training).")
    options: dict[str, Any] = Field(default_factory=dict, description="The domain plugin's own settings, validated by its options model (`practicum envs show ENV` lists them).")
    entropy_coef: float | None = Field(None, ge=0, description="This domain's entropy bonus weight, in place of algorithm.entropy_coef "
                                                             "(None: that one). Domains whose replies start sharp collapse to one "
                                                             "reply per prompt without it; ones that start broad need to commit.")
    entropy_target: float | None = Field(None, ge=0, description="This domain's target entropy for the adaptive bonus, in place of "
                                                                 "algorithm.entropy_target (None: that one; 0: none for this domain, which keeps the fixed entropy_coef).")

    @model_validator(mode="before")
    @classmethod
    def _moved(cls, data: Any) -> Any:
        if isinstance(data, dict):
            moved = [k for k in _MOVED if k in data]
            if moved:
                raise ValueError("; ".join(f"'{k}:' moved to {_MOVED[k]}" for k in moved))
        return data


class RolloutSection(_Strict):
    prompts_per_step: int = Field(8, ge=1, description="Tasks per step (groups).")
    group_size: int = Field(8, ge=2, description="Episodes per task, compared with each other (GRPO's n).")
    temperature: float = Field(1.0, ge=0, description="Sampling temperature for training rollouts.")
    top_p: float = Field(1.0, gt=0, le=1, description="Nucleus sampling threshold.")
    max_new_tokens: int = Field(64, ge=1, description="Most tokens per model turn.")
    max_turns: int = Field(1, ge=1, description="Most model turns per episode.")
    max_episode_tokens: int | None = Field(None, ge=1, description="Most generated tokens per episode, all turns together (None: no limit).")
    max_episode_seconds: float | None = Field(None, gt=0, description="Most wall time per episode (None: no limit).")


class AsyncSection(_Strict):
    """The orchestrator (``async:`` in the config file): staleness, concurrency, retries."""

    max_staleness: int = Field(0, ge=0, description="How many policy versions a trained sample may lag behind: at most (max_staleness + 1) x prompts_per_step groups are in flight, and a ready group older than this when the trainer takes it is dropped (reason 'stale'). 0 is the synchronous loop.")
    domain_concurrency: dict[str, int] = Field(default_factory=dict, description="Most episodes of a domain running at once, by domain name (default: no limit beyond the groups in flight).")
    retries: dict[Literal["environment", "verifier", "engine", "rollout"], int] = Field(
        default_factory=lambda: {"environment": 2, "verifier": 1, "engine": 2},
        description="Retries per error kind of an episode that failed (it runs again from scratch); when they run out the episode stays failed and is kept out of the loss. Model output failures are data, never retried.")
    min_episodes: int = Field(2, ge=1, description="A group with fewer usable (scored) episodes than this is failed instead of trained.")
    stop_after_failed_groups: int = Field(32, ge=0, description="Stop the run with an error when this many groups in a row have failed (an engine, sandbox or verifier that is down), instead of drawing groups that fail forever; 0: never stop.")

    @model_validator(mode="after")
    def _positive(self) -> AsyncSection:
        bad = {k: v for k, v in self.domain_concurrency.items() if v < 1}
        if bad:
            raise ValueError(f"domain_concurrency must be >= 1, got {bad}")
        if any(v < 0 for v in self.retries.values()):
            raise ValueError("retries must be >= 0")
        return self


class AlgorithmConfig(_Strict):
    advantage: Literal["grpo", "drgrpo"] = Field("grpo", description="grpo: centre and scale by group std; drgrpo: centre only.")
    aggregation: Literal["token_mean", "seq_mean_token_mean", "seq_mean_token_sum_norm"] = Field("token_mean", description="How per-token losses reduce to a batch loss.")
    clip_low: float = Field(0.2, ge=0, description="Lower PPO clip (ratio >= 1 - clip_low).")
    clip_high: float = Field(0.28, ge=0, description="Upper PPO clip (ratio <= 1 + clip_high); > clip_low is DAPO's clip-higher.")
    kl_coef: float = Field(0.0, ge=0, description="Weight of the k3 KL penalty to the initial policy (0: no reference model).")
    entropy_coef: float = Field(0.0, ge=0, description="Weight of the entropy bonus: the loss minus entropy_coef x the policy's "
                                                      "entropy at each generated token (over the whole vocabulary, at the "
                                                      "sampling temperature); keeps exploration from collapsing. 0: none "
                                                      "(an estimate of the entropy is still logged).")
    entropy_target: float | None = Field(None, ge=0, description="Adaptive entropy bonus (Skywork-OR1's adaptive entropy control), per domain: each domain's "
                                                                 "coefficient rises by entropy_coef_step at a step where that domain's sampled entropy "
                                                                 "(mean -log p of its generated tokens, nats per token) is below this target, falls by "
                                                                 "it where not, within [0, entropy_coef_max], and applies only while below; it starts "
                                                                 "at entropy_coef. A domain's own entropy_target replaces it (0: none for that domain). "
                                                                 "None: the fixed bonus entropy_coef. See docs/algorithms.md.")
    entropy_coef_step: float = Field(0.005, gt=0, description="entropy_target: how far a domain's coefficient moves at each step.")
    entropy_coef_max: float = Field(0.05, gt=0, description="entropy_target: the largest coefficient a domain reaches.")
    entropy_all_samples: bool = Field(False, description="With an entropy bonus (entropy_coef > 0, or a domain's own), also train the samples of all-alike groups "
                                                         "(advantage 0), for the bonus alone. Off: the bonus covers the samples "
                                                         "the update trains anyway, at no extra forward or backward pass.")
    max_tokens_norm: int = Field(64, ge=1, description="seq_mean_token_sum_norm: the constant token count.")
    off_policy: Literal["none", "tis", "decoupled"] = Field(
        "none",
        description="Correction for samples the trainer's policy did not generate itself (stale versions, the engine's bf16): "
                    "none: treat them as on-policy; tis: weight each token by min(pi_train/pi_behaviour, tis_cap) (truncated importance sampling); "
                    "decoupled: decoupled PPO, weight by pi_train/pi_behaviour, tokens above decoupled_cap left out. See docs/algorithms.md.")
    tis_cap: float = Field(2.0, ge=1.0, description="tis: the cap C on a token's weight pi_train/pi_behaviour (larger weights are clamped to C). "
                                                    "Also the threshold of the is_truncated_frac metric under off_policy none.")
    decoupled_cap: float | None = Field(None, gt=1.0, description="decoupled: a token whose weight pi_train/pi_behaviour exceeds this is left out of the loss "
                                                               "(AReaL's behav_imp_weight_cap); null: no cap.")

    @property
    def weight_cap(self) -> float | None:
        """The cap that truncates a token's importance weight under the chosen correction."""
        return self.decoupled_cap if self.off_policy == "decoupled" else self.tis_cap


class LoraSection(_Strict):
    r: int = Field(16, ge=1, description="LoRA rank.")
    alpha: int = Field(32, ge=1, description="LoRA alpha.")
    dropout: float = Field(0.0, ge=0, lt=1, description="LoRA dropout.")
    target_modules: list[str] | str = Field("all-linear", description="Modules to adapt.")


class TrainerConfig(_Strict):
    mode: Literal["full", "lora"] = Field("full", description="Full fine-tune or LoRA adapters (peft).")
    lr: float = Field(1e-5, gt=0, description="AdamW learning rate (the peak, under a schedule).")
    lr_schedule: Literal["constant", "linear", "cosine", "wsd"] = Field(
        "constant",
        description="The learning rate over the run's progress (steps done of run.steps, or training time of "
                    "run.time_limit_minutes, whichever is further): constant; linear or cosine decay to "
                    "lr x min_lr_ratio; wsd (warmup-stable-decay): constant, then linear decay over the last "
                    "decay_fraction of the run. All after warmup_fraction of linear warmup. See docs/algorithms.md.")
    warmup_fraction: float = Field(0.0, ge=0, lt=1, description="Share of the run over which the learning rate rises linearly from 0 to lr.")
    decay_fraction: float = Field(0.2, gt=0, le=1, description="wsd: the share of the run, at its end, over which the learning rate decays.")
    min_lr_ratio: float = Field(0.0, ge=0, le=1, description="The learning rate at the end of a decaying schedule, as a share of lr.")
    beta1: float = Field(0.9, ge=0, lt=1, description="AdamW beta1.")
    beta2: float = Field(0.99, ge=0, lt=1, description="AdamW beta2.")
    weight_decay: float = Field(0.0, ge=0, description="AdamW weight decay.")
    max_grad_norm: float = Field(1.0, gt=0, description="Gradient clipping norm.")
    gradient_surgery: Literal["none", "pcgrad"] = Field(
        "none",
        description="Multi-domain interference: pcgrad computes each domain's gradient of a batch apart and removes "
                    "from each its component along any other domain's that it conflicts with (PCGrad, Yu et al. "
                    "2020) before they are summed. One backward pass per domain's samples, as without it; the "
                    "flat gradients (4 bytes a parameter per domain) held meanwhile. See docs/algorithms.md.")
    micro_batch_tokens: int = Field(4096, ge=16, description="Padded tokens per micro-batch; gradients accumulate across them.")
    logits_chunk: int = Field(128, ge=0, description="Trained positions whose vocabulary logits are computed at once, in "
                              "the forward and again in the backward (practicum.algorithms.chunked_token_logprobs): the "
                              "[positions, vocabulary] logits are never held whole. 0: all at once, kept for the backward "
                              "(also the path whenever an entropy bonus needs the full distribution).")
    autocast_dtype: Literal["auto", "bfloat16", "float16", "none"] = Field("auto", description="Autocast dtype of forward and backward. auto: bf16 where the device computes it natively, none (fp32) elsewhere.")
    gradient_checkpointing: bool = Field(False, description="Trade compute for memory.")
    lora: LoraSection = Field(default_factory=LoraSection)

    @model_validator(mode="after")
    def _schedule(self) -> TrainerConfig:
        if self.lr_schedule == "wsd" and self.warmup_fraction > 1 - self.decay_fraction:
            raise ValueError(f"wsd: warmup_fraction ({self.warmup_fraction}) runs into the decay, which starts at "
                             f"1 - decay_fraction = {1 - self.decay_fraction:g}")
        return self


class EvalSection(_Strict):
    max_new_tokens: int = Field(64, ge=1, description="Most tokens per reply in evaluation (greedy).")
    before: bool = Field(True, description="Evaluate before training.")
    after: bool = Field(True, description="Evaluate after training.")


class RunConfig(_Strict):
    """The config of ``practicum train``."""

    run: RunSection = Field(default_factory=RunSection)
    model: ModelSection = Field(default_factory=ModelSection)
    domains: list[DomainSection] = Field(..., min_length=1)
    rollout: RolloutSection = Field(default_factory=RolloutSection)
    async_: AsyncSection = Field(default_factory=AsyncSection, alias="async",
                                 description="The orchestrator: staleness bound, concurrency, retries.")
    algorithm: AlgorithmConfig = Field(default_factory=AlgorithmConfig)
    trainer: TrainerConfig = Field(default_factory=TrainerConfig)
    eval: EvalSection = Field(default_factory=EvalSection)
    budget: BudgetConfig = Field(default_factory=BudgetConfig, description="Stop training cleanly at a spend: tokens, sandbox seconds, wall time, money (practicum.budget).")
    distributed: DistributedConfig = Field(default_factory=DistributedConfig,
                                           description="Where the parts run: in this process, or as Ray actors (docs/distributed.md).")
    curriculum: CurriculumConfig = Field(default_factory=CurriculumConfig,
                                         description="Training across domains: mixing, filter, pools, levels, replay, shaping, scaffold, drift guard (docs/curriculum.md). Every part is off by default.")
    base_dir: str = Field(".", description="(set on load) folder of the config file, for relative paths.", exclude=True)

    @model_validator(mode="after")
    def _unique_domains(self) -> RunConfig:
        names = [d.name for d in self.domains]
        if len(set(names)) != len(names):
            raise ValueError(f"domain names must be unique, got {names}")
        self.curriculum.check_domains(names)
        if self.curriculum.replay.enabled:
            check_correction(self.algorithm.off_policy)
        tuned = sorted({"entropy_coef_step", "entropy_coef_max"} & self.algorithm.model_fields_set)
        if tuned and not any(d.entropy_target if d.entropy_target is not None else self.algorithm.entropy_target
                             for d in self.domains):
            raise ValueError(f"algorithm.{' and '.join(tuned)} tune the adaptive entropy bonus, and no domain has an "
                             "entropy target (algorithm.entropy_target, or a domain's own above 0): set one, or drop them")
        if self.curriculum.mixing.updates == "per_domain" and self.trainer.gradient_surgery != "none":
            raise ValueError("curriculum.mixing.updates: per_domain gives each domain its own optimizer step, so "
                             f"trainer.gradient_surgery ({self.trainer.gradient_surgery}) has no domains in one update to "
                             "meet: drop one of them")
        if self.curriculum.drift.enabled and not self.run.eval_every:
            raise ValueError("curriculum.drift needs run.eval_every: the guard checks each periodic held-out evaluation")
        return self


def _set_dotted(data: dict[str, Any], dotted: str, value: Any, source: str) -> None:
    """Set ``data[k1][k2]...`` named by ``dotted`` (list items by index). Each mapping or list on
    the way is copied before it is changed, so one that a YAML alias (``*name``) shares with
    another place keeps its value there: an override changes the path it names, nothing else."""
    keys = dotted.split(".")
    node: Any = data
    for i, k in enumerate(keys[:-1]):
        if isinstance(node, list):
            try:
                idx = int(k)
                child = node[idx]
            except (ValueError, IndexError):
                raise ConfigError(f"{source}: override {dotted!r}: {'.'.join(keys[:i + 1])} is not a valid list index") from None
        else:
            idx = k
            child = node.setdefault(k, {})
        if not isinstance(child, (dict, list)):
            raise ConfigError(f"{source}: override {dotted!r}: {'.'.join(keys[:i + 1])} is not a section")
        child = copy.copy(child)  # this path's own copy: an alias elsewhere keeps the original
        node[idx] = child
        node = child
    last = keys[-1]
    if isinstance(node, list):
        try:
            node[int(last)] = value
        except (ValueError, IndexError):
            raise ConfigError(f"{source}: override {dotted!r}: {last} is not a valid list index") from None
    else:
        node[last] = value


def parse_overrides(overrides: list[str], source: str = "<overrides>") -> list[tuple[str, Any]]:
    out = []
    for o in overrides:
        if "=" not in o:
            raise ConfigError(f"{source}: override {o!r} must look like section.field=value")
        k, v = o.split("=", 1)
        try:
            out.append((k.strip(), yaml.safe_load(v)))
        except yaml.YAMLError as e:
            raise ConfigError(f"{source}: override {o!r}: value is not valid YAML ({e})") from e
    return out


def load_config(path: str | Path, overrides: list[str] | None = None) -> RunConfig:
    """Load, override and validate a run config; errors name the file and the field."""
    path = Path(path)
    try:
        raw = yaml.safe_load(path.read_text())
    except OSError as e:
        raise ConfigError(f"cannot read config {path}: {e.strerror}") from e
    except yaml.YAMLError as e:
        raise ConfigError(f"{path}: not valid YAML: {e}") from e
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: the top level must be a mapping of sections")
    for k, v in parse_overrides(overrides or [], str(path)):
        _set_dotted(raw, k, v, str(path))
    return validate_config(raw, str(path), base_dir=path.parent)


def validate_config(raw: dict[str, Any], source: str = "<config>", base_dir: str | Path = ".") -> RunConfig:
    try:
        cfg = RunConfig.model_validate(raw)
    except ValidationError as e:
        lines = []
        for err in e.errors():
            loc = ".".join(str(x) for x in err["loc"]) or "(top level)"
            msg = err["msg"]
            if err["type"] == "extra_forbidden":
                msg = "unknown field (check the spelling; `practicum train --help-config` lists fields)"
            lines.append(f"  {loc}: {msg}")
        raise ConfigError(f"{source}: invalid config:\n" + "\n".join(lines)) from None
    lines = [f"  domains.{i}.{loc}: {msg}" for i, d in enumerate(cfg.domains) for loc, msg in _domain_problems(d)]
    if lines:
        raise ConfigError(f"{source}: invalid config:\n" + "\n".join(lines))
    cfg.base_dir = str(base_dir)
    return cfg


def _domain_problems(d: DomainSection) -> list[tuple[str, str]]:
    """What the domain's plugin finds wrong with its section: an unknown ``env`` (the installed
    ones listed), or ``options``/``source`` fields its options model rejects."""
    from practicum.domains import get_plugin, option_errors
    from practicum.errors import PluginError

    try:
        plugin = get_plugin(d.env)
    except PluginError as e:
        return [("env", str(e))]
    return option_errors(plugin, d)


def describe(model: type[BaseModel] = RunConfig, prefix: str = "") -> list[str]:
    """One line per field: dotted name, type, default, description."""
    lines = []
    for name, f in model.model_fields.items():
        if f.exclude:
            continue
        ann = f.annotation
        sub = ann if isinstance(ann, type) and issubclass(ann, BaseModel) else None
        if sub is None and getattr(ann, "__origin__", None) is list:
            args = getattr(ann, "__args__", ())
            if args and isinstance(args[0], type) and issubclass(args[0], BaseModel):
                lines.append(f"{prefix}{name}: list of sections")
                lines += describe(args[0], f"{prefix}{name}[].")
                continue
        if sub is not None:
            lines += describe(sub, f"{prefix}{f.alias or name}.")
            continue
        name = f.alias or name
        default = "required" if f.is_required() else repr(f.get_default(call_default_factory=True))
        lines.append(f"{prefix}{name} (default {default}): {f.description or ''}")
    return lines
