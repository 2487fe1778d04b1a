"""A full multi-turn tool-use episode with the scripted engine: tool errors, recovery, submit,
limits — and the trained tokens are exactly the generated ones."""

from __future__ import annotations

import asyncio

from practicum.engines.base import SamplingParams
from practicum.engines.scripted import ByteRenderer, ScriptedEngine
from practicum.envs.agent import ToolEnvironment
from practicum.records import EpisodeState, Message, Score, Task
from practicum.rollout import run_episodes
from practicum.tools import ToolError, tool


class NotesEnv(ToolEnvironment):
    """Write a note, read it back; the score is whether notes.txt holds the target word."""

    domain = "notes"

    async def setup(self, task: Task) -> None:
        self.files: dict[str, str] = {}
        self.closed = 0

    def make_tools(self):
        @tool
        async def write_file(path: str, text: str) -> str:
            """Write a file."""
            self.files[path] = text
            return f"wrote {len(text)} characters to {path}"

        @tool
        async def read_file(path: str) -> str:
            """Read a file."""
            if path not in self.files:
                raise ToolError(f"no such file: {path}")
            return self.files[path]

        return [write_file, read_file]

    async def score(self, reason: str) -> Score:
        ok = self.files.get("notes.txt") == self.task.target
        return Score(value=float(ok), components={"correct": float(ok)}, explanation=reason)

    async def teardown(self) -> None:
        self.closed += 1


TASK = Task(id="t1", domain="notes", prompt=[Message(role="user", content="put 'seven' in notes.txt")], target="seven")


def call(name: str, **args) -> str:
    import json

    return f"<tool_call>{json.dumps({'name': name, 'arguments': args})}</tool_call>"


def test_episode_with_tool_errors_recovers_and_scores():
    """The model makes a malformed call, calls an unknown tool, passes bad arguments, reads a
    missing file, forgets to call a tool, then writes the file and submits: every error comes
    back as an observation, is counted by kind, and the episode still scores 1."""
    script = [
        '<tool_call>{"name": "write_file", "arguments": {"path": "notes.txt"</tool_call>',
        call("delete_file", path="notes.txt"),
        call("write_file", path="notes.txt"),
        call("read_file", path="notes.txt"),
        "I think I am done.",
        call("write_file", path="notes.txt", text="seven") + call("read_file", path="notes.txt"),
        call("submit"),
    ]
    engine = ScriptedEngine(lambda prompt, i: script[i])
    env = NotesEnv()
    [ep] = asyncio.run(run_episodes([TASK], lambda t: env, engine, SamplingParams(max_new_tokens=500), max_turns=10))
    assert ep.state == EpisodeState.done and ep.reward == 1.0
    assert ep.info.end_reason == "done"
    assert ep.info.tool_errors == {"malformed": 1, "unknown_tool": 1, "bad_arguments": 1, "tool_failed": 1, "no_call": 1}
    assert ep.info.tool_calls == {"read_file": 2, "write_file": 1, "submit": 1}
    tool_msgs = [m.content for m in ep.messages if m.role == "tool"]
    assert "not valid JSON" in tool_msgs[0]
    assert "no tool 'delete_file'" in tool_msgs[1] and "write_file" in tool_msgs[1]
    assert "text" in tool_msgs[2] and "Field required" in tool_msgs[2]
    assert "no such file: notes.txt" in tool_msgs[3]
    assert "No tool call found" in tool_msgs[4]
    assert "[read_file] seven" in tool_msgs[5]
    assert len(ep.turns) == 7 and env.closed == 1
    # the trained sequence holds every generated token, masked in, and the observations masked out
    ids, mask, _ = ep.training_sequence()
    generated = [i for t in ep.turns for i in t.completion_ids]
    assert [i for i, m in zip(ids, mask) if m] == generated
    assert sum(mask) == len(generated) and len(ids) > len(generated)


def test_limits_end_the_episode_cleanly_and_score_the_state():
    """A turn limit, a token limit and a time limit each end the episode with its reason
    recorded; the environment scores the state reached (here: the file was written, so 1)."""
    write = call("write_file", path="notes.txt", text="seven")
    for kwargs, reason in [({"max_turns": 2}, "turn_limit"),
                           ({"max_turns": 10, "max_tokens": 150}, "token_limit"),
                           ({"max_turns": 10, "max_seconds": 0.0}, "time_limit")]:
        engine = ScriptedEngine(lambda prompt, i: write)
        env = NotesEnv()
        [ep] = asyncio.run(run_episodes([TASK], lambda t, env=env: env, engine, SamplingParams(max_new_tokens=500), **kwargs))
        assert ep.info.end_reason == reason, kwargs
        assert [e.kind for e in ep.errors] == [reason]
        assert ep.state == EpisodeState.done and ep.reward == 1.0 and env.closed == 1


class ToolTemplateRenderer(ByteRenderer):
    """A scripted 'chat template' that renders tools itself (it records the tools it was given)."""

    supports_tools = True

    def __init__(self) -> None:
        self.rendered_tools: list = []

    def chat_ids(self, messages, tools=None):
        self.rendered_tools.append([t["function"]["name"] for t in tools or []])
        return super().chat_ids(messages)

    def append_ids(self, messages, new, context_ids=None, tools=None):
        self.rendered_tools.append([t["function"]["name"] for t in tools or []])
        return super().append_ids(messages, new, context_ids)


def test_tools_go_through_the_chat_template_when_it_supports_them():
    """With a tool-capable template the schemas are handed to the engine's renderer (first turn
    and continuations) and the messages stay as the task wrote them; without one, the
    documented convention is added to the system message instead."""
    script = [call("write_file", path="notes.txt", text="seven"), call("submit")]
    renderer = ToolTemplateRenderer()
    native = ScriptedEngine(lambda prompt, i: script[i], renderer=renderer)
    [ep] = asyncio.run(run_episodes([TASK], lambda t: NotesEnv(), native, SamplingParams(max_new_tokens=500), max_turns=4))
    assert ep.reward == 1.0 and ep.info.tools_presented == "chat_template"
    assert renderer.rendered_tools == [["write_file", "read_file", "submit"]] * 2
    assert ep.messages[0].role == "user" and "<tool_call>" not in ep.messages[0].content

    plain = ScriptedEngine(lambda prompt, i: script[i])
    [ep] = asyncio.run(run_episodes([TASK], lambda t: NotesEnv(), plain, SamplingParams(max_new_tokens=500), max_turns=4))
    assert ep.reward == 1.0 and ep.info.tools_presented == "system_prompt"
    assert ep.messages[0].role == "system" and "<tool_call>" in ep.messages[0].content and '"read_file"' in ep.messages[0].content
