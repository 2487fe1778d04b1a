"""GRPO-family advantages and losses, as pure functions over tensors.

Shapes: ``B`` sequences in a (micro-)batch, ``T`` token positions (right-padded), ``G`` groups
of ``n`` episodes each. ``mask`` is 1 on tokens the policy generated and 0 on everything else
(prompt, tool observations, padding).

Losses are returned as *sums* divided by a normaliser the caller passes in, so that summing the
micro-batch losses of one batch gives exactly the loss of the whole batch, whatever the
micro-batching (see :func:`loss_normaliser`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import torch

AdvantageKind = Literal["grpo", "drgrpo"]
Aggregation = Literal["token_mean", "seq_mean_token_mean", "seq_mean_token_sum_norm"]


def group_advantages(rewards: torch.Tensor, kind: AdvantageKind = "grpo", eps: float = 1e-6) -> torch.Tensor:
    """Advantages of each episode relative to its group.

    rewards: [G, n]. GRPO divides the centred reward by the group's standard deviation
    (unbiased=False: the n samples are the whole group); Dr. GRPO only centres, which removes the
    bias toward groups of near-uniform reward. Returns [G, n].
    """
    centred = rewards - rewards.mean(dim=1, keepdim=True)
    if kind == "drgrpo":
        return centred
    std = rewards.std(dim=1, keepdim=True, unbiased=False)
    return centred / (std + eps)


def clipped_surrogate(
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    advantages: torch.Tensor,
    clip_low: float = 0.2,
    clip_high: float = 0.2,
) -> tuple[torch.Tensor, torch.Tensor]:
    """PPO's clipped objective per token, as a loss (to minimise).

    logp, old_logp: [B, T]; advantages: [B] (one per sequence, broadcast over its tokens).
    The ratio is clipped to [1 - clip_low, 1 + clip_high]; clip_high > clip_low is DAPO's
    clip-higher, which leaves room for unlikely tokens to grow. Returns (loss [B, T], clipped
    [B, T] as 0/1 floats).
    """
    ratio = torch.exp(logp - old_logp)
    adv = advantages.unsqueeze(1)  # [B, 1]
    unclipped = ratio * adv
    clipped_ratio = torch.clamp(ratio, 1.0 - clip_low, 1.0 + clip_high)
    clipped = clipped_ratio * adv
    loss = -torch.minimum(unclipped, clipped)
    was_clipped = (clipped < unclipped).float()
    return loss, was_clipped


def kl_k3(logp: torch.Tensor, ref_logp: torch.Tensor) -> torch.Tensor:
    """Schulman's k3 estimator of KL(policy || reference) per token: e^d - d - 1, d = ref - logp.

    Non-negative, unbiased, low variance. [B, T] -> [B, T].
    """
    d = ref_logp - logp
    return torch.expm1(d) - d  # expm1(d) >= d exactly in floating point, so never negative


@dataclass(frozen=True)
class Normaliser:
    """What a batch's per-token loss sum is divided by (see :func:`loss_normaliser`)."""

    aggregation: Aggregation
    total_tokens: int  # masked tokens in the whole batch
    num_sequences: int  # sequences in the whole batch
    max_tokens: int  # the constant of Dr. GRPO's token-sum normalisation


def loss_normaliser(mask_lengths: list[int], aggregation: Aggregation, max_tokens: int) -> Normaliser:
    """Build the normaliser of one batch from the number of trained tokens of each sequence."""
    return Normaliser(aggregation, max(sum(mask_lengths), 1), max(len(mask_lengths), 1), max(max_tokens, 1))


def aggregate(per_token: torch.Tensor, mask: torch.Tensor, norm: Normaliser) -> torch.Tensor:
    """Reduce a per-token loss [B, T] of one micro-batch to its share of the batch loss.

    token_mean: sum over all tokens of the batch / their count (DAPO; long answers weigh more).
    seq_mean_token_mean: mean over each sequence's tokens, then mean over sequences (GRPO paper).
    seq_mean_token_sum_norm: sum over tokens / (sequences x a fixed max length) (Dr. GRPO; no
    length bias).
    """
    masked = per_token * mask
    if norm.aggregation == "token_mean":
        return masked.sum() / norm.total_tokens
    if norm.aggregation == "seq_mean_token_mean":
        per_seq = masked.sum(dim=1) / mask.sum(dim=1).clamp(min=1)
        return per_seq.sum() / norm.num_sequences
    if norm.aggregation == "seq_mean_token_sum_norm":
        return masked.sum() / (norm.num_sequences * norm.max_tokens)
    raise ValueError(f"unknown aggregation {norm.aggregation!r}")


def token_logprobs(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Log-probability of each target token. logits [B, T, V] (float), targets [B, T] -> [B, T].

    Computed as logit - logsumexp in float32, which avoids materialising a second [B, T, V]
    tensor of log-softmax values.
    """
    logits = logits.float()
    picked = torch.gather(logits, -1, targets.unsqueeze(-1)).squeeze(-1)
    return picked - torch.logsumexp(logits, dim=-1)
