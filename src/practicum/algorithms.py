"""GRPO-family advantages and losses, as pure functions over tensors.

Shapes: ``B`` sequences in a (micro-)batch, ``T`` token positions (right-padded), ``G`` groups
of ``n`` episodes each. ``mask`` is 1 on tokens the policy generated and 0 on everything else
(prompt, tool observations, padding).

Losses are returned as *sums* divided by a normaliser the caller passes in, so that summing the
micro-batch losses of one batch gives exactly the loss of the whole batch, whatever the
micro-batching (see :func:`loss_normaliser`).
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import torch

AdvantageKind = Literal["grpo", "drgrpo"]
Aggregation = Literal["token_mean", "seq_mean_token_mean", "seq_mean_token_sum_norm"]
OffPolicy = Literal["none", "tis", "decoupled"]
LrSchedule = Literal["constant", "linear", "cosine", "wsd"]
GradientSurgery = Literal["none", "pcgrad"]

# An advantage no larger than this is none: a group whose rewards are all equal centres to 0 (to rounding)
NO_SIGNAL = 1e-8


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


# --- off-policy correction --------------------------------------------------------------------
# Three policies meet in one update: the behaviour policy that sampled the tokens (the engine: bf16,
# possibly some versions old; its log-probs travel on each sample), the proximal policy (the
# trainer's weights before this update; with one update per batch its log-probs are the current
# ones, detached) and the policy being optimised. The clip is always taken around the proximal
# policy; the corrections differ only in how they weight tokens by pi_prox / pi_behaviour.
Surrogate = Callable[
    [torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor, float, float, float | None],
    tuple[torch.Tensor, torch.Tensor],
]


def behaviour_weights(prox_logp: torch.Tensor, behaviour_logp: torch.Tensor) -> torch.Tensor:
    """Importance weight pi_prox / pi_behaviour of each sampled token, detached (a constant
    of the loss, as in TIS and decoupled PPO). [B, T], [B, T] -> [B, T]."""
    return torch.exp(prox_logp.detach() - behaviour_logp)


def surrogate_on_policy(
    logp: torch.Tensor,
    prox_logp: torch.Tensor,
    behaviour_logp: torch.Tensor,
    advantages: torch.Tensor,
    clip_low: float,
    clip_high: float,
    cap: float | None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``none``: the clipped surrogate around the proximal policy; the behaviour log-probs are
    ignored, i.e. the samples are taken to come from the trainer's own policy.
    logp, prox_logp, behaviour_logp: [B, T]; advantages: [B]. Returns (loss, clipped), [B, T]."""
    return clipped_surrogate(logp, prox_logp, advantages, clip_low, clip_high)


def surrogate_tis(
    logp: torch.Tensor,
    prox_logp: torch.Tensor,
    behaviour_logp: torch.Tensor,
    advantages: torch.Tensor,
    clip_low: float,
    clip_high: float,
    cap: float | None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``tis``: truncated importance sampling (Yao et al., "Your efficient RL framework secretly
    brings you off-policy RL training"; verl's ``tis_imp_ratio_cap``). Each token's clipped
    surrogate is multiplied by min(pi_prox / pi_behaviour, cap): a weight above the cap is
    clamped to it, which bounds the variance and keeps every token in the loss (biased).
    Shapes as :func:`surrogate_on_policy`."""
    if cap is None:
        raise ValueError("tis needs a cap (algorithm.tis_cap)")
    loss, clipped = clipped_surrogate(logp, prox_logp, advantages, clip_low, clip_high)
    weight = behaviour_weights(prox_logp, behaviour_logp).clamp(max=cap)  # [B, T]
    return loss * weight, clipped


def surrogate_decoupled(
    logp: torch.Tensor,
    prox_logp: torch.Tensor,
    behaviour_logp: torch.Tensor,
    advantages: torch.Tensor,
    clip_low: float,
    clip_high: float,
    cap: float | None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``decoupled``: decoupled PPO (AReaL, Fu et al. 2025). The trust region is the clip around
    the proximal policy; the behaviour policy enters only through the weight
    pi_prox / pi_behaviour. With a cap, a token whose weight exceeds it is left out of the loss
    (weight 0; it still counts in the normaliser), as AReaL's ``behav_imp_weight_cap`` does:
    an outlier is rejected rather than clamped. Shapes as :func:`surrogate_on_policy`."""
    loss, clipped = clipped_surrogate(logp, prox_logp, advantages, clip_low, clip_high)
    weight = behaviour_weights(prox_logp, behaviour_logp)  # [B, T]
    if cap is not None:
        weight = torch.where(weight <= cap, weight, torch.zeros_like(weight))
    return loss * weight, clipped


SURROGATES: dict[OffPolicy, Surrogate] = {
    "none": surrogate_on_policy,
    "tis": surrogate_tis,
    "decoupled": surrogate_decoupled,
}


@dataclass(frozen=True)
class Mismatch:
    """The train-vs-rollout gap summed over the trained tokens of a (micro-)batch; 0-d tensors.
    Divide by ``tokens`` (summed over the batch's micro-batches) for the per-token means."""

    abs_logp: torch.Tensor  # sum of |log pi_train - log pi_behaviour|
    kl: torch.Tensor  # sum of the k3 estimate of KL(pi_behaviour || pi_train)
    truncated: torch.Tensor  # tokens whose weight pi_train / pi_behaviour exceeds the cap
    tokens: torch.Tensor  # trained tokens


def mismatch(train_logp: torch.Tensor, behaviour_logp: torch.Tensor, mask: torch.Tensor, cap: float | None) -> Mismatch:
    """How far the trainer's log-probs of the sampled tokens are from the engine's.

    train_logp, behaviour_logp, mask: [B, T]. The KL is KL(pi_behaviour || pi_train) by k3
    (r - 1 - log r, r = pi_train / pi_behaviour): the tokens were drawn from the behaviour policy,
    which makes this estimator unbiased and, unlike k1, never negative per token. Positions
    outside the mask are excluded with ``where`` (their junk could be inf), not multiplied by 0.
    """
    on = mask > 0
    zero = torch.zeros((), dtype=train_logp.dtype, device=train_logp.device)
    train, behaviour = train_logp.detach(), behaviour_logp.detach()
    gap = torch.where(on, (train - behaviour).abs(), zero)
    kl = torch.where(on, kl_k3(behaviour, train), zero)
    over = (behaviour_weights(train, behaviour) > cap) & on if cap is not None else torch.zeros_like(on)
    return Mismatch(gap.sum(), kl.sum(), over.sum().to(train.dtype), on.sum().to(train.dtype))


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


class _ChunkedLogprob(torch.autograd.Function):
    """log softmax(h W^T / temperature)[target] for N positions, a ``chunk`` of positions at a time."""

    @staticmethod
    def forward(ctx, hidden: torch.Tensor, weight: torch.Tensor, targets: torch.Tensor, temperature: float,
                chunk: int, dtype: torch.dtype) -> torch.Tensor:
        acc = torch.promote_types(hidden.dtype, torch.float32)  # the softmax's precision: float32, or float64 given it
        out = torch.empty(hidden.shape[0], dtype=acc, device=hidden.device)
        lse = torch.empty_like(out)
        w = weight.to(dtype)
        for i in range(0, hidden.shape[0], chunk):
            z = (hidden[i:i + chunk].to(dtype) @ w.T).to(acc) / temperature  # [c, V]
            lse[i:i + chunk] = torch.logsumexp(z, dim=-1)
            out[i:i + chunk] = z.gather(-1, targets[i:i + chunk, None]).squeeze(-1) - lse[i:i + chunk]
        ctx.save_for_backward(hidden, weight, targets, lse)
        ctx.temperature, ctx.chunk, ctx.dtype = temperature, chunk, dtype
        return out

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        hidden, weight, targets, lse = ctx.saved_tensors
        t, dtype = ctx.temperature, ctx.dtype
        w = weight.to(dtype)
        need_h, need_w = ctx.needs_input_grad[0], ctx.needs_input_grad[1]
        grad_h = torch.empty_like(hidden) if need_h else None
        acc = lse.dtype
        grad_w = torch.zeros(weight.shape, dtype=acc, device=weight.device) if need_w else None
        for i in range(0, hidden.shape[0], ctx.chunk):
            h = hidden[i:i + ctx.chunk]
            g = grad[i:i + ctx.chunk].to(acc)
            z = (h.to(dtype) @ w.T).to(acc) / t
            # d logp / d z = onehot(target) - softmax(z); times the incoming grad, through the 1 / t
            dz = torch.exp(z - lse[i:i + ctx.chunk, None]).mul_(-g[:, None])
            dz.scatter_add_(-1, targets[i:i + ctx.chunk, None], g[:, None])
            dz.div_(t)
            if need_h:
                grad_h[i:i + ctx.chunk] = (dz.to(dtype) @ w).to(hidden.dtype)
            if need_w:
                grad_w.addmm_(dz.T, h.to(acc))
        return grad_h, (grad_w.to(weight.dtype) if need_w else None), None, None, None, None


def chunked_token_logprobs(hidden: torch.Tensor, weight: torch.Tensor, targets: torch.Tensor,
                           temperature: float = 1.0, chunk: int = 128, dtype: torch.dtype | None = None) -> torch.Tensor:
    """Log-probability of each target under ``log_softmax(hidden @ weight.T / temperature)``:
    hidden [N, H], weight [V, H] (the vocabulary projection), targets [N] -> [N], float32.

    :func:`token_logprobs` of the full logits, without ever holding them: ``chunk`` positions at a
    time, in the forward pass and again in the backward, which recomputes each chunk's logits (one
    more [chunk, H] x [H, V] product) instead of keeping [N, V] of them alive. Every [N, V] tensor
    of the plain path - the logits, logsumexp's exponentials, the softmax and the gradient in the
    backward - is 200 KB a position at a 49k vocabulary, so a few thousand positions make several
    GB of short-lived tensors; on CPU each is a fresh mapping whose every page faults on first touch
    (the trainer's update spent a quarter of its CPU time in the kernel on them). A chunk of 128
    positions is 25 MB, small enough for the allocator to reuse. ``dtype``: the products' precision
    (autocast's, bfloat16 say); the softmax and its gradient are float32 (float64 given float64)."""
    if temperature <= 0:
        raise ValueError(f"temperature must be positive, got {temperature}")
    return _ChunkedLogprob.apply(hidden, weight, targets, float(temperature), max(1, int(chunk)),
                                 dtype or hidden.dtype)


def token_entropy(logits: torch.Tensor) -> torch.Tensor:
    """Entropy of the distribution at each position, over the whole vocabulary: logits [B, T, V]
    -> [B, T], in nats. H = logsumexp(z) - sum softmax(z) z, in float32 (differentiable)."""
    logits = logits.float()
    return torch.logsumexp(logits, dim=-1) - (torch.softmax(logits, dim=-1) * logits).sum(dim=-1)


def lr_factor(progress: float, schedule: LrSchedule = "constant", warmup: float = 0.0, decay: float = 0.2,
              min_ratio: float = 0.0) -> float:
    """The learning rate at ``progress`` (0 at the run's start, 1 at its end), as a share of the peak.

    Linear warmup from 0 over the first ``warmup`` of the run, then: ``constant`` 1; ``linear`` and
    ``cosine`` from 1 down to ``min_ratio`` over the rest; ``wsd`` (warmup-stable-decay, Hu et al.
    2024, MiniCPM) 1 until ``1 - decay``, then linearly down to ``min_ratio`` at the end. Written by
    progress, not by step count, because a run may end on its time limit, whose step count is not
    known ahead (transformers' schedules are LambdaLRs over a step count given in advance).
    """
    p = min(max(progress, 0.0), 1.0)
    if warmup > 0 and p < warmup:
        return p / warmup
    if schedule == "constant":
        return 1.0
    if schedule == "wsd":
        start = 1.0 - decay
        if p <= start:
            return 1.0
        return 1.0 - (1.0 - min_ratio) * (p - start) / decay
    x = (p - warmup) / (1.0 - warmup) if warmup < 1 else 1.0  # the share of the decay done
    if schedule == "linear":
        return 1.0 - (1.0 - min_ratio) * x
    if schedule == "cosine":
        return min_ratio + (1.0 - min_ratio) * 0.5 * (1.0 + math.cos(math.pi * x))
    raise ValueError(f"unknown learning-rate schedule {schedule!r}")


@dataclass
class Surgery:
    """What :func:`pcgrad` did to one update: the combined gradient, and how the tasks' gradients
    met - ``conflicts`` of the ``pairs`` had a negative inner product, ``min_cosine`` the least."""

    grad: torch.Tensor
    pairs: int
    conflicts: int
    min_cosine: float


def pcgrad(grads: list[torch.Tensor], rng: random.Random | None = None) -> Surgery:
    """Gradient surgery (PCGrad, Yu et al. 2020): each task's gradient (flat, [P]) loses its
    component along every other task's gradient it conflicts with (negative inner product), the
    others taken in a random order (``rng``; None: in their given order), and the projected
    gradients are summed. Where no two conflict, the sum is the plain one, so a batch whose
    domains agree trains exactly as without it. Each projection is onto the other task's
    *original* gradient, as in the paper."""
    k = len(grads)
    norms2 = [float(g.dot(g)) for g in grads]
    dots = {(i, j): float(grads[i].dot(grads[j])) for i in range(k) for j in range(i + 1, k)}
    cos = [d / math.sqrt(norms2[i] * norms2[j]) for (i, j), d in dots.items() if norms2[i] > 0 and norms2[j] > 0]
    total = torch.zeros_like(grads[0])
    for i in range(k):
        g = grads[i].clone()
        others = [j for j in range(k) if j != i]
        if rng is not None:
            rng.shuffle(others)
        for j in others:
            d = float(g.dot(grads[j]))
            if d < 0 and norms2[j] > 0:
                g.add_(grads[j], alpha=-d / norms2[j])
        total.add_(g)
    return Surgery(total, len(dots), sum(d < 0 for d in dots.values()), min(cos, default=1.0))
