"""Advantages and losses against hand-computed numbers (the arithmetic is in the comments)."""

from __future__ import annotations

import math
import random

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from practicum import algorithms as A

# Three groups of n = 4: two with signal, one uniform.
REWARDS = torch.tensor(
    [
        [1.0, 0.0, 0.0, 1.0],
        [0.0, 0.0, 0.0, 1.0],
        [0.5, 0.5, 0.5, 0.5],
    ]
)


def test_grpo_advantages_centre_and_scale_by_population_std():
    """GRPO: (r - mean) / (std + eps), std over the whole group (unbiased=False)."""
    adv = A.group_advantages(REWARDS, "grpo")
    eps = 1e-6
    # group 0: mean 0.5, deviations +-0.5, population std sqrt(4 * 0.25 / 4) = 0.5
    g0 = [0.5 / (0.5 + eps), -0.5 / (0.5 + eps), -0.5 / (0.5 + eps), 0.5 / (0.5 + eps)]
    # group 1: mean 0.25, deviations (-0.25, -0.25, -0.25, 0.75);
    # variance (3 * 0.0625 + 0.5625) / 4 = 0.1875, std = sqrt(0.1875) = 0.4330127
    s1 = math.sqrt(0.1875)
    g1 = [-0.25 / (s1 + eps)] * 3 + [0.75 / (s1 + eps)]  # -0.5773503 x3, 1.7320508
    # group 2: every reward equal -> deviations 0 -> advantages 0 (eps keeps 0/0 away)
    g2 = [0.0] * 4
    expected = torch.tensor([g0, g1, g2])
    assert adv.shape == (3, 4)
    torch.testing.assert_close(adv, expected, rtol=1e-6, atol=1e-6)
    assert adv[1, 3].item() == pytest.approx(1.7320508, abs=1e-5)


def test_drgrpo_advantages_only_centre():
    """Dr. GRPO: r - mean, no division by the group's std."""
    adv = A.group_advantages(REWARDS, "drgrpo")
    expected = torch.tensor(
        [
            [0.5, -0.5, -0.5, 0.5],  # mean 0.5
            [-0.25, -0.25, -0.25, 0.75],  # mean 0.25
            [0.0, 0.0, 0.0, 0.0],  # mean 0.5, all equal
        ]
    )
    torch.testing.assert_close(adv, expected)


def _surrogate_inputs(ratios: list[float], advantages: list[float]) -> tuple[torch.Tensor, ...]:
    """One token per sequence: old_logp = 0 and logp = log(ratio), so exp(logp - old) = ratio."""
    logp = torch.log(torch.tensor(ratios, dtype=torch.float64)).unsqueeze(1)  # [B, 1]
    old = torch.zeros_like(logp)
    adv = torch.tensor(advantages, dtype=torch.float64)  # [B]
    return logp, old, adv


def test_clipped_surrogate_clip_higher_is_asymmetric():
    """With clip_low 0.2 and clip_high 0.28, ratios clip at 1.28 for A > 0 and at 0.8 for A < 0,
    the loss is -min(r A, clip(r) A), and the indicator marks exactly the clipped tokens."""
    ratios = [1.5, 1.25, 0.5, 0.5, 0.78, 0.9, 1.5]
    advs = [1.0, 1.0, 1.0, -1.0, -1.0, -1.0, -1.0]
    logp, old, adv = _surrogate_inputs(ratios, advs)
    loss, clipped = A.clipped_surrogate(logp, old, adv, clip_low=0.2, clip_high=0.28)
    expected_loss = [
        -1.28,  # r 1.5,  A +1: min(1.5, 1.28) = 1.28 -> clipped above (1 + clip_high)
        -1.25,  # r 1.25, A +1: 1.25 < 1.28, not clipped (a symmetric 0.2 clip would cap it at 1.2)
        -0.5,  # r 0.5,  A +1: min(0.5, 0.8) = 0.5: no lower clip for a positive advantage
        0.8,  # r 0.5,  A -1: min(-0.5, -0.8) = -0.8 -> clipped below (1 - clip_low)
        0.8,  # r 0.78, A -1: min(-0.78, -0.8) = -0.8 -> clipped
        0.9,  # r 0.9,  A -1: inside [0.8, 1.28]
        1.5,  # r 1.5,  A -1: min(-1.5, -1.28) = -1.5: no upper clip for a negative advantage
    ]
    expected_clipped = [1.0, 0.0, 0.0, 1.0, 1.0, 0.0, 0.0]
    torch.testing.assert_close(loss.squeeze(1), torch.tensor(expected_loss, dtype=torch.float64))
    assert clipped.squeeze(1).tolist() == expected_clipped


def test_clipped_tokens_carry_no_gradient():
    """d loss / d logp is -A * r where the ratio is not clipped and exactly 0 where it is."""
    logp, old, adv = _surrogate_inputs([1.5, 1.1, 0.5, 0.9], [1.0, 1.0, -1.0, -1.0])
    logp.requires_grad_(True)
    loss, clipped = A.clipped_surrogate(logp, old, adv, clip_low=0.2, clip_high=0.28)
    loss.sum().backward()
    # d(-r A)/d logp = -A r  (r = exp(logp - old))
    expected = torch.tensor([[0.0], [-1.1], [0.0], [0.9]], dtype=torch.float64)
    torch.testing.assert_close(logp.grad, expected)
    assert clipped.squeeze(1).tolist() == [1.0, 0.0, 1.0, 0.0]


def test_kl_k3_hand_numbers():
    """k3 = e^d - d - 1 with d = ref - logp."""
    logp = torch.tensor([[math.log(0.5), -2.0, -1.0]], dtype=torch.float64)
    ref = torch.tensor([[math.log(0.25), -1.0, -1.0]], dtype=torch.float64)
    expected = torch.tensor(
        [
            [
                0.5 - math.log(0.5) - 1.0,  # d = ln 0.25 - ln 0.5 = ln 0.5: 0.5 + 0.6931 - 1 = 0.1931
                math.e - 1.0 - 1.0,  # d = 1: e - 2 = 0.7183
                0.0,  # d = 0: identical policies
            ]
        ],
        dtype=torch.float64,
    )
    torch.testing.assert_close(A.kl_k3(logp, ref), expected)


logps = st.floats(min_value=-30.0, max_value=0.0, allow_nan=False, width=32)
# the policy and the reference are nearly equal for most tokens: d = ref - logp is tiny there,
# where e^d - d - 1 loses everything to rounding
deltas = st.one_of(
    st.floats(min_value=-0.0009765625, max_value=0.0009765625, width=32), st.floats(min_value=-10.0, max_value=10.0, width=32)
)


@settings(max_examples=500, deadline=None)
@given(st.lists(st.tuples(logps, deltas), min_size=1, max_size=16))
def test_kl_k3_is_never_negative(pairs):
    """k3 estimates a KL divergence, so it must be >= 0 for any pair of log-probs, in float32 as
    the trainer calls it (near-equal pairs included)."""
    logp = torch.tensor([[p for p, _ in pairs]], dtype=torch.float32)
    ref = logp + torch.tensor([[d for _, d in pairs]], dtype=torch.float32)
    kl = A.kl_k3(logp, ref)
    assert torch.isfinite(kl).all()
    assert (kl >= 0).all(), f"negative k3 {kl.min().item()!r} for (logp, ref - logp) = {pairs}"


# Two sequences of a micro-batch; positions under mask 0 hold junk that must be ignored.
PER_TOKEN = torch.tensor([[1.0, 2.0, 3.0, 100.0], [4.0, 5.0, 100.0, 100.0]])
MASK = torch.tensor([[1.0, 1.0, 1.0, 0.0], [1.0, 1.0, 0.0, 0.0]])


def test_loss_normaliser_counts_tokens_and_sequences():
    """The normaliser holds the batch's trained-token count and sequence count."""
    norm = A.loss_normaliser([3, 2], "token_mean", max_tokens=4)
    assert (norm.total_tokens, norm.num_sequences, norm.max_tokens) == (5, 2, 4)


@pytest.mark.parametrize(
    "aggregation, expected",
    [
        ("token_mean", (1 + 2 + 3 + 4 + 5) / 5),  # 15 / 5 tokens = 3.0
        ("seq_mean_token_mean", ((1 + 2 + 3) / 3 + (4 + 5) / 2) / 2),  # (2 + 4.5) / 2 = 3.25
        ("seq_mean_token_sum_norm", (1 + 2 + 3 + 4 + 5) / (2 * 4)),  # 15 / (2 seqs x 4) = 1.875
    ],
)
def test_aggregate_hand_numbers(aggregation, expected):
    """Each aggregation reduces masked per-token losses as documented; masked-out junk is ignored."""
    norm = A.loss_normaliser([3, 2], aggregation, max_tokens=4)
    assert A.aggregate(PER_TOKEN, MASK, norm).item() == pytest.approx(expected)


@pytest.mark.parametrize("aggregation", ["token_mean", "seq_mean_token_mean", "seq_mean_token_sum_norm"])
def test_micro_batch_shares_sum_to_the_batch_loss(aggregation):
    """Splitting a batch into micro-batches (each padded to its own width) and summing their
    shares gives exactly the whole-batch loss, so gradient accumulation is exact."""
    gen = torch.Generator().manual_seed(0)
    lengths = [5, 2, 7, 3]
    width = max(lengths)
    per_token = torch.randn(4, width, generator=gen, dtype=torch.float64)
    mask = torch.zeros(4, width, dtype=torch.float64)
    for i, n in enumerate(lengths):
        mask[i, :n] = 1.0
    norm = A.loss_normaliser(lengths, aggregation, max_tokens=8)
    whole = A.aggregate(per_token, mask, norm)
    # micro-batch 1: sequences 0 and 1 (width 5); micro-batch 2: sequences 2 and 3 (width 7)
    first = A.aggregate(per_token[:2, :5], mask[:2, :5], norm)
    second = A.aggregate(per_token[2:, :7], mask[2:, :7], norm)
    assert (first + second).item() == pytest.approx(whole.item(), rel=1e-12)
    # and the whole-batch loss is not trivially zero
    assert abs(whole.item()) > 1e-3


def test_aggregate_rejects_unknown_aggregation():
    """A misspelt aggregation is an error, not a silent default."""
    norm = A.Normaliser("token_sum", 5, 2, 4)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="token_sum"):
        A.aggregate(PER_TOKEN, MASK, norm)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_token_logprobs_equals_log_softmax_gather(dtype):
    """token_logprobs(logits, targets) == log_softmax(logits)[targets], in float32."""
    gen = torch.Generator().manual_seed(1)
    logits = (torch.randn(2, 5, 11, generator=gen) * 4).to(dtype)
    targets = torch.randint(0, 11, (2, 5), generator=gen)
    got = A.token_logprobs(logits, targets)
    want = torch.log_softmax(logits.float(), dim=-1).gather(-1, targets.unsqueeze(-1)).squeeze(-1)
    assert got.dtype == torch.float32 and got.shape == (2, 5)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    assert (got <= 0).all()


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_chunked_token_logprobs_are_the_full_logits_value_and_gradient(temperature):
    """chunked_token_logprobs(h, W, t) == token_logprobs(h W^T / temperature, t), and so are the
    gradients with respect to h and W, with a chunk (4) that does not divide the positions (13);
    gradcheck in float64; a zero or negative temperature is refused."""
    gen = torch.Generator().manual_seed(3)
    h = torch.randn(13, 5, generator=gen, requires_grad=True)
    w = torch.randn(11, 5, generator=gen, requires_grad=True)
    t = torch.randint(0, 11, (13,), generator=gen)
    g = torch.randn(13, generator=gen)
    got = A.chunked_token_logprobs(h, w, t, temperature, chunk=4)
    want = A.token_logprobs((h @ w.T) / temperature, t)
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    got_grads = torch.autograd.grad((got * g).sum(), (h, w))
    want_grads = torch.autograd.grad((want * g).sum(), (h, w))
    for a, b in zip(got_grads, want_grads):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-5)
    h64, w64 = h.detach().double().requires_grad_(), w.detach().double().requires_grad_()
    assert torch.autograd.gradcheck(lambda a, b: A.chunked_token_logprobs(a, b, t, temperature, chunk=4), (h64, w64))
    with pytest.raises(ValueError, match="temperature"):
        A.chunked_token_logprobs(h, w, t, 0.0)


def test_chunked_token_logprobs_take_their_products_in_the_dtype_asked():
    """dtype bfloat16 (autocast's): the products are bf16's, as under autocast, within bf16's
    error of the float32 result; the log-probs come back in float32."""
    gen = torch.Generator().manual_seed(4)
    h, w = torch.randn(6, 8, generator=gen), torch.randn(32, 8, generator=gen)
    t = torch.randint(0, 32, (6,), generator=gen)
    got = A.chunked_token_logprobs(h, w, t, dtype=torch.bfloat16)
    want = A.token_logprobs(h.bfloat16() @ w.bfloat16().T, t)
    assert got.dtype == torch.float32
    torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-5)
    assert (got - A.token_logprobs(h @ w.T, t)).abs().max() > 0  # not the float32 products


# --- off-policy correction ---------------------------------------------------------------------
# Two sequences of three tokens. The behaviour (engine) log-probs are set so that the weights
# pi_prox / pi_behaviour are round numbers, and the current policy so that the PPO ratios
# pi / pi_prox are too:
#   weights w  [[3.0, 0.5, 1.0], [1.25, 4.0, 0.8]]
#   ratios  r  [[1.5, 1.0, 1.0], [1.0,  1.0, 0.7]]
#   advantages [+1, -1]; clip_low 0.2, clip_high 0.28 (ratio clipped to [0.8, 1.28])
# The unweighted surrogate -min(r A, clip(r) A) is then
#   [[-1.28 (1.5 clipped to 1.28), -1.0, -1.0], [1.0, 1.0, 0.8 (0.7 clipped to 0.8)]]
WEIGHTS = [[3.0, 0.5, 1.0], [1.25, 4.0, 0.8]]
RATIOS = [[1.5, 1.0, 1.0], [1.0, 1.0, 0.7]]
SURROGATE = [[-1.28, -1.0, -1.0], [1.0, 1.0, 0.8]]
CLIPPED = [[1.0, 0.0, 0.0], [0.0, 0.0, 1.0]]


def _off_policy_inputs() -> tuple[torch.Tensor, ...]:
    f64 = torch.float64
    behaviour = torch.tensor([[-1.0, -2.0, -0.5], [-1.0, -2.0, -0.5]], dtype=f64)
    prox = behaviour + torch.log(torch.tensor(WEIGHTS, dtype=f64))
    logp = prox + torch.log(torch.tensor(RATIOS, dtype=f64))
    return logp, prox, behaviour, torch.tensor([1.0, -1.0], dtype=f64)


@pytest.mark.parametrize(
    "method, cap, expected",
    [
        # none: the behaviour log-probs are ignored
        ("none", 2.0, SURROGATE),
        # tis, C = 2: weights min(w, 2) = [[2, 0.5, 1], [1.25, 2, 0.8]]
        ("tis", 2.0, [[-1.28 * 2, -0.5, -1.0], [1.25, 2.0, 0.8 * 0.8]]),  # -2.56 ... 0.64
        # decoupled, no cap: every token weighted by its w
        ("decoupled", None, [[-1.28 * 3, -0.5, -1.0], [1.25, 4.0, 0.8 * 0.8]]),  # -3.84 ... 0.64
        # decoupled, cap 2.5: the tokens with w 3 and 4 are dropped (weight 0), not clamped
        ("decoupled", 2.5, [[0.0, -0.5, -1.0], [1.25, 0.0, 0.8 * 0.8]]),
    ],
)
def test_off_policy_surrogates_hand_numbers(method, cap, expected):
    """Each correction multiplies the clipped surrogate (taken around the proximal policy) by its
    weight: 1 for none, min(w, C) for tis, w or 0 above the cap for decoupled; the clip indicator
    is that of the unweighted surrogate."""
    logp, prox, behaviour, adv = _off_policy_inputs()
    loss, clipped = A.SURROGATES[method](logp, prox, behaviour, adv, 0.2, 0.28, cap)
    torch.testing.assert_close(loss, torch.tensor(expected, dtype=torch.float64))
    assert clipped.tolist() == CLIPPED


def test_none_is_exactly_the_clipped_surrogate():
    """off_policy none is today's update bit for bit: the same function of the same inputs."""
    logp, prox, behaviour, adv = _off_policy_inputs()
    loss, clipped = A.SURROGATES["none"](logp, prox, behaviour, adv, 0.2, 0.28, 2.0)
    ref_loss, ref_clipped = A.clipped_surrogate(logp, prox, adv, 0.2, 0.28)
    assert torch.equal(loss, ref_loss) and torch.equal(clipped, ref_clipped)


@pytest.mark.parametrize(
    "method, cap, expected",
    [
        # weights [[2, 0.5, 1], [1.25, 2, 0.8]]
        ("tis", 2.0, [[0.0, -0.5, -1.0], [1.25, 2.0, 0.0]]),
        # weights [[0, 0.5, 1], [1.25, 0, 0.8]]
        ("decoupled", 2.5, [[0.0, -0.5, -1.0], [1.25, 0.0, 0.0]]),
    ],
)
def test_weighted_gradient_hand_numbers(method, cap, expected):
    """d loss / d logp = -A r weight where the PPO clip is inactive and 0 where it is active
    (tokens (0, 0) and (1, 2)), and the weight itself is a constant: computed from proximal
    log-probs that require grad, it carries none."""
    logp, prox, behaviour, adv = _off_policy_inputs()
    logp.requires_grad_(True)
    assert not A.behaviour_weights(prox.clone().requires_grad_(True), behaviour).requires_grad
    loss, _ = A.SURROGATES[method](logp, prox, behaviour, adv, 0.2, 0.28, cap)
    loss.sum().backward()
    # (0, 1): -(+1)(1.0)(0.5) = -0.5; (0, 2): -(+1)(1.0)(1.0) = -1; (1, 0): -(-1)(1.0)(1.25) = 1.25;
    # (1, 1): -(-1)(1.0)(2 for tis, 0 for decoupled, whose cap dropped w = 4)
    torch.testing.assert_close(logp.grad, torch.tensor(expected, dtype=torch.float64))


def test_tis_without_a_cap_is_an_error():
    """TIS is defined by its cap; None is refused rather than silently untruncated."""
    logp, prox, behaviour, adv = _off_policy_inputs()
    with pytest.raises(ValueError, match="tis_cap"):
        A.surrogate_tis(logp, prox, behaviour, adv, 0.2, 0.28, None)


def test_mismatch_hand_numbers():
    """Sums over the masked tokens of |train - behaviour|, of k3 = e^d - d - 1 with
    d = train - behaviour (KL(behaviour || train), samples from behaviour), and of the tokens whose
    weight e^d exceeds the cap. The masked-out position holds values whose k3 overflows float32
    (d = 200): excluded, not turned into inf or NaN."""
    train = torch.tensor([[-1.0, -2.0, -0.5, 0.0]])
    behaviour = torch.tensor([[-1.5, -2.0, -0.2, -200.0]])
    mask = torch.tensor([[1.0, 1.0, 1.0, 0.0]])
    # d = [0.5, 0.0, -0.3]
    m = A.mismatch(train, behaviour, mask, cap=1.5)
    assert m.abs_logp.item() == pytest.approx(0.5 + 0.0 + 0.3)  # 0.8
    # e^0.5 - 1.5 = 0.1487213; 0; e^-0.3 + 0.3 - 1 = 0.0408182; sum 0.1895395
    assert m.kl.item() == pytest.approx(math.exp(0.5) - 1.5 + math.exp(-0.3) - 0.7, rel=1e-5)
    assert m.kl.item() == pytest.approx(0.1895395, abs=1e-6)
    assert m.truncated.item() == 1.0  # weights e^d = [1.649, 1.0, 0.741]: only the first > 1.5
    assert m.tokens.item() == 3.0
    assert A.mismatch(train, behaviour, mask, cap=None).truncated.item() == 0.0
    same = A.mismatch(train, train, mask, cap=1.0)  # on-policy, exactly: no gap, nothing over
    assert (same.abs_logp.item(), same.kl.item(), same.truncated.item()) == (0.0, 0.0, 0.0)


@pytest.mark.parametrize("schedule, progress, expected", [
    ("constant", 0.0, 1.0), ("constant", 0.9, 1.0),
    # linear from 1 to min_ratio 0.1: 1 - 0.9 x
    ("linear", 0.0, 1.0), ("linear", 0.5, 0.55), ("linear", 1.0, 0.1),
    # cosine: 0.1 + 0.9 x (1 + cos(pi x)) / 2
    ("cosine", 0.0, 1.0), ("cosine", 0.5, 0.55), ("cosine", 0.25, 0.1 + 0.45 * (1 + math.sqrt(0.5))),
    # wsd with decay 0.2: flat to 0.8, then 1 - 0.9 (p - 0.8) / 0.2
    ("wsd", 0.5, 1.0), ("wsd", 0.8, 1.0), ("wsd", 0.9, 0.55), ("wsd", 1.0, 0.1),
    # progress outside [0, 1] is clamped
    ("linear", -0.3, 1.0), ("linear", 1.7, 0.1),
])
def test_lr_factor_hand_numbers(schedule, progress, expected):
    assert A.lr_factor(progress, schedule, warmup=0.0, decay=0.2, min_ratio=0.1) == pytest.approx(expected)


def test_lr_factor_warmup_then_decay():
    """Warmup 0.2: 0 at the start, half at 0.1, the peak at 0.2; a linear decay then runs over the
    remaining 0.8 (0.5 of it done at 0.6: factor 0.5 with min_ratio 0); wsd's decay starts at
    1 - decay whatever the warmup."""
    f = lambda p, s="linear": A.lr_factor(p, s, warmup=0.2, decay=0.2, min_ratio=0.0)  # noqa: E731
    assert [f(0.0), f(0.1), f(0.2), f(0.6), f(1.0)] == pytest.approx([0.0, 0.5, 1.0, 0.5, 0.0])
    assert [f(0.1, "wsd"), f(0.5, "wsd"), f(0.9, "wsd")] == pytest.approx([0.5, 1.0, 0.5])
    assert [f(0.1, "constant"), f(0.9, "constant")] == pytest.approx([0.5, 1.0])
    with pytest.raises(ValueError, match="schedule"):
        A.lr_factor(0.5, "step")  # type: ignore[arg-type]


def _t(*v: float) -> torch.Tensor:
    return torch.tensor(v, dtype=torch.float32)


def test_pcgrad_two_conflicting_tasks_hand_numbers():
    """g1 (1, 0) and g2 (-1, 1) conflict (g1.g2 = -1): g1 loses its part along g2, (1, 0) + 1/2 (-1, 1)
    = (0.5, 0.5); g2 its part along g1, (-1, 1) + (1, 0) = (0, 1); the sum (0.5, 1.5) has a
    non-negative inner product with both originals, where the plain sum (0, 1) had 0 with g1."""
    s = A.pcgrad([_t(1, 0), _t(-1, 1)])
    assert s.grad.tolist() == pytest.approx([0.5, 1.5])
    assert (s.pairs, s.conflicts) == (1, 1) and s.min_cosine == pytest.approx(-1 / math.sqrt(2))


def test_pcgrad_leaves_agreeing_tasks_alone():
    s = A.pcgrad([_t(1, 0), _t(1, 1)])
    assert s.grad.tolist() == pytest.approx([2.0, 1.0]) and s.conflicts == 0
    assert s.min_cosine == pytest.approx(1 / math.sqrt(2))


def test_pcgrad_three_tasks_hand_numbers():
    """g1 (1, 0), g2 (0, 1), g3 (-2, -1): g3 conflicts with both. g1 -> (1, 0) + 2/5 (-2, -1) = (0.2, -0.4);
    g2 -> (0, 1) + 1/5 (-2, -1) = (-0.4, 0.8); g3 -> + 2 (1, 0) = (0, -1), then + 1 (0, 1) = (0, 0).
    Sum (-0.2, 0.4); two conflicting pairs of three, the least cosine -2/sqrt(5). Exactly antiparallel
    gradients cancel to nothing."""
    s = A.pcgrad([_t(1, 0), _t(0, 1), _t(-2, -1)])
    assert s.grad.tolist() == pytest.approx([-0.2, 0.4])
    assert (s.pairs, s.conflicts) == (3, 2) and s.min_cosine == pytest.approx(-2 / math.sqrt(5))
    assert A.pcgrad([_t(1, 2), _t(-0.5, -1)]).grad.tolist() == pytest.approx([0.0, 0.0], abs=1e-7)
    shuffled = A.pcgrad([_t(1, 0), _t(0, 1), _t(-2, -1)], random.Random(0))  # g3's order does not matter here
    assert shuffled.grad.tolist() == pytest.approx([-0.2, 0.4])


def test_token_entropy_hand_numbers():
    """Uniform over V tokens: log V; one certain token: 0; p = (1/2, 1/4, 1/4):
    H = 0.5 ln 2 + 2 x 0.25 ln 4 = 1.5 ln 2. The gradient of a uniform distribution's entropy is
    0 (its maximum)."""
    logits = torch.tensor([[[0.0, 0.0, 0.0, 0.0], [0.0, -1e4, -1e4, -1e4],
                            [math.log(2.0), 0.0, 0.0, -1e4]]], requires_grad=True)
    h = A.token_entropy(logits)
    assert h.shape == (1, 3)
    assert h[0].tolist() == pytest.approx([math.log(4.0), 0.0, 1.5 * math.log(2.0)], abs=1e-5)
    h[0, 0].backward()
    assert logits.grad[0, 0].abs().max() < 1e-6
