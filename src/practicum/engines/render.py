"""Chat rendering with a transformers tokenizer: conversations to the ids an engine samples from.

:class:`ChatRenderer` is the :class:`~practicum.engines.base.Renderer` of any model that has a
transformers tokenizer and chat template. It holds no model, so every engine that serves the
model (in-process, wrapped by a batcher, behind a server) shares one and renders the same ids,
and a test can render without loading weights.

Contract: ``chat_ids`` renders a conversation and the assistant cue; ``append_ids`` returns only
the ids that extend an already-rendered conversation, so earlier ids (the model's own samples
among them) are never re-tokenised; ``stop_ids`` are the tokens that end a turn.

Limits: the template must render conversations append-only (a conversation's text starts with
the text of each of its prefixes); ``append_ids`` raises :class:`ValueError` for one that does
not. Tool schemas reach the template only where it mentions ``tools`` (``supports_tools``);
otherwise the rollout puts them in the system prompt (:mod:`practicum.tools`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, cast

from practicum.records import Message

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase


class ChatRenderer:
    """Renders with ``tokenizer``'s chat template. ``eos_token_ids``: the model's own end-of-turn
    tokens (its generation config's ``eos_token_id``), stopped on besides the tokenizer's
    end-of-sequence token."""

    def __init__(self, tokenizer: PreTrainedTokenizerBase, eos_token_ids: int | Sequence[int] | None = None) -> None:
        self.tokenizer = tokenizer
        ids = [eos_token_ids] if isinstance(eos_token_ids, int) else list(eos_token_ids or [])
        if tokenizer.eos_token_id is not None and tokenizer.eos_token_id not in ids:
            ids.append(tokenizer.eos_token_id)
        self.stop_ids: tuple[int, ...] = tuple(ids)
        self.supports_tools = "tools" in (tokenizer.chat_template or "")  # the template renders tool schemas

    def chat_ids(self, messages: list[Message], tools: list[dict[str, Any]] | None = None) -> list[int]:
        return self._ids(self._text(messages, tools, cue=True))

    def append_ids(self, messages: list[Message], new: list[Message], context_ids: list[int] | None = None,
                   tools: list[dict[str, Any]] | None = None) -> list[int]:
        """Ids that extend a conversation by ``new`` messages and the assistant cue.

        The longer conversation is rendered as text and only the part beyond what the context
        already holds is tokenised. ``context_ids`` (the ids the model actually saw and
        generated) make this exact where the template adds text after a reply's end-of-turn
        token (ChatML's newline after ``<|im_end|>``), and close a reply that was cut off at the
        token limit.
        """
        after = self._text(messages + new, tools, cue=True)
        if context_ids is not None:
            held = cast(str, self.tokenizer.decode(context_ids, skip_special_tokens=False))
            if after.startswith(held):
                return self._ids(after[len(held):])
        before = self._text(messages, tools, cue=False)
        if not after.startswith(before):
            raise ValueError("chat template does not render conversations append-only")
        return self._ids(after[len(before):])

    def text_ids(self, text: str) -> list[int]:
        """The token ids of plain ``text`` (no template, no special tokens): e.g. a forced start
        of a reply, appended after the generation cue."""
        return self._ids(text)

    def decode(self, ids: list[int]) -> str:
        """The text of ``ids``, without special tokens."""
        return cast(str, self.tokenizer.decode(ids, skip_special_tokens=True))  # one sequence in, one text out

    def _text(self, messages: list[Message], tools: list[dict[str, Any]] | None, cue: bool) -> str:
        text = self.tokenizer.apply_chat_template([{"role": m.role, "content": m.content} for m in messages],
                                                  tools=[*tools] if tools else None, tokenize=False, add_generation_prompt=cue)
        return cast(str, text)  # tokenize=False: the rendered text

    def _ids(self, text: str) -> list[int]:
        return list(self.tokenizer(text, add_special_tokens=False).input_ids)
