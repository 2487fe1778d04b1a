"""A base for multi-turn tool-use environments.

:class:`ToolEnvironment` shows the task with its tools (through the system-prompt convention of
:mod:`practicum.tools`), parses each reply's tool calls, runs them and returns their results as
``tool`` messages. Unusable calls (malformed, unknown tool, bad arguments) and tools that fail
become observations the model can read and recover from; they are counted in the episode's
``info.tool_calls`` and ``info.tool_errors`` (by kind). A reply with no tool call gets a
reminder, counted as ``no_call``. Calling the ``submit`` tool ends the episode and the subclass's
:meth:`ToolEnvironment.score` runs; so does :meth:`finish` when a rollout limit ends it.

Subclasses provide the tools (``make_tools``), ``score(reason)``, and optionally
``setup``/``teardown``.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from practicum.envs.base import Observation
from practicum.records import Message, Score, Task
from practicum.tools import Tool, ToolCall, ToolError, parse_tool_calls, tool

NO_CALL_HINT = (
    "No tool call found. Call a tool with <tool_call>{\"name\": ..., \"arguments\": {...}}</tool_call>, "
    "or call submit when you are done."
)


class ToolEnvironment:
    domain: str = "tools"
    max_observation_chars = 4000  # a tool result longer than this is cut, and says so

    def __init__(self, domain: str | None = None) -> None:
        if domain:
            self.domain = domain
        self.task: Task | None = None
        self.calls: Counter[str] = Counter()
        self.errors: Counter[str] = Counter()
        self.submitted: str | None = None
        self._tools: dict[str, Tool] = {}

    # --- for subclasses ------------------------------------------------------------------------
    def make_tools(self) -> list[Tool]:
        """The tools of this episode, made at reset (``submit`` is added)."""
        return []

    async def setup(self, task: Task) -> None:
        """Prepare the episode's world (a sandbox session, a workspace...)."""

    async def score(self, reason: str) -> Score:
        """Score the final state. ``reason`` is "submit" or the limit that ended the episode."""
        raise NotImplementedError

    async def teardown(self) -> None:
        """Release what setup acquired. Called exactly once."""

    # --- the Environment protocol -------------------------------------------------------------
    async def reset(self, task: Task) -> Observation:
        self.task = task
        self._tools = {t.name: t for t in [*self.make_tools(), self._submit_tool()]}
        await self.setup(task)
        return Observation(messages=list(task.prompt))

    def tools(self) -> list[Tool]:
        # The rollout presents them: through the chat template where the model's template
        # supports tools, else with the system-prompt convention (practicum.tools).
        return list(self._tools.values())

    async def step(self, reply: str) -> Observation:
        calls, errors = parse_tool_calls(reply, self._tools)
        out: list[str] = []
        for err in errors:
            self.errors[err.kind] += 1
            out.append(f"error ({err.kind}): {err.message}")
        if not calls and not errors:
            self.errors["no_call"] += 1
            out.append(NO_CALL_HINT)
        for call in calls:
            self.calls[call.name] += 1
            if call.name == "submit":
                self.submitted = str(call.arguments.get("answer", ""))
                return await self._done("submit")
            out.append(f"[{call.name}] " + await self._run(call))
        return Observation(messages=[Message(role="tool", content="\n".join(out))], info=self._info())

    async def finish(self, reason: str) -> Observation:
        return await self._done(reason)

    async def close(self) -> None:
        if self.task is not None:
            self.task = None
            await self.teardown()

    # --- internals ------------------------------------------------------------------------------
    async def _run(self, call: ToolCall) -> str:
        try:
            result = await self._tools[call.name](call.arguments)
        except ToolError as e:  # the tool's own, expected failure: the model reads it and goes on
            self.errors["tool_failed"] += 1
            return f"error (tool_failed): {e}"
        if len(result) > self.max_observation_chars:
            cut = len(result) - self.max_observation_chars
            result = result[: self.max_observation_chars] + f"\n[... {cut} more characters cut]"
        return result

    async def _done(self, reason: str) -> Observation:
        score = await self.score(reason)
        return Observation(messages=[], done=True, score=score, info=self._info())

    def _info(self) -> dict[str, Any]:
        return {"tool_calls": dict(self.calls), "tool_errors": dict(self.errors)}

    def _submit_tool(self) -> Tool:
        async def submit(answer: str = "") -> str:
            """Finish the task. Pass a final answer if the task asks for one."""
            return "submitted"

        return tool(submit)
