"""Build the domains a config names. One place maps ``env`` kinds to their modules."""

from __future__ import annotations

from pathlib import Path

from practicum.config import DomainSection
from practicum.envs.base import Domain
from practicum.errors import ConfigError


def build_domain(d: DomainSection, seed: int, base_dir: str | Path = ".") -> Domain:
    if d.env == "math":
        from practicum.envs.math import (
            DEFAULT_SYSTEM_PROMPT,
            JsonlMathSource,
            MathDomain,
            ReasoningGymSource,
        )
        from practicum.scoring import RewardWeights

        system = DEFAULT_SYSTEM_PROMPT if d.system_prompt is None else d.system_prompt
        weights = RewardWeights(d.reward.strict, d.reward.lenient, d.reward.format)
        examples = [(e.question, e.reply) for e in d.examples]
        if d.source.kind == "reasoning_gym":
            src = ReasoningGymSource(d.name, d.source.dataset or "", d.source.params, system, seed, d.eval_seed,
                                     d.eval_size, examples=examples)
        else:
            path = Path(d.source.path or "")
            if not path.is_absolute():
                path = Path(base_dir) / path
            src = JsonlMathSource(d.name, path, system, seed, d.source.eval_fraction, examples)  # type: ignore[assignment]
        return MathDomain(d.name, src, weights)
    if d.env == "code":
        from practicum.envs.code import build_code_domain

        return build_code_domain(d, seed, base_dir)
    if d.env == "terminal":
        from practicum.envs.terminal import TerminalDomain

        root = Path(d.source.path or "")
        if not root.is_absolute():
            root = Path(base_dir) / root
        return TerminalDomain(d.name, root, seed, sandbox=d.code.sandbox)
    raise ConfigError(f"domain {d.name!r}: unknown env {d.env!r}")
