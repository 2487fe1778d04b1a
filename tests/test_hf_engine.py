"""The in-process transformers engine on the tiny checkpoint: chat rendering, seeded sampling,
batching, nucleus sampling, stop strings, and agreement with the trainer's log-probs."""

from __future__ import annotations

import asyncio

import pytest
import torch

from practicum.config import AlgorithmConfig, TrainerConfig
from practicum.engines.base import SamplingParams
from practicum.engines.hf import HFEngine
from practicum.envs.toy import ToyDomain
from practicum.models import resolve_model
from practicum.records import Message
from practicum.testing import TINY_WORDS, tiny_vocab
from practicum.trainer import Sample, Trainer


def _engine(path, **kw):
    from practicum.engines.hf import HFEngine

    return HFEngine(path, dtype=torch.float32, **kw)


def _trainer(path, **kw) -> Trainer:
    return Trainer(path, TrainerConfig(autocast_dtype="none", **kw), AlgorithmConfig())


def _generate(engine, prompts, params):
    return asyncio.run(engine.generate(prompts, params))


def test_tiny_checkpoint_renders_chats_without_unknown_tokens(tiny_model_path):
    """The tiny checkpoint is a model folder like any other; the chat template and word-level
    tokenizer render every toy prompt to known ids, append-only across turns."""
    assert resolve_model(str(tiny_model_path)) == tiny_model_path
    engine = _engine(tiny_model_path)
    unk = engine.tokenizer.unk_token_id
    vocab = tiny_vocab()
    msgs = [Message(role="system", content="say the word"), Message(role="user", content="say seven")]
    ids = engine.chat_ids(msgs)
    assert unk not in ids
    assert ids[:2] == [vocab["<|im_start|>"], vocab["system"]]
    assert ids[-2:] == [vocab["<|im_start|>"], vocab["assistant"]]
    assert engine.decode(ids) == "system say the word user say seven assistant"
    # a reply followed by the environment's next message extends the context exactly
    reply = [vocab["seven"], vocab["seven"], vocab["<|im_end|>"]]
    later = [*msgs, Message(role="assistant", content="seven seven")]
    new = [Message(role="user", content="please say seven")]
    assert ids + reply + engine.append_ids(later, new) == engine.chat_ids(later + new)
    assert engine.stop_token_ids == [vocab["<|im_end|>"]]
    for task in ToyDomain(targets=TINY_WORDS, eval_size=len(TINY_WORDS)).source.eval_tasks():
        assert unk not in engine.chat_ids(task.prompt)


def test_sampling_is_seeded_and_logprobs_match_the_trainer(tiny_model_path):
    """Same seed, same samples; greedy is deterministic; and the engine's behaviour log-probs are
    the trainer's log-probs of the same tokens (both fp32), so the ids line up exactly."""
    engine = _engine(tiny_model_path)
    prompt = engine.chat_ids([Message(role="user", content="say seven")])
    prompts = [prompt, prompt[:-4] + prompt[-2:], prompt]
    params = SamplingParams(max_new_tokens=8, temperature=1.0, seed=11)
    a = asyncio.run(engine.generate(prompts, params))
    b = asyncio.run(engine.generate(prompts, params))
    assert [c.ids for c in a] == [c.ids for c in b]
    other_seed = asyncio.run(engine.generate(prompts, SamplingParams(max_new_tokens=8, temperature=1.0, seed=12)))
    assert [c.ids for c in a] != [c.ids for c in other_seed]  # the seed matters
    greedy = SamplingParams(max_new_tokens=8, temperature=0.0)
    g1, g2 = (asyncio.run(engine.generate([prompt], greedy))[0] for _ in range(2))
    assert g1.ids == g2.ids
    for c in a:
        assert len(c.ids) == len(c.logprobs) > 0 and all(lp <= 0 for lp in c.logprobs)
        assert (c.finish_reason == "stop") == (c.ids[-1] == engine.tokenizer.eos_token_id)
    trainer = _trainer(tiny_model_path, lr=1e-9)
    samples = [Sample(p + c.ids, [0] * len(p) + [1] * len(c.ids), [0.0] * len(p) + c.logprobs, 1.0)
               for p, c in zip(prompts, a)]
    stats = trainer.update(samples)
    assert stats["tokens_trained"] == sum(len(c.ids) for c in a)
    assert stats["logp_mismatch"] < 1e-4


@pytest.fixture(scope="module")
def varied_model_path(tmp_path_factory):
    """A tiny model initialised with larger weights: its greedy replies differ from prompt to
    prompt and from token to token (the default init repeats one token), so that batching and
    stop strings are tested on non-trivial output."""
    from practicum.testing import make_tiny_model

    return make_tiny_model(tmp_path_factory.mktemp("varied"), initializer_range=0.3)


def _prompts(engine) -> list[list[int]]:
    """Five prompts of different lengths (left padding differs for each)."""
    texts = ["say seven", "say three please", "one", "say the word nine please say it", "yes no yes"]
    return [engine.chat_ids([Message(role="user", content=t)]) for t in texts]


def test_batched_generation_equals_one_by_one(varied_model_path):
    """Left-padded batches split by max_batch give each prompt exactly what it gets alone, in the
    caller's order (greedy, fp32)."""
    engine = _engine(varied_model_path, max_batch=2)
    prompts = _prompts(engine)
    greedy = SamplingParams(max_new_tokens=8, temperature=0.0)
    batched = _generate(engine, prompts, greedy)
    for p, c in zip(prompts, batched):
        (alone,) = _generate(engine, [p], greedy)
        assert c.ids == alone.ids
        assert c.logprobs == pytest.approx(alone.logprobs, abs=1e-4)
    assert len({tuple(c.ids) for c in batched}) > 1  # the prompts really lead to different replies


def test_tiny_top_p_is_greedy_with_log_prob_zero(varied_model_path):
    """With a nucleus so small that it holds one token, sampling returns the greedy reply and
    each sampled token has log-prob 0 under the distribution actually sampled from."""
    engine = _engine(varied_model_path)
    prompts = _prompts(engine)
    greedy = _generate(engine, prompts, SamplingParams(max_new_tokens=6, temperature=0.0))
    nucleus = _generate(engine, prompts, SamplingParams(max_new_tokens=6, temperature=1.0, top_p=1e-6, seed=4))
    for g, n in zip(greedy, nucleus):
        assert n.ids == g.ids
        assert n.logprobs == pytest.approx([0.0] * len(n.ids), abs=1e-6)


def test_stop_string_ends_the_reply(varied_model_path):
    """A stop string ends the reply at the token that completes it, with finish_reason stop."""
    engine = _engine(varied_model_path)
    prompt = _prompts(engine)[0]
    greedy = SamplingParams(max_new_tokens=12, temperature=0.0)
    (full,) = _generate(engine, [prompt], greedy)
    words = [engine.decode([i]) for i in full.ids]
    assert full.finish_reason == "length" and all(words)  # twelve real words, no end of turn
    j = next(i for i in range(2, len(words)) if words[i] not in words[:i])  # a word first seen late
    cut = j
    (stopped,) = _generate(engine, [prompt], SamplingParams(max_new_tokens=12, temperature=0.0, stop=(words[j],)))
    assert stopped.ids == full.ids[: cut + 1]
    assert stopped.finish_reason == "stop"


def test_unseeded_sampling_follows_torch_manual_seed(tiny_model_path):
    """Without SamplingParams.seed, sampling draws from torch's global RNG like the rest of torch:
    torch.manual_seed makes it reproducible, and it does not reseed the global RNG behind the
    caller's back."""
    engine = _engine(tiny_model_path)
    prompts = [engine.chat_ids([Message(role="user", content="say seven")])] * 3
    runs, after = [], []
    for _ in range(2):
        torch.manual_seed(0)
        runs.append([c.ids for c in _generate(engine, prompts, SamplingParams(max_new_tokens=8))])
        after.append(torch.rand(3))
    assert runs[0] == runs[1]
    assert torch.equal(after[0], after[1])


@pytest.mark.parametrize("budget", [4096, 32])
def test_multi_turn_group_log_probs_match_the_trainer(tiny_model_path, budget):
    """Two-turn toy episodes of one group (so the trainer packs them behind one shared prompt,
    or splits them when the token budget is small): the trainer's log-probs of every generated
    token of both turns equal the engine's, and observation tokens are not trained."""
    from practicum.loop import build_samples
    from practicum.rollout import run_groups

    engine = _engine(tiny_model_path)
    dom = ToyDomain(turns=2)
    tasks = [dom.source.train_task(0), dom.source.train_task(1)]
    groups = asyncio.run(run_groups(tasks, 4, lambda t: dom.make_env(), engine,
                                    SamplingParams(max_new_tokens=5, seed=2), max_turns=2))
    episodes = [e for g in groups for e in g.episodes]
    assert all(len(e.turns) == 2 for e in episodes)
    samples, _ = build_samples(groups, "grpo")
    samples = [Sample(s.ids, s.mask, s.behaviour_logprobs, 1.0 if i % 2 else -1.0) for i, s in enumerate(samples)]
    trainer = Trainer(tiny_model_path, TrainerConfig(autocast_dtype="none", lr=1e-9, micro_batch_tokens=budget),
                      AlgorithmConfig())
    stats = trainer.update(samples)
    assert stats["tokens_trained"] == sum(len(t.completion_ids) for e in episodes for t in e.turns)
    assert stats["logp_mismatch"] < 1e-4


def test_real_template_continuation_keeps_the_newline_after_end_of_turn():
    """With the embedded model's ChatML template, a tool/user message appended after a reply
    gives exactly the ids of rendering the whole conversation: the newline the template puts
    after <|im_end|> is not lost, and the generated ids are kept as they were."""
    from transformers import AutoTokenizer

    from practicum.models import cached_path, is_checkpoint

    path = cached_path("smollm2-135m-instruct")
    if not is_checkpoint(path):
        pytest.skip("embedded model not prepared (make setup prepares it)")
    engine = HFEngine.__new__(HFEngine)  # only the tokenizer is needed: skip loading weights
    engine.tokenizer = AutoTokenizer.from_pretrained(path)
    msgs = [Message(role="system", content="be brief"), Message(role="user", content="2 + 2 =")]
    ids = engine.chat_ids(msgs)
    reply_text = "4\n<answer>4</answer>"
    reply = engine.tokenizer(reply_text, add_special_tokens=False).input_ids + [engine.tokenizer.eos_token_id]
    later = [*msgs, Message(role="assistant", content=reply_text)]
    new = [Message(role="user", content="and 3 + 3?")]
    extended = ids + reply + engine.append_ids(later, new, ids + reply)
    assert extended == engine.chat_ids(later + new)
    # a reply cut off at the token limit (no end-of-turn token) is closed by the continuation
    cut = engine.tokenizer("4\n<answer>", add_special_tokens=False).input_ids
    later_cut = [*msgs, Message(role="assistant", content="4\n<answer>")]
    tail = engine.append_ids(later_cut, new, ids + cut)
    assert engine.tokenizer.decode(tail).startswith("<|im_end|>\n<|im_start|>user")
