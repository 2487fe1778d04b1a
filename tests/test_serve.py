"""`practicum serve` through the official `openai` client against a real HTTP server (uvicorn in
a thread): plain and streamed replies, a tool call, concurrent requests sharing the engine's
continuous batch, the API key, the fast tier, and clear 4xx errors for bad requests.

The tool-call tests script the model's reply (ScriptedEngine at the engine seam: a random tiny
model never writes a tool call); everything between the client and the engine is the real
server. The rest run a real model: the tiny random one, and the embedded one (slow)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import threading
import time
from collections.abc import Iterator

import httpx
import openai
import pytest
import uvicorn

from practicum.engines.base import SamplingParams
from practicum.engines.scripted import ScriptedEngine
from practicum.serve import ServedModel, ServeLimits, create_app, split_tool_calls

WEATHER = {"type": "function", "function": {"name": "get_weather", "description": "Weather in a city.",
                                            "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                                                           "required": ["city"]}}}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def serving(models: list[ServedModel], **kw) -> Iterator[str]:
    """A real uvicorn server on a free local port, in a thread; yields its base URL."""
    port = _free_port()
    server = uvicorn.Server(uvicorn.Config(create_app(models, **kw), host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.time() + 30
    while not server.started:
        if time.time() > deadline or not thread.is_alive():
            raise RuntimeError("the server did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        server.should_exit = True
        thread.join(timeout=30)


def client(base: str, key: str = "none", **kw) -> openai.OpenAI:
    return openai.OpenAI(base_url=base, api_key=key, max_retries=0, timeout=120, **kw)


# --- the tool-call convention --------------------------------------------------------------------
def test_split_tool_calls_takes_only_well_formed_calls_of_offered_tools():
    text, calls = split_tool_calls('Let me look.\n<tool_call>{"name": "get_weather", "arguments": {"city": "Oslo"}}'
                                   '</tool_call>', {"get_weather"})
    assert text == "Let me look." and len(calls) == 1
    assert calls[0]["type"] == "function" and calls[0]["id"].startswith("call_")
    assert calls[0]["function"] == {"name": "get_weather", "arguments": '{"city": "Oslo"}'}
    for reply in ('<tool_call>{"name": "rm_rf", "arguments": {}}</tool_call>',  # not offered
                  "<tool_call>{not json}</tool_call>", "no call at all"):
        assert split_tool_calls(reply, {"get_weather"}) == (reply, [])


# --- scripted model: tool calls, errors, the key -----------------------------------------------------
def scripted(reply) -> ServedModel:
    return ServedModel("scripted", ScriptedEngine(reply))


def test_a_tool_call_round_trip_through_the_openai_client():
    """The offered tool reaches the prompt; the model's tagged call comes back as tool_calls with
    finish_reason tool_calls; the tool's result, sent back as a tool message, reaches the model
    and its final answer is plain text."""
    seen: list[str] = []

    def reply(prompt: str, call: int) -> str:
        seen.append(prompt)
        return ('<tool_call>{"name": "get_weather", "arguments": {"city": "Oslo"}}</tool_call>' if call == 0
                else "It is 3 degrees in Oslo.")

    with serving([scripted(reply)]) as base:
        c = client(base)
        msgs = [{"role": "user", "content": "Weather in Oslo?"}]
        r = c.chat.completions.create(model="scripted", messages=msgs, tools=[WEATHER])
        choice = r.choices[0]
        assert choice.finish_reason == "tool_calls" and choice.message.content is None
        (tc,) = choice.message.tool_calls
        assert tc.function.name == "get_weather" and json.loads(tc.function.arguments) == {"city": "Oslo"}
        assert "get_weather" in seen[0] and "<tool_call>" in seen[0]  # the convention in the system prompt
        msgs += [choice.message.model_dump(exclude_none=True),
                 {"role": "tool", "tool_call_id": tc.id, "content": "3 degrees, cloudy"}]
        r2 = c.chat.completions.create(model="scripted", messages=msgs, tools=[WEATHER])
        assert r2.choices[0].finish_reason == "stop" and r2.choices[0].message.content == "It is 3 degrees in Oslo."
        assert "3 degrees, cloudy" in seen[1] and '"city": "Oslo"' in seen[1]  # the call and its result rendered back


def test_a_streamed_tool_call_arrives_as_tool_call_deltas():
    call = '<tool_call>{"name": "get_weather", "arguments": {"city": "Lima"}}</tool_call>'
    with serving([scripted(lambda _p, _c: call)]) as base:
        chunks = list(client(base).chat.completions.create(
            model="scripted", messages=[{"role": "user", "content": "Lima?"}], tools=[WEATHER], stream=True))
    deltas = [tc for ch in chunks for c in ch.choices for tc in (c.delta.tool_calls or [])]
    assert len(deltas) == 1 and deltas[0].function.name == "get_weather"
    assert json.loads(deltas[0].function.arguments) == {"city": "Lima"}
    assert not any(c.delta.content for ch in chunks for c in ch.choices)  # no raw tags streamed as text
    assert chunks[-1].choices[0].finish_reason == "tool_calls"


def test_bad_requests_get_clear_4xx_errors_in_the_apis_shape():
    with serving([scripted(lambda _p, _c: "ok")], limits=ServeLimits(max_tokens=64)) as base:
        c = client(base)
        user = [{"role": "user", "content": "hi"}]
        with pytest.raises(openai.NotFoundError, match="does not exist"):
            c.chat.completions.create(model="nope", messages=user)
        with pytest.raises(openai.BadRequestError, match="at most 64"):
            c.chat.completions.create(model="scripted", messages=user, max_tokens=65)
        with pytest.raises(openai.BadRequestError, match="temperature"):
            c.chat.completions.create(model="scripted", messages=user, temperature=3)
        with pytest.raises(openai.BadRequestError, match="messages"):
            c.chat.completions.create(model="scripted", messages=[])
        with pytest.raises(openai.BadRequestError, match="only text content"):
            c.chat.completions.create(model="scripted", messages=[{"role": "user", "content": [
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}}]}])
        with pytest.raises(openai.BadRequestError, match="tool_choice"):
            c.chat.completions.create(model="scripted", messages=user, tools=[WEATHER], tool_choice="required")
        for body in (b"{not json", b"[1, 2]", b'{"model": "scripted"}'):
            r = httpx.post(f"{base}/chat/completions", content=body, headers={"content-type": "application/json"})
            assert r.status_code == 400 and set(r.json()["error"]) == {"message", "type", "param", "code"}


def test_the_api_key_is_required_when_set():
    with serving([scripted(lambda _p, _c: "ok")], api_key="s3cret") as base:
        with pytest.raises(openai.AuthenticationError):
            client(base, key="wrong").models.list()
        assert [m.id for m in client(base, key="s3cret").models.list()] == ["scripted"]


# --- a real model ---------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def tiny_models(tiny_model_path):
    import torch

    from practicum.serve import build_models

    return build_models(tiny_model_path, "tiny", torch.float32, "cpu", ["int8"])


def test_plain_streamed_and_concurrent_requests_on_a_real_model(tiny_models):
    """Greedy replies are the same plain and streamed (the stream's pieces join to the whole);
    16 concurrent requests all come back, through one continuous batch (fewer decode steps than
    16 requests one at a time would take); the fast tier answers under its own name."""
    full = tiny_models[0].engine
    with serving(tiny_models) as base:
        c = client(base)
        assert {m.id for m in c.models.list()} == {"tiny", "tiny-int8"}
        msgs = [{"role": "user", "content": "hello world"}]
        r = c.chat.completions.create(model="tiny", messages=msgs, max_tokens=12, temperature=0,
                                      extra_body={"return_token_ids": True}, logprobs=True)
        whole = r.choices[0].message.content
        assert r.usage.completion_tokens == len(r.choices[0].model_extra["token_ids"]) > 0
        assert len(r.choices[0].logprobs.content) == r.usage.completion_tokens
        assert r.usage.prompt_tokens == len(r.model_extra["prompt_token_ids"])
        stream = c.chat.completions.create(model="tiny", messages=msgs, max_tokens=12, temperature=0, stream=True,
                                           stream_options={"include_usage": True})
        chunks = list(stream)
        assert "".join(ch.choices[0].delta.content or "" for ch in chunks if ch.choices) == whole
        assert chunks[-1].usage.completion_tokens == r.usage.completion_tokens

        async def many() -> list:
            ac = openai.AsyncOpenAI(base_url=base, api_key="none", max_retries=0, timeout=120)
            return await asyncio.gather(*(ac.chat.completions.create(
                model="tiny", messages=[{"role": "user", "content": f"hello {i}"}], max_tokens=16, temperature=1.0,
                seed=i) for i in range(16)))

        steps = full.steps
        replies = asyncio.run(many())
        assert len(replies) == 16 and all(x.choices[0].finish_reason in ("stop", "length") for x in replies)
        tokens = sum(x.usage.completion_tokens for x in replies)
        assert full.steps - steps < tokens  # rows decoded together, not one request after another
        fast = c.chat.completions.create(model="tiny-int8", messages=msgs, max_tokens=8, temperature=0)
        assert fast.model == "tiny-int8" and fast.choices[0].finish_reason in ("stop", "length")


def test_a_client_that_leaves_a_stream_cancels_its_request(tiny_models):
    """A streamed request whose client disconnects stops decoding: its row leaves the batch
    instead of running to max_tokens for nobody."""
    full = tiny_models[0].engine
    with serving(tiny_models) as base:
        steps = full.steps
        with httpx.stream("POST", f"{base}/chat/completions", timeout=60, json={
                "model": "tiny", "messages": [{"role": "user", "content": "hello"}], "max_tokens": 1000,
                "temperature": 1.0, "stream": True, "stop": ["@@never@@"]}) as r:
            for line in r.iter_lines():
                if line.startswith("data:") and '"content"' in line and '"content": ""' not in line:
                    break  # the first piece of text: leave
        time.sleep(1.0)
        moved = full.steps - steps
        time.sleep(1.0)
        assert full.steps - steps == moved  # nothing decodes any more
        assert moved < 1000


@pytest.mark.slow
def test_the_embedded_model_answers_through_the_server():
    """The embedded SmolLM2-135M-Instruct served for real: greedy reply plain and streamed agree,
    and match the in-process engine on the same prompt."""
    import torch

    from practicum.models import resolve_model
    from practicum.serve import build_models

    models = build_models(resolve_model("smollm2-135m-instruct"), "smollm2-135m-instruct", torch.float32, "cpu", [])
    engine = models[0].engine
    msgs = [{"role": "user", "content": "What is 2 + 3? Answer with the number."}]
    from practicum.records import Message

    ids = engine.renderer.chat_ids([Message(**m) for m in msgs])
    direct = asyncio.run(engine.submit(ids, SamplingParams(max_new_tokens=24, temperature=0))).text
    with serving(models) as base:
        c = client(base)
        r = c.chat.completions.create(model="smollm2-135m-instruct", messages=msgs, max_tokens=24, temperature=0)
        streamed = "".join(ch.choices[0].delta.content or "" for ch in c.chat.completions.create(
            model="smollm2-135m-instruct", messages=msgs, max_tokens=24, temperature=0, stream=True) if ch.choices)
    assert r.choices[0].message.content == direct == streamed
    assert "5" in direct
