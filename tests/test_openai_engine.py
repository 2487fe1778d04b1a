"""The OpenAI-compatible engine against a real local HTTP server (`practicum serve` in a thread,
uvicorn) through the official `openai` client: a multi-turn tool-use episode, a time-out, a
retry, the rate limit, failures as recorded episode failures, and evaluation through the server
scoring the same as the in-process engine (greedy)."""

from __future__ import annotations

import asyncio
import json
import time

import pytest
from test_agent_env import TASK, NotesEnv, call
from test_serve import serving

from practicum.engines.base import SamplingParams
from practicum.engines.openai_api import EndpointConfig, MessageRenderer, OpenAIEngine, reply_text
from practicum.engines.scripted import ScriptedEngine
from practicum.errors import EngineFailure
from practicum.records import EpisodeState, Message
from practicum.rollout import run_episode
from practicum.serve import ApiError, ServedModel


def endpoint(base: str, **kw) -> EndpointConfig:
    return EndpointConfig(base_url=base, model="scripted", api_key_env=None, **kw)


class Flaky(ScriptedEngine):
    """A served engine whose first ``fail`` requests answer 503, or that sleeps ``delay`` s."""

    def __init__(self, reply, fail: int = 0, delay: float = 0.0) -> None:
        super().__init__(reply)
        self.fail, self.delay, self.seen = fail, delay, 0

    async def submit(self, ids, params):
        self.seen += 1
        if self.seen <= self.fail:
            raise ApiError(503, "overloaded, try again", kind="server_error")
        if self.delay:
            await asyncio.sleep(self.delay)
        return await super().submit(ids, params)


def test_handles_round_trip_a_conversation_with_tools_and_tool_results():
    r = MessageRenderer()
    tools = [{"type": "function", "function": {"name": "read_file", "parameters": {}}}]
    ids = r.chat_ids([Message(role="system", content="s"), Message(role="user", content="u")], tools=tools)
    calls = [{"id": "c1", "type": "function", "function": {"name": "read_file", "arguments": '{"path": "a"}'}},
             {"id": "c2", "type": "function", "function": {"name": "read_file", "arguments": '{"path": "b"}'}}]
    ids += r.reply_ids("looking", calls)
    ids += r.append_ids([], [Message(role="tool", content="a: 1, b: 2")])
    messages, got_tools = r.request(ids)
    assert got_tools == tools
    assert messages == [{"role": "system", "content": "s"}, {"role": "user", "content": "u"},
                        {"role": "assistant", "content": "looking", "tool_calls": calls},
                        {"role": "tool", "tool_call_id": "c1", "content": "a: 1, b: 2"},
                        {"role": "tool", "tool_call_id": "c2", "content": "(reported above)"}]
    assert r.decode(r.reply_ids("looking", calls)) == reply_text("looking", calls)
    assert '<tool_call>{"name": "read_file", "arguments": {"path": "a"}}</tool_call>' in reply_text("x", calls)
    with pytest.raises(EngineFailure, match="forced start"):
        r.request(ids + r.text_ids("<answer>"))


def test_a_multi_turn_tool_episode_through_the_server():
    """The environment's tools go to the server in the API's tools field; the model's calls come
    back as tool_calls and reach the environment; its observations go back as tool results. The
    episode is scored as with an in-process model, and token usage is recorded."""
    def reply(prompt: str, n: int) -> str:
        assert "write_file" in prompt  # the tools reached the model (the server's tool convention)
        return [call("write_file", path="notes.txt", text="seven"), call("submit", answer="done")][n]

    async def go():
        with serving([ServedModel("scripted", ScriptedEngine(reply))]) as base:
            engine = OpenAIEngine(endpoint(base))
            try:
                ep = await run_episode(TASK, NotesEnv(), engine, SamplingParams(max_new_tokens=512), max_turns=4)
            finally:
                await engine.close()
            return ep, engine

    ep, engine = asyncio.run(go())
    assert ep.state == EpisodeState.ready and ep.reward == 1.0 and len(ep.turns) == 2
    assert ep.info.tool_calls == {"write_file": 1, "submit": 1}
    assert engine.usage.requests == 2 and engine.usage.prompt_tokens > 0 and engine.usage.completion_tokens > 0
    assert ep.turns[0].gen_seconds > 0


def test_a_refused_request_is_retried_with_backoff():
    served = Flaky(lambda _p, _c: "fine", fail=2)

    async def go():
        with serving([ServedModel("scripted", served)]) as base:
            engine = OpenAIEngine(endpoint(base, backoff=0.05, max_retries=3))
            t0 = time.perf_counter()
            (c,) = await engine.generate([engine.renderer.chat_ids([Message(role="user", content="hi")])],
                                         SamplingParams(max_new_tokens=8))
            await engine.close()
            return c, engine, time.perf_counter() - t0

    c, engine, seconds = asyncio.run(go())
    assert c.text == "fine" and c.extra["attempts"] == 3.0 and engine.usage.retries == 2
    assert served.seen == 3 and seconds >= 0.05 * (0.5 + 1.0)  # two backoffs: >= half of 0.05 and of 0.1


def test_a_request_past_its_timeout_fails_the_turn_after_its_retries():
    """The server answers after 3 s; with a 0.5 s time-out and one retry the turn fails with an
    EngineFailure, which the rollout records on the episode (an infrastructure failure, never a
    crash of the run)."""
    served = Flaky(lambda _p, _c: "late", delay=3.0)

    async def go():
        with serving([ServedModel("scripted", served)]) as base:
            engine = OpenAIEngine(endpoint(base, timeout=0.5, max_retries=1, backoff=0.05))
            ep = await run_episode(TASK, NotesEnv(), engine, SamplingParams(max_new_tokens=8), max_turns=2)
            await engine.close()
            return ep, engine

    t0 = time.perf_counter()
    ep, engine = asyncio.run(go())
    assert ep.state == EpisodeState.failed and ep.errors[-1].kind == "engine"
    assert "APITimeoutError after 2 attempt(s)" in ep.errors[-1].message
    assert engine.usage.retries == 1 and engine.usage.failures == 1 and served.seen == 2
    assert not ep.trainable  # an infrastructure failure is kept out of the loss
    assert time.perf_counter() - t0 < 10


def test_a_bad_request_fails_at_once_without_retries():
    async def go():
        with serving([ServedModel("scripted", ScriptedEngine(lambda _p, _c: "x"))]) as base:
            engine = OpenAIEngine(EndpointConfig(base_url=base, model="no-such-model", api_key_env=None))
            with pytest.raises(EngineFailure, match="HTTP 404"):
                await engine.submit(engine.renderer.chat_ids([Message(role="user", content="hi")]), SamplingParams())
            assert engine.usage.retries == 0
            await engine.close()

    asyncio.run(go())


def test_the_rate_limit_spaces_request_starts():
    starts: list[float] = []

    def reply(_p: str, _c: int) -> str:
        starts.append(time.perf_counter())
        return "ok"

    async def go():
        with serving([ServedModel("scripted", ScriptedEngine(reply))]) as base:
            engine = OpenAIEngine(endpoint(base, requests_per_minute=600))  # one every 0.1 s
            prompt = engine.renderer.chat_ids([Message(role="user", content="hi")])
            await engine.generate([prompt] * 5, SamplingParams(max_new_tokens=4))
            await engine.close()

    asyncio.run(go())
    assert len(starts) == 5 and starts[-1] - starts[0] >= 0.35


def test_a_run_refuses_to_train_on_an_api_engine(tiny_run_config):
    from practicum.config import load_config
    from practicum.errors import ConfigError
    from practicum.loop import Run

    cfg = load_config(tiny_run_config.path, [f"run.dir={tiny_run_config.path.parent / 'api'}"])
    engine = OpenAIEngine(EndpointConfig(base_url="http://127.0.0.1:9/v1", model="m", api_key_env=None))
    with pytest.raises(ConfigError, match="evaluation-only"):
        Run(cfg, engine=engine)
    asyncio.run(engine.close())


def test_evaluation_through_the_server_scores_as_the_in_process_engine(tiny_model_path, tmp_path):
    """Greedy held-out evaluation of the same (tiny) model, in process and through `practicum
    serve` with the OpenAI engine: the same score on every task."""
    import torch

    from practicum.config import DomainSection
    from practicum.domains import build_domain
    from practicum.evaluation import evaluate
    from practicum.serve import build_models

    section = DomainSection.model_validate({"name": "arith", "env": "math", "eval_size": 12,
                                            "source": {"kind": "reasoning_gym", "dataset": "chain_sum"}})
    domains = [build_domain(section, 0, tmp_path)]
    (served,) = build_models(tiny_model_path, "tiny", torch.float32, "cpu", [])

    tasks = domains[0].source.eval_tasks()
    greedy = SamplingParams(max_new_tokens=16, temperature=0.0)

    async def go():
        local = await evaluate(served.engine, domains, 16, 1)
        local_texts = [(await served.engine.submit(served.engine.renderer.chat_ids(t.prompt), greedy)).text for t in tasks]
        with serving([served]) as base:
            engine = OpenAIEngine(EndpointConfig(base_url=base, model="tiny", api_key_env=None))
            remote = await evaluate(engine, domains, 16, 1)
            remote_texts = [(await engine.submit(engine.renderer.chat_ids(t.prompt), greedy)).text for t in tasks]
            await engine.close()
        return local, remote, local_texts, remote_texts

    local, remote, local_texts, remote_texts = asyncio.run(go())
    assert local_texts == remote_texts and any(local_texts)  # the same greedy replies, token for token
    lt = {r.task: r.reward for r in local.per_task}
    rt = {r.task: r.reward for r in remote.per_task}
    assert lt.keys() == rt.keys() and len(lt) == 12
    assert lt == rt
    assert json.dumps(local.per_domain, sort_keys=True) == json.dumps(remote.per_domain, sort_keys=True)


def test_practicum_eval_with_an_endpoint_in_the_config(tiny_model_path, tmp_path):
    """`practicum eval` on a config whose model.endpoint is a served model: every held-out task
    is answered through the endpoint (its usage in the JSON); training on it is refused."""
    import torch
    import yaml
    from typer.testing import CliRunner

    from practicum.cli import app
    from practicum.serve import build_models

    (served,) = build_models(tiny_model_path, "tiny", torch.float32, "cpu", [])
    with serving([served]) as base:
        cfg = {"run": {"dir": str(tmp_path / "run")}, "model": {"endpoint": {"base_url": base, "model": "tiny",
                                                                               "api_key_env": None}},
               "domains": [{"name": "arith", "env": "math", "eval_size": 5,
                            "source": {"kind": "reasoning_gym", "dataset": "chain_sum"}}],
               "eval": {"max_new_tokens": 8}}
        path = tmp_path / "endpoint.yaml"
        path.write_text(yaml.safe_dump(cfg))
        r = CliRunner().invoke(app, ["eval", str(path), "--json"])
        assert r.exit_code == 0, r.output
        out = json.loads(r.output)
        assert out["usage"]["requests"] == 5 and out["usage"]["failures"] == 0
        assert out["domains"]["arith"]["tasks"] == 5 and out["domains"]["arith"]["errors"] == 0
        r = CliRunner().invoke(app, ["train", str(path)])
        assert r.exit_code != 0 and "cannot be trained" in r.output


def test_one_failing_request_fails_only_its_own_episode_in_an_evaluation(tiny_model_path, tmp_path):
    """Evaluation sends a turn's requests together; when one of them times out (the served engine
    hangs on one prompt), that episode is recorded as failed with an engine error and the others
    are scored - the evaluation never crashes."""
    from practicum.config import DomainSection
    from practicum.domains import build_domain
    from practicum.evaluation import evaluate

    section = DomainSection.model_validate({"name": "arith", "env": "math", "eval_size": 4,
                                            "source": {"kind": "reasoning_gym", "dataset": "chain_sum"}})
    domains = [build_domain(section, 0, tmp_path)]
    hang_on = domains[0].source.eval_tasks()[1].prompt[-1].content

    class HangsOnOne(ScriptedEngine):
        async def submit(self, ids, params):
            if hang_on in self.renderer.decode(ids):
                await asyncio.sleep(5)
            return await super().submit(ids, params)

    async def go():
        with serving([ServedModel("scripted", HangsOnOne(lambda _p, _c: "<answer>1</answer>"))]) as base:
            engine = OpenAIEngine(endpoint(base, timeout=0.5, max_retries=0))
            res = await evaluate(engine, domains, 16, 1)
            await engine.close()
        return res

    res = asyncio.run(go())
    ends = [r.end for r in res.per_task]
    assert ends.count("failed") == 1 and len(ends) == 4
    (failed,) = [r for r in res.per_task if r.end == "failed"]
    assert failed.errors == ["engine"] and res.tallies["arith"].errors == 1
