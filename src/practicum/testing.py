"""Test seams that ship with the library: a tiny checkpoint any test can train in seconds.

:func:`make_tiny_model` writes a randomly initialised ``LlamaForCausalLM`` (a few thousand
parameters) with a word-level tokenizer and a ChatML-shaped chat template to a folder. The
folder is an ordinary transformers checkpoint, so :class:`~practicum.engines.hf.HFEngine`,
:class:`~practicum.trainer.Trainer`, :func:`~practicum.models.resolve_model` and a run config's
``model.name`` all accept it. Pair it with :mod:`practicum.envs.toy` to show the whole loop
learning on a CPU in well under a minute.

Limits: the tokenizer splits on whitespace and knows only :data:`TINY_WORDS`; any other word
becomes ``<unk>``. Prompts for the tiny model should therefore be made of those words (the toy
domain's are). Decoding joins tokens with single spaces.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerFast

SPECIAL_TOKENS = ("<unk>", "<|im_start|>", "<|im_end|>")
ROLE_WORDS = ("system", "user", "assistant", "tool")
TINY_WORDS = (
    "say", "the", "word", "please", "yes", "no",
    "zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine",
    "0", "1", "2", "3", "4", "5", "6", "7", "8", "9",
)  # fmt: skip

# ChatML shape, as in the embedded model's template; newlines are whitespace to the tokenizer.
CHAT_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>' + '\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\n' }}{% endif %}"
)


def tiny_vocab() -> dict[str, int]:
    """Token -> id of the tiny tokenizer: special tokens first, then role words, then words."""
    tokens = [*SPECIAL_TOKENS, *ROLE_WORDS, *TINY_WORDS]
    return {t: i for i, t in enumerate(tokens)}


def make_tiny_tokenizer() -> PreTrainedTokenizerFast:
    """A whitespace-split word-level tokenizer over :func:`tiny_vocab` with the chat template."""
    from tokenizers import Tokenizer
    from tokenizers.models import WordLevel
    from tokenizers.pre_tokenizers import WhitespaceSplit
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(WordLevel(vocab=tiny_vocab(), unk_token="<unk>"))
    tok.pre_tokenizer = WhitespaceSplit()  # no decoder: decoding joins tokens with single spaces
    # The four tokens named here become special tokens, matched before whitespace splitting, so
    # "<|im_start|>user" is two tokens and the template needs no spaces around them.
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        unk_token="<unk>",
        bos_token="<|im_start|>",
        eos_token="<|im_end|>",
        pad_token="<|im_end|>",
    )
    fast.chat_template = CHAT_TEMPLATE
    return fast


def make_tiny_model(
    path: str | Path,
    hidden_size: int = 48,
    num_layers: int = 2,
    num_heads: int = 2,
    intermediate_size: int = 96,
    seed: int = 0,
    tie_word_embeddings: bool = True,
    initializer_range: float = 0.02,
) -> Path:
    """Write a tiny random ``LlamaForCausalLM`` checkpoint with its tokenizer to ``path``.

    The same arguments give the same weights (the initialisation is seeded locally, without
    touching the global RNG). Returns the folder.
    """
    import torch
    from transformers import GenerationConfig, LlamaConfig, LlamaForCausalLM

    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    tokenizer = make_tiny_tokenizer()
    vocab = tiny_vocab()
    eos = vocab["<|im_end|>"]
    config = LlamaConfig(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        intermediate_size=intermediate_size,
        num_hidden_layers=num_layers,
        num_attention_heads=num_heads,
        num_key_value_heads=num_heads,
        max_position_embeddings=256,
        bos_token_id=vocab["<|im_start|>"],
        eos_token_id=eos,
        pad_token_id=eos,
        tie_word_embeddings=tie_word_embeddings,
        initializer_range=initializer_range,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = LlamaForCausalLM(config)
    model.generation_config = GenerationConfig(bos_token_id=config.bos_token_id, eos_token_id=eos, pad_token_id=eos)
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path
