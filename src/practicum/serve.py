"""``practicum serve``: an OpenAI-compatible chat-completions server over the in-process engine.

Endpoints: ``GET /v1/models``, ``POST /v1/chat/completions`` (non-streaming and streaming, as
the official ``openai`` client sends and reads them), ``GET /health``. Concurrent requests share
the engine's continuous batch (:class:`~practicum.engines.hf.HFEngine`: requests join the
running decode batch between steps, each with its own sampling settings and seed) and its KV
cache; a streaming client that goes away cancels its request, whose row leaves the batch at the
next step.

**Models and tiers.** A server holds one or more :class:`ServedModel` s, each under its own
name: the full model, and optionally a fast tier of the same weights (``NAME-int8``: dynamic
int8 linear layers, see :class:`~practicum.engines.hf.HFEngine`). A client picks the tier by the
``model`` it asks for; ``practicum compare`` measures what the fast tier costs in capability.

**Tools.** ``tools`` in the API's own format. A chat template that renders tools gets them;
otherwise they go in the system prompt by Practicum's convention (:mod:`practicum.tools`), and
``<tool_call>{...}</tool_call>`` blocks naming a requested tool come back as ``tool_calls``
(``finish_reason: "tool_calls"``). Earlier assistant tool calls and ``tool`` messages are
rendered back in the same convention. While tools are offered, a streamed reply's text and
calls are sent when the reply ends (a half-written call is never streamed as text).

**Extensions**, as vLLM names them: ``return_token_ids: true`` adds ``prompt_token_ids`` to the
response and ``token_ids`` to each choice; with ``logprobs: true`` every sampled token's
log-prob (of the distribution sampled from) - together what makes an episode generated through
the server trainable.

**Limits and errors.** Bound to 127.0.0.1 unless told otherwise; an optional API key (the
``Authorization: Bearer`` header); ``max_tokens`` capped; a prompt longer than the model's
context refused. Every bad request gets a 4xx with the API's error object
(``{"error": {"message", "type", "param", "code"}}``), never a 500.
"""

# no `from __future__ import annotations`: FastAPI reads the route functions' annotations
# (Request, made inside create_app) at definition time
import json
import re
import secrets
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from practicum.engines.base import Completion, SamplingParams
from practicum.records import Message
from practicum.tools import with_tool_prompt

TOOL_CALL = re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL)


class ServeLimits(BaseModel):
    model_config = ConfigDict(extra="forbid")
    max_tokens: int = Field(default=1024, ge=1, description="Most new tokens one request may ask for.")
    default_max_tokens: int = Field(default=256, ge=1, description="New tokens when a request does not say.")
    max_n: int = Field(default=8, ge=1, description="Most choices (n) one request may ask for.")
    max_messages: int = Field(default=256, ge=1, description="Most messages in one request.")


@dataclass
class ServedModel:
    """One name the server answers to: an engine (an HFEngine or anything with its ``submit``,
    ``generate``, ``stream``, ``renderer`` and ``model.config``) and its tier."""

    name: str
    engine: Any
    tier: str = "full"
    created: int = field(default_factory=lambda: int(time.time()))

    @property
    def context(self) -> int:
        config = getattr(getattr(self.engine, "model", None), "config", None)
        return int(getattr(config, "max_position_embeddings", None) or 8192)


class ApiError(Exception):
    def __init__(self, status: int, message: str, param: str | None = None, code: str | None = None,
                 kind: str = "invalid_request_error") -> None:
        super().__init__(message)
        self.status, self.message, self.param, self.code, self.kind = status, message, param, code, kind

    def body(self) -> dict[str, Any]:
        return {"error": {"message": self.message, "type": self.kind, "param": self.param, "code": self.code}}


# --- the request ------------------------------------------------------------------------------
class _Part(BaseModel):
    model_config = ConfigDict(extra="allow")
    type: str
    text: str | None = None


class ChatMessage(BaseModel):
    model_config = ConfigDict(extra="allow")
    role: Literal["system", "developer", "user", "assistant", "tool"]
    content: str | list[_Part] | None = None
    tool_calls: list[dict[str, Any]] | None = None
    tool_call_id: str | None = None
    name: str | None = None


class ChatRequest(BaseModel):
    """The fields of the chat-completions request that the server reads; others are ignored."""

    model_config = ConfigDict(extra="allow")
    model: str
    messages: list[ChatMessage] = Field(min_length=1)
    max_tokens: int | None = Field(default=None, ge=1)
    max_completion_tokens: int | None = Field(default=None, ge=1)
    temperature: float | None = Field(default=None, ge=0, le=2)
    top_p: float | None = Field(default=None, gt=0, le=1)
    n: int = Field(default=1, ge=1)
    stream: bool = False
    stream_options: dict[str, Any] | None = None
    stop: str | list[str] | None = None
    seed: int | None = None
    tools: list[dict[str, Any]] | None = None
    tool_choice: str | dict[str, Any] | None = None
    logprobs: bool = False
    top_logprobs: int | None = Field(default=None, ge=0, le=0)
    return_token_ids: bool = False


def _text(m: ChatMessage, i: int) -> str:
    if m.content is None:
        return ""
    if isinstance(m.content, str):
        return m.content
    out = []
    for part in m.content:
        if part.type != "text" or part.text is None:
            raise ApiError(400, f"messages[{i}]: only text content is supported (got a {part.type!r} part)",
                           f"messages[{i}].content")
        out.append(part.text)
    return "".join(out)


def _tool_schemas(req: ChatRequest) -> list[dict[str, Any]]:
    if not req.tools or req.tool_choice == "none":
        return []
    if req.tool_choice not in (None, "auto"):
        raise ApiError(400, "tool_choice: only 'auto' and 'none' are supported", "tool_choice")
    out = []
    for i, t in enumerate(req.tools):
        fn = t.get("function") if isinstance(t, dict) else None
        if t.get("type") != "function" or not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
            raise ApiError(400, f"tools[{i}]: expected {{'type': 'function', 'function': {{'name': ...}}}}", f"tools[{i}]")
        out.append({"type": "function", "function": {"name": fn["name"], "description": fn.get("description", ""),
                                                     "parameters": fn.get("parameters") or {"type": "object", "properties": {}}}})
    return out


def conversation(req: ChatRequest) -> list[Message]:
    """The request's messages as Practicum messages: ``developer`` as ``system``, assistant tool
    calls in the tool convention (the text the model would have written)."""
    out = []
    for i, m in enumerate(req.messages):
        text = _text(m, i)
        if m.role == "assistant" and m.tool_calls:
            calls = []
            for tc in m.tool_calls:
                fn = tc.get("function") or {}
                args = fn.get("arguments", "{}")
                try:
                    args = json.loads(args) if isinstance(args, str) else args
                except json.JSONDecodeError:
                    pass
                calls.append(f"<tool_call>{json.dumps({'name': fn.get('name'), 'arguments': args})}</tool_call>")
            text = "\n".join([text, *calls]) if text else "\n".join(calls)
        role = "system" if m.role == "developer" else m.role
        out.append(Message(role=role, content=text))
    return out


def split_tool_calls(text: str, names: set[str]) -> tuple[str | None, list[dict[str, Any]]]:
    """The reply's text outside tool calls, and its calls of the offered tools in the API's
    format. A block that is not JSON or names no offered tool stays in the text."""
    calls: list[dict[str, Any]] = []
    kept: list[str] = []
    pos = 0
    for m in TOOL_CALL.finditer(text):
        try:
            obj = json.loads(m.group(1).strip())
        except json.JSONDecodeError:
            continue
        if not isinstance(obj, dict) or obj.get("name") not in names:
            continue
        args = obj.get("arguments", {})
        kept.append(text[pos:m.start()])
        pos = m.end()
        calls.append({"id": f"call_{secrets.token_hex(12)}", "type": "function",
                      "function": {"name": obj["name"], "arguments": json.dumps(args if args is not None else {})}})
    kept.append(text[pos:])
    rest = "".join(kept).strip()
    return (rest or None) if calls else text, calls


# --- the server -------------------------------------------------------------------------------
def create_app(models: list[ServedModel], api_key: str | None = None, limits: ServeLimits | None = None) -> Any:
    """The FastAPI application serving ``models``."""
    from fastapi import FastAPI, Request
    from fastapi.exceptions import RequestValidationError
    from fastapi.responses import JSONResponse, StreamingResponse

    limits = limits or ServeLimits()
    by_name = {m.name: m for m in models}
    app = FastAPI(title="Practicum", docs_url=None, redoc_url=None)
    app.state.requests = 0

    @app.exception_handler(ApiError)
    async def _api_error(_request: Request, e: ApiError) -> JSONResponse:
        return JSONResponse(e.body(), status_code=e.status)

    @app.exception_handler(RequestValidationError)
    async def _invalid(_request: Request, e: RequestValidationError) -> JSONResponse:
        return JSONResponse(_validation_error(e.errors()).body(), status_code=400)

    def check_key(request: Request) -> None:
        if api_key is None:
            return
        got = request.headers.get("authorization", "")
        if not secrets.compare_digest(got.encode(), f"Bearer {api_key}".encode()):
            raise ApiError(401, "invalid or missing API key (Authorization: Bearer ...)", code="invalid_api_key",
                           kind="authentication_error")

    @app.get("/health")
    async def health() -> dict[str, Any]:
        return {"status": "ok", "models": list(by_name)}

    @app.get("/v1/models")
    async def list_models(request: Request) -> dict[str, Any]:
        check_key(request)
        return {"object": "list", "data": [{"id": m.name, "object": "model", "created": m.created,
                                            "owned_by": "practicum", "tier": m.tier} for m in models]}

    @app.post("/v1/chat/completions")
    async def chat(request: Request) -> Any:
        check_key(request)
        try:
            raw = await request.json()
        except (json.JSONDecodeError, UnicodeDecodeError):
            raise ApiError(400, "the request body is not JSON") from None
        if not isinstance(raw, dict):
            raise ApiError(400, "the request body must be a JSON object")
        try:
            req = ChatRequest.model_validate(raw)
        except ValidationError as e:
            raise _validation_error(e.errors()) from None
        served = by_name.get(req.model)
        if served is None:
            raise ApiError(404, f"model {req.model!r} does not exist; models: {', '.join(by_name)}", "model",
                           "model_not_found")
        if len(req.messages) > limits.max_messages:
            raise ApiError(400, f"{len(req.messages)} messages: at most {limits.max_messages}", "messages")
        if req.n > limits.max_n:
            raise ApiError(400, f"n={req.n}: at most {limits.max_n}", "n")
        if req.stream and req.n > 1:
            raise ApiError(400, "stream with n > 1 is not supported", "n")
        wanted = req.max_completion_tokens or req.max_tokens or min(limits.default_max_tokens, limits.max_tokens)
        if wanted > limits.max_tokens:
            raise ApiError(400, f"max_tokens={wanted}: at most {limits.max_tokens}", "max_tokens")
        schemas = _tool_schemas(req)
        messages = conversation(req)
        renderer = served.engine.renderer
        try:
            if schemas and renderer.supports_tools:
                ids = renderer.chat_ids(messages, tools=schemas)
            else:
                ids = renderer.chat_ids(with_tool_prompt(messages, schemas) if schemas else messages)
        except Exception as e:  # a template that refuses the conversation (e.g. roles out of order)
            raise ApiError(400, f"the model's chat template refused the messages: {e}", "messages") from None
        if len(ids) + wanted > served.context:
            raise ApiError(400, f"the prompt ({len(ids)} tokens) and max_tokens ({wanted}) exceed the model's context "
                           f"({served.context})", "messages", "context_length_exceeded")
        stop = (req.stop,) if isinstance(req.stop, str) else tuple(req.stop or ())
        params = SamplingParams(max_new_tokens=wanted, temperature=1.0 if req.temperature is None else req.temperature,
                                top_p=1.0 if req.top_p is None else req.top_p, stop=stop, seed=req.seed)
        app.state.requests += 1
        rid, created = f"chatcmpl-{uuid.uuid4().hex}", int(time.time())
        names = {s["function"]["name"] for s in schemas}
        if req.stream:
            return StreamingResponse(_stream(served, req, ids, params, names, rid, created),
                                     media_type="text/event-stream", headers={"Cache-Control": "no-cache"})
        if req.n == 1:
            completions = [await served.engine.submit(ids, params)]
        else:
            completions = await served.engine.generate([ids] * req.n, params)
        choices = [_choice(i, c, names, req, renderer) for i, c in enumerate(completions)]
        out: dict[str, Any] = {"id": rid, "object": "chat.completion", "created": created, "model": served.name,
                               "choices": choices, "system_fingerprint": f"practicum-{served.tier}",
                               "usage": _usage(len(ids), completions)}
        if req.return_token_ids:
            out["prompt_token_ids"] = ids
        return out

    return app


def _validation_error(errors: Any) -> ApiError:
    first = errors[0] if errors else {}
    loc = ".".join(str(x) for x in first.get("loc", ()) if x != "body")
    return ApiError(400, f"{loc or 'request'}: {first.get('msg', 'invalid')}", loc or None)


def _usage(prompt: int, completions: list[Completion]) -> dict[str, int]:
    gen = sum(_n_tokens(c) for c in completions)
    return {"prompt_tokens": prompt, "completion_tokens": gen, "total_tokens": prompt + gen}


def _n_tokens(c: Completion) -> int:
    return len(c.ids)


def _finish(c: Completion, calls: list[dict[str, Any]]) -> str:
    return "tool_calls" if calls else ("length" if c.finish_reason == "length" else "stop")


def _logprobs(c: Completion, renderer: Any) -> dict[str, Any]:
    content = []
    for t, lp in zip(c.ids, c.logprobs):
        tok = renderer.decode([t])
        content.append({"token": tok, "logprob": lp, "bytes": list(tok.encode()), "top_logprobs": []})
    return {"content": content}


def _choice(i: int, c: Completion, names: set[str], req: ChatRequest, renderer: Any) -> dict[str, Any]:
    text, calls = split_tool_calls(c.text, names) if names else (c.text, [])
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if calls:
        message["tool_calls"] = calls
    out: dict[str, Any] = {"index": i, "message": message, "finish_reason": _finish(c, calls),
                           "logprobs": _logprobs(c, renderer) if req.logprobs else None}
    if req.return_token_ids:
        out["token_ids"] = c.ids
    return out


def _sse(obj: dict[str, Any]) -> str:
    return f"data: {json.dumps(obj)}\n\n"


async def _stream(served: ServedModel, req: ChatRequest, ids: list[int], params: SamplingParams, names: set[str],
                  rid: str, created: int) -> AsyncIterator[str]:
    """The chunks of one streamed reply: the role, the text as it decodes (held back while it
    ends in an incomplete character; all at the end while tools are offered), the finish
    reason, the usage if asked for, then ``[DONE]``."""
    renderer = served.engine.renderer

    def chunk(delta: dict[str, Any], finish: str | None = None, **extra: Any) -> str:
        return _sse({"id": rid, "object": "chat.completion.chunk", "created": created, "model": served.name,
                     "system_fingerprint": f"practicum-{served.tier}",
                     "choices": [{"index": 0, "delta": delta, "finish_reason": finish, **extra}]})

    yield chunk({"role": "assistant", "content": ""})
    out: list[int] = []
    sent = ""
    done: Completion | None = None
    async for item in served.engine.stream(ids, params):
        if isinstance(item, Completion):
            done = item
            break
        out.append(item)
        if names:
            continue
        text = renderer.decode(out)
        if text.endswith("\ufffd") or not text.startswith(sent):
            continue  # an incomplete multi-byte character, or a re-tokenised prefix: wait for more
        if len(text) > len(sent):
            yield chunk({"content": text[len(sent):]})
            sent = text
    assert done is not None
    calls: list[dict[str, Any]] = []
    if names:
        text, calls = split_tool_calls(done.text, names)
        if text:
            yield chunk({"content": text})
        for k, call in enumerate(calls):
            yield chunk({"tool_calls": [{"index": k, **call}]})
    elif done.text.startswith(sent) and len(done.text) > len(sent):
        yield chunk({"content": done.text[len(sent):]})
    extra: dict[str, Any] = {}
    if req.logprobs:
        extra["logprobs"] = _logprobs(done, renderer)
    if req.return_token_ids:
        extra["token_ids"] = done.ids
    yield chunk({}, _finish(done, calls), **extra)
    if (req.stream_options or {}).get("include_usage"):
        yield _sse({"id": rid, "object": "chat.completion.chunk", "created": created, "model": served.name,
                    "choices": [], "usage": _usage(len(ids), [done])})
    yield "data: [DONE]\n\n"


def build_models(path: Any, name: str, dtype: Any, device: str, tiers: list[str], max_batch: int = 64,
                 weights: Any = None) -> list[ServedModel]:
    """The full model under ``name`` and each fast tier under ``name-TIER`` (``int8``: dynamic
    int8 linear layers over the same weights); ``weights`` (a checkpoint's) replace the
    folder's before any tier quantizes them."""
    from practicum.engines.hf import HFEngine

    def engine() -> HFEngine:
        e = HFEngine(path, dtype=dtype, device=device, max_batch=max_batch)
        if weights is not None:
            e.load_weights(weights, 1)
        return e

    models = [ServedModel(name, engine(), "full")]
    for tier in tiers:
        if tier != "int8":
            raise ValueError(f"unknown tier {tier!r}: the fast tier is 'int8' (dynamic int8 linear layers)")
        fast = engine()
        fast.quantize_weights(tier)
        models.append(ServedModel(f"{name}-{tier}", fast, tier))
    return models
