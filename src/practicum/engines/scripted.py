"""A scripted engine for unit tests: replies come from a function, tokens are bytes.

It implements the whole :class:`~practicum.engines.base.Engine` protocol, so the rollout
loop, the store and the environments run end to end in a test without a model.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping
from typing import Any

import torch

from practicum.engines.base import Completion, SamplingParams
from practicum.records import Message

EOS = 0  # byte 0 ends a turn


def render(messages: list[Message], cue: bool = True) -> str:
    text = "".join(f"<{m.role}>{m.content}\n" for m in messages)
    return text + ("<assistant>" if cue else "")


class ByteRenderer:
    """Renders a conversation as ``<role>content`` lines, one token per byte; byte 0 ends a turn.
    Its template has no tool syntax (``supports_tools`` is false): tools reach the model in the
    system prompt, and ``tools`` arguments are ignored."""

    supports_tools = False
    stop_ids: tuple[int, ...] = (EOS,)

    def chat_ids(self, messages: list[Message], tools: list[dict[str, Any]] | None = None) -> list[int]:
        return list(render(messages).encode())

    def append_ids(self, messages: list[Message], new: list[Message], context_ids: list[int] | None = None,
                   tools: list[dict[str, Any]] | None = None) -> list[int]:
        return list(render(new).encode())

    def text_ids(self, text: str) -> list[int]:
        return list(text.encode())

    def decode(self, ids: list[int]) -> str:
        return bytes(i for i in ids if i != EOS).decode(errors="replace")


class ScriptedEngine:
    """``reply(prompt_text, call_index) -> text``; every token gets log-prob ``logprob``.
    ``renderer`` (default :class:`ByteRenderer`) turns conversations into ids."""

    def __init__(self, reply: Callable[[str, int], str], logprob: float = -1.0,
                 renderer: ByteRenderer | None = None) -> None:
        self.reply = reply
        self.logprob = logprob
        self.renderer = renderer if renderer is not None else ByteRenderer()
        self.policy_version = 0
        self.calls = 0
        self.loaded: list[int] = []

    async def generate(self, prompts: list[list[int]], params: SamplingParams) -> list[Completion]:
        out = []
        for p in prompts:
            text = self.reply(self.renderer.decode(p), self.calls)
            self.calls += 1
            ids = list(text.encode())[: params.max_new_tokens]
            finish = "length" if len(ids) == params.max_new_tokens else "stop"
            if finish == "stop":
                ids.append(EOS)
            out.append(
                Completion(ids, [self.logprob] * len(ids), self.renderer.decode(ids), finish, self.policy_version)  # type: ignore[arg-type]
            )
        return out

    async def submit(self, ids: list[int], params: SamplingParams) -> Completion:
        (completion,) = await self.generate([ids], params)
        return completion

    async def stream(self, ids: list[int], params: SamplingParams) -> AsyncIterator[int | Completion]:
        """The scripted reply token by token, then its Completion (the shape of HFEngine.stream)."""
        completion = await self.submit(ids, params)
        for t in completion.ids:
            yield t
        yield completion

    def load_weights(self, state: Mapping[str, torch.Tensor], version: int) -> None:
        self.policy_version = version
        self.loaded.append(version)

    async def close(self) -> None:
        return None
