"""Any OpenAI-compatible chat-completions endpoint as an engine: for evaluation and off-policy data.

vLLM's server, ``transformers serve``, ``practicum serve`` or a hosted API with a key: the
:class:`OpenAIEngine` runs Practicum's rollouts, environments and verifiers against it unchanged.

**How a token-id rollout talks to a message API.** The rollout renders conversations into ids
and extends them turn by turn (:class:`~practicum.engines.base.Renderer`). The
:class:`MessageRenderer` hands out *handles*: each id stands for one message, the tool
schemas, the assistant cue or one reply, and the engine turns a prompt's handles back into the
API's messages. So an episode's record is the same as with an in-process model - messages,
turns, replies, tool calls - but its "token ids" are handles, not the model's tokens, and its
log-probs are unknown: an API engine's episodes are **evaluation-only** (``trainable`` is
false and :class:`~practicum.loop.Run` refuses to train on it). A server that returns token
ids and log-probs (vLLM's ``return_token_ids``, ``practicum serve``) is the route to trainable
episodes through the in-process renderer; that is not this engine.

**Tools** go in the API's own ``tools`` field; a reply's ``tool_calls`` are handed to the
environment in Practicum's text convention (``<tool_call>{"name": ..., "arguments": ...}
</tool_call>``, which :func:`~practicum.tools.parse_tool_calls` reads), and sent back to the
server as structured ``tool_calls`` with the environment's observation as the ``tool`` result
(one message per call id: the first carries the observation, which reports every call; an
observation after a reply without calls goes as a ``user`` message).

**Failures.** Time-outs, connection errors, 429 and 5xx are retried with exponential backoff
and jitter (a ``Retry-After`` header is honoured), up to ``max_retries``; then, and at once for
any other 4xx, the turn fails with :class:`~practicum.errors.EngineFailure`, which the
orchestrator's retry policy and the audit handle like any infrastructure failure. Requests are
limited client-side to ``max_concurrency`` at once and ``requests_per_minute``. Token usage,
attempts and latency are recorded per completion (``Completion.extra``) and summed in
:attr:`OpenAIEngine.usage`.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import torch
from pydantic import BaseModel, ConfigDict, Field

from practicum.engines.base import Completion, SamplingParams
from practicum.errors import EngineFailure
from practicum.records import Message

CUE = 1  # the assistant cue: generate here
STOP = 2  # ends a reply


class EndpointConfig(BaseModel):
    """An OpenAI-compatible endpoint (``model.endpoint`` in a run config)."""

    model_config = ConfigDict(extra="forbid")
    base_url: str = Field(..., description="The API's base URL, e.g. http://127.0.0.1:8000/v1 or https://api.openai.com/v1.")
    model: str = Field(..., description="The model name to ask the endpoint for.")
    api_key_env: str | None = Field("OPENAI_API_KEY", description="Environment variable holding the API key (None: no key).")
    timeout: float = Field(60.0, gt=0, description="Seconds one request may take before it is retried.")
    max_retries: int = Field(4, ge=0, description="Retries of a timed-out, refused (429) or failed (5xx, connection) request.")
    backoff: float = Field(1.0, gt=0, description="First retry delay in seconds; doubles each retry, with jitter.")
    backoff_max: float = Field(30.0, gt=0, description="Longest retry delay in seconds.")
    max_concurrency: int = Field(16, ge=1, description="Most requests in flight at once.")
    requests_per_minute: float | None = Field(None, gt=0, description="Client-side rate limit (None: none).")
    extra_body: dict[str, Any] = Field(default_factory=dict, description="Extra request fields the endpoint understands.")


@dataclass
class _Item:
    kind: str  # "msg" | "tools" | "reply" | "text"
    message: Message | None = None
    tools: list[dict[str, Any]] | None = None
    content: str = ""
    tool_calls: list[dict[str, Any]] = field(default_factory=list)


class MessageRenderer:
    """Conversations as handles (see the module): each id is one message, the tool schemas, the
    assistant cue or one reply. Handles live as long as the renderer."""

    supports_tools = True  # schemas go to the API's own tools field
    stop_ids: tuple[int, ...] = (STOP,)

    def __init__(self) -> None:
        self._items: dict[int, _Item] = {}
        self._next = 16

    def _handle(self, item: _Item) -> int:
        h = self._next
        self._next += 1
        self._items[h] = item
        return h

    def chat_ids(self, messages: list[Message], tools: list[dict[str, Any]] | None = None) -> list[int]:
        ids = [self._handle(_Item("tools", tools=list(tools)))] if tools else []
        return ids + [self._handle(_Item("msg", message=m)) for m in messages] + [CUE]

    def append_ids(self, messages: list[Message], new: list[Message], context_ids: list[int] | None = None,
                   tools: list[dict[str, Any]] | None = None) -> list[int]:
        return [self._handle(_Item("msg", message=m)) for m in new] + [CUE]

    def text_ids(self, text: str) -> list[int]:
        return [self._handle(_Item("text", content=text))]

    def reply_ids(self, content: str, tool_calls: list[dict[str, Any]]) -> list[int]:
        return [self._handle(_Item("reply", content=content, tool_calls=tool_calls)), STOP]

    def decode(self, ids: list[int]) -> str:
        out = []
        for i in ids:
            item = self._items.get(i)
            if item is not None and item.kind in ("reply", "text"):
                out.append(reply_text(item.content, item.tool_calls) if item.kind == "reply" else item.content)
        return "".join(out)

    def request(self, ids: list[int]) -> tuple[list[dict[str, Any]], list[dict[str, Any]] | None]:
        """The API's ``messages`` and ``tools`` of a prompt made of handles, which must end at a cue."""
        if not ids or ids[-1] != CUE:
            raise EngineFailure("an API engine generates only after the assistant cue (a forced start of the reply "
                                "cannot be sent to a chat-completions endpoint)")
        messages: list[dict[str, Any]] = []
        tools: list[dict[str, Any]] | None = None
        pending: list[str] = []  # tool call ids of the last assistant reply, not yet answered
        for i in ids:
            if i in (CUE, STOP):
                continue
            item = self._items.get(i)
            if item is None:
                raise EngineFailure(f"unknown handle {i}: the prompt was not rendered by this engine's renderer")
            if item.kind == "tools":
                tools = item.tools
            elif item.kind == "reply":
                msg: dict[str, Any] = {"role": "assistant", "content": item.content or None}
                if item.tool_calls:
                    msg["tool_calls"] = item.tool_calls
                messages.append(msg)
                pending = [tc["id"] for tc in item.tool_calls]
            elif item.kind == "text":
                raise EngineFailure("an API engine cannot continue a forced start of a reply")
            else:
                m = item.message
                assert m is not None
                if m.role == "tool" and pending:
                    messages.append({"role": "tool", "tool_call_id": pending[0], "content": m.content})
                    messages.extend({"role": "tool", "tool_call_id": p, "content": "(reported above)"} for p in pending[1:])
                    pending = []
                elif m.role == "tool":
                    messages.append({"role": "user", "content": m.content})
                else:
                    messages.append({"role": m.role, "content": m.content})
        return messages, tools


def reply_text(content: str | None, tool_calls: list[dict[str, Any]]) -> str:
    """A reply as the environment reads it: its text, then each call in the tool convention."""
    parts = [content] if content else []
    for tc in tool_calls:
        fn = tc.get("function") or {}
        args: Any = fn.get("arguments", "{}")
        try:
            args = json.loads(args) if isinstance(args, str) else args
        except json.JSONDecodeError:
            pass  # the environment reports it as malformed
        parts.append("<tool_call>" + json.dumps({"name": fn.get("name"), "arguments": args}) + "</tool_call>")
    return "\n".join(parts)


@dataclass
class Usage:
    requests: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    retries: int = 0
    failures: int = 0
    seconds: float = 0.0


class _RateLimiter:
    """At most ``per_minute`` request starts in any sliding minute."""

    def __init__(self, per_minute: float | None) -> None:
        self.interval = None if per_minute is None else 60.0 / per_minute
        self._next = 0.0
        self._lock = asyncio.Lock()

    async def wait(self) -> None:
        if self.interval is None:
            return
        async with self._lock:
            now = time.monotonic()
            delay = self._next - now
            self._next = max(now, self._next) + self.interval
        if delay > 0:
            await asyncio.sleep(delay)


class OpenAIEngine:
    """An OpenAI-compatible chat-completions endpoint as an (evaluation-only) engine."""

    trainable = False
    continuous = False

    def __init__(self, cfg: EndpointConfig, client: Any = None) -> None:
        import openai

        self.cfg = cfg
        self.renderer = MessageRenderer()
        self.policy_version = 0
        key = os.environ.get(cfg.api_key_env) if cfg.api_key_env else None
        self.client = client or openai.AsyncOpenAI(base_url=cfg.base_url, api_key=key or "none", max_retries=0,
                                                   timeout=cfg.timeout)
        self._sem = asyncio.Semaphore(cfg.max_concurrency)
        self._limiter = _RateLimiter(cfg.requests_per_minute)
        self.usage = Usage()

    async def generate(self, prompts: list[list[int]], params: SamplingParams) -> list[Completion]:
        return list(await asyncio.gather(*(self.submit(p, params) for p in prompts)))

    async def submit(self, ids: list[int], params: SamplingParams) -> Completion:
        import openai

        messages, tools = self.renderer.request(ids)
        kw: dict[str, Any] = {"model": self.cfg.model, "messages": messages, "max_tokens": params.max_new_tokens,
                              "temperature": params.temperature, "top_p": params.top_p}
        if params.stop:
            kw["stop"] = list(params.stop)[:4]
        if params.seed is not None:
            kw["seed"] = params.seed
        if tools:
            kw["tools"] = tools
        if self.cfg.extra_body:
            kw["extra_body"] = dict(self.cfg.extra_body)
        t0 = time.perf_counter()
        attempt = 0
        while True:
            attempt += 1
            try:
                async with self._sem:
                    await self._limiter.wait()
                    r = await self.client.chat.completions.create(**kw, timeout=self.cfg.timeout)
                break
            except (openai.APITimeoutError, openai.APIConnectionError, openai.RateLimitError,
                    openai.InternalServerError) as e:
                if attempt > self.cfg.max_retries:
                    self.usage.failures += 1
                    raise EngineFailure(f"{self.cfg.base_url}: {type(e).__name__} after {attempt} attempt(s): {e}") from e
                self.usage.retries += 1
                await asyncio.sleep(self._delay(attempt, e))
            except openai.APIStatusError as e:  # any other 4xx: the request itself is wrong; retrying will not help
                self.usage.failures += 1
                raise EngineFailure(f"{self.cfg.base_url}: HTTP {e.status_code}: {e.message}") from e
        seconds = time.perf_counter() - t0
        choice = r.choices[0]
        content = choice.message.content or ""
        calls = [tc.model_dump(exclude_none=True) for tc in (choice.message.tool_calls or [])]
        prompt_tokens = r.usage.prompt_tokens if r.usage else 0
        completion_tokens = r.usage.completion_tokens if r.usage else 0
        self.usage.requests += 1
        self.usage.prompt_tokens += prompt_tokens
        self.usage.completion_tokens += completion_tokens
        self.usage.seconds += seconds
        ids_out = self.renderer.reply_ids(content, calls)
        return Completion(ids=ids_out, logprobs=[0.0] * len(ids_out), text=reply_text(content, calls),
                          finish_reason="length" if choice.finish_reason == "length" else "stop",
                          policy_version=self.policy_version, seconds=seconds,
                          extra={"prompt_tokens": float(prompt_tokens), "completion_tokens": float(completion_tokens),
                                 "attempts": float(attempt)})

    def cache_payload(self, c: Completion) -> dict[str, Any]:
        """A completion as the response cache keeps it: its reply, not its handles (which mean
        something only in this process)."""
        item = self.renderer._items[c.ids[0]]
        return {"content": item.content, "tool_calls": item.tool_calls, "finish_reason": c.finish_reason,
                "seconds": c.seconds, "extra": c.extra}

    def from_cache(self, d: dict[str, Any]) -> Completion:
        ids = self.renderer.reply_ids(d["content"], d["tool_calls"])
        return Completion(ids=ids, logprobs=[0.0] * len(ids), text=reply_text(d["content"], d["tool_calls"]),
                          finish_reason=d["finish_reason"], policy_version=self.policy_version, seconds=0.0,
                          extra={**d["extra"], "cached": 1.0})

    def _delay(self, attempt: int, error: Exception) -> float:
        response = getattr(error, "response", None)
        after = response.headers.get("retry-after") if response is not None else None
        if after is not None:
            try:
                return min(float(after), self.cfg.backoff_max)
            except ValueError:
                pass
        base = min(self.cfg.backoff * 2 ** (attempt - 1), self.cfg.backoff_max)
        return base * (0.5 + random.random() / 2)

    def load_weights(self, state: Mapping[str, torch.Tensor], version: int) -> None:
        raise EngineFailure("an API engine's weights live on its server: it cannot be trained in place")

    async def close(self) -> None:
        await self.client.close()
