"""Tools: typed callables the model may invoke, described by JSON schema.

A :class:`Tool` wraps an async function; its JSON schema is derived from the function's type
hints with pydantic, and arguments are validated against it before the call. Tools reach the
model in one of two ways:

* through the model's chat template, when the template accepts ``tools`` (the OpenAI-style
  schemas from :meth:`Tool.schema`), or
* through the **system-prompt convention** below, for templates that don't (SmolLM2's does not):

  .. code-block:: text

      You can use tools. To call one, write exactly
      <tool_call>{"name": "TOOL_NAME", "arguments": {...}}</tool_call>
      and stop; the result comes back in the next message.

Calls are parsed from the model's text (:func:`parse_tool_calls`: the tagged JSON format, one or
more per reply) or taken from an OpenAI-style ``tool_calls`` list (:func:`from_openai`). A
malformed call, an unknown tool or arguments that fail validation become a
:class:`ToolCallError` whose message is shown to the model as the observation, so it can
recover; environments count them on the episode (``Episode.info.tool_errors``).
"""

from __future__ import annotations

import inspect
import json
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Literal, get_type_hints

from pydantic import BaseModel, ConfigDict, ValidationError, create_model

TOOL_CALL = re.compile(r"<tool_call>(.*?)</tool_call>", re.DOTALL)
UNCLOSED = re.compile(r"<tool_call>(?!.*</tool_call>)", re.DOTALL)

ErrorKind = Literal["malformed", "unknown_tool", "bad_arguments", "tool_failed"]


class ToolError(Exception):
    """Raised by a tool for a failure the model should see and can react to (a missing file, a
    command that cannot run). Any other exception from a tool is a bug and propagates."""


@dataclass(frozen=True)
class ToolCall:
    name: str
    arguments: dict[str, Any]
    raw: str = ""


@dataclass(frozen=True)
class ToolCallError:
    kind: ErrorKind
    message: str  # shown to the model
    raw: str = ""


@dataclass
class Tool:
    """A callable tool. ``fn`` is async and returns the observation text."""

    name: str
    description: str
    fn: Callable[..., Awaitable[str]]
    args_model: type[BaseModel] = field(repr=False, default=BaseModel)

    @classmethod
    def from_function(cls, fn: Callable[..., Awaitable[str]], name: str | None = None,
                      description: str | None = None) -> Tool:
        """Build a tool from an async function with type hints; its docstring is the description."""
        hints = get_type_hints(fn)
        fields: dict[str, Any] = {}
        for pname, param in inspect.signature(fn).parameters.items():
            if pname == "self":
                continue
            default = ... if param.default is inspect.Parameter.empty else param.default
            fields[pname] = (hints.get(pname, Any), default)
        model = create_model(f"{name or fn.__name__}_args", __config__=ConfigDict(extra="forbid"), **fields)  # type: ignore[call-overload]
        doc = description or inspect.getdoc(fn) or ""
        return cls(name=name or fn.__name__, description=doc.strip(), fn=fn, args_model=model)

    def parameters(self) -> dict[str, Any]:
        schema = self.args_model.model_json_schema()
        schema.pop("title", None)
        for prop in schema.get("properties", {}).values():
            prop.pop("title", None)
        schema["additionalProperties"] = False
        return schema

    def schema(self) -> dict[str, Any]:
        """OpenAI-style function schema."""
        return {"type": "function",
                "function": {"name": self.name, "description": self.description, "parameters": self.parameters()}}

    async def __call__(self, arguments: dict[str, Any]) -> str:
        args = self.args_model.model_validate(arguments)
        return await self.fn(**args.model_dump())


def tool(fn: Callable[..., Awaitable[str]] | None = None, *, name: str | None = None,
         description: str | None = None) -> Any:
    """Decorator form of :meth:`Tool.from_function`."""
    def wrap(f: Callable[..., Awaitable[str]]) -> Tool:
        return Tool.from_function(f, name=name, description=description)

    return wrap(fn) if fn is not None else wrap


def system_prompt_for(tools: list[Tool] | list[dict[str, Any]]) -> str:
    """The documented convention for templates without tool support (tools or their schemas)."""
    lines = [
        "You can use tools. To call one, write exactly",
        '<tool_call>{"name": "TOOL_NAME", "arguments": {...}}</tool_call>',
        "and stop; the result comes back in the next message. Tools:",
    ]
    for t in tools:
        fn = t.schema()["function"] if isinstance(t, Tool) else t["function"]
        lines.append(json.dumps({"name": fn["name"], "description": fn["description"], "parameters": fn["parameters"]}))
    return "\n".join(lines)


def with_tool_prompt(messages: list[Any], schemas: list[dict[str, Any]]) -> list[Any]:
    """``messages`` with the convention appended to the system message (one is added if none)."""
    from practicum.records import Message

    convention = system_prompt_for(schemas)
    if messages and messages[0].role == "system":
        return [Message(role="system", content=messages[0].content + "\n\n" + convention), *messages[1:]]
    return [Message(role="system", content=convention), *messages]


def parse_tool_calls(text: str, tools: dict[str, Tool]) -> tuple[list[ToolCall], list[ToolCallError]]:
    """Tool calls in a reply, in order, and the errors of the ones that cannot be used."""
    calls: list[ToolCall] = []
    errors: list[ToolCallError] = []
    for m in TOOL_CALL.finditer(text):
        raw = m.group(1).strip()
        call, err = _one(raw, tools)
        if err is not None:
            errors.append(err)
        elif call is not None:
            calls.append(call)
    if UNCLOSED.search(text):
        errors.append(ToolCallError("malformed", "a <tool_call> was opened but never closed with </tool_call>", text[-200:]))
    return calls, errors


def from_openai(tool_calls: list[dict[str, Any]], tools: dict[str, Tool]) -> tuple[list[ToolCall], list[ToolCallError]]:
    """Calls from an OpenAI-style message (``[{"function": {"name", "arguments": "<json>"}}]``)."""
    calls, errors = [], []
    for tc in tool_calls:
        fn = tc.get("function", {})
        raw = json.dumps({"name": fn.get("name"), "arguments": _loads_or_raw(fn.get("arguments", "{}"))})
        call, err = _one(raw, tools)
        if err is not None:
            errors.append(err)
        elif call is not None:
            calls.append(call)
    return calls, errors


def _loads_or_raw(s: Any) -> Any:
    if not isinstance(s, str):
        return s
    try:
        return json.loads(s)
    except (ValueError, RecursionError):  # not JSON, an integer past 4,300 digits, nested too deep
        return s


def _one(raw: str, tools: dict[str, Tool]) -> tuple[ToolCall | None, ToolCallError | None]:
    try:
        obj = json.loads(raw)
    except json.JSONDecodeError as e:
        return None, ToolCallError("malformed", f"the tool call is not valid JSON ({e.msg} at column {e.colno})", raw)
    except (ValueError, RecursionError) as e:  # an integer past 4,300 digits; nesting past the parser's depth
        why = "nested deeper than the parser goes" if isinstance(e, RecursionError) else str(e)
        return None, ToolCallError("malformed", f"the tool call is not valid JSON ({why})", raw)
    if not isinstance(obj, dict) or not isinstance(obj.get("name"), str):
        return None, ToolCallError("malformed", 'a tool call must be {"name": "...", "arguments": {...}}', raw)
    name = obj["name"]
    if name not in tools:
        known = ", ".join(sorted(tools)) or "none"
        return None, ToolCallError("unknown_tool", f"there is no tool {name!r}; tools: {known}", raw)
    args = obj.get("arguments", {})
    if not isinstance(args, dict):
        return None, ToolCallError("bad_arguments", f"{name}: arguments must be a JSON object", raw)
    try:
        tools[name].args_model.model_validate(args)
    except ValidationError as e:
        problems = "; ".join(f"{'.'.join(map(str, err['loc'])) or 'arguments'}: {err['msg']}" for err in e.errors())
        return None, ToolCallError("bad_arguments", f"{name}: {problems}", raw)
    return ToolCall(name, args, raw), None
