"""Tools: schemas from type hints, parsing of tagged and OpenAI-style calls, and errors that a
model can read and recover from."""

from __future__ import annotations

import asyncio

from practicum.tools import Tool, from_openai, parse_tool_calls, system_prompt_for, tool


@tool
async def add(a: int, b: int = 0) -> str:
    """Add two integers."""
    return str(a + b)


async def _echo(text: str) -> str:
    return text


TOOLS = {"add": add, "echo": Tool.from_function(_echo, name="echo", description="Say it back.")}


def test_schema_is_derived_from_type_hints():
    """The JSON schema names each parameter with its type, marks the ones without default as
    required, forbids extra arguments and carries the docstring."""
    s = add.schema()
    assert s["function"]["name"] == "add"
    assert s["function"]["description"] == "Add two integers."
    params = s["function"]["parameters"]
    assert params["properties"]["a"]["type"] == "integer"
    assert params["required"] == ["a"]
    assert params["additionalProperties"] is False


def test_tagged_calls_are_parsed_in_order_and_run():
    """Several calls in one reply come back in order, and calling a tool validates arguments."""
    text = 'first <tool_call>{"name": "add", "arguments": {"a": 2, "b": 3}}</tool_call> then ' \
           '<tool_call>{"name": "echo", "arguments": {"text": "hi"}}</tool_call>'
    calls, errors = parse_tool_calls(text, TOOLS)
    assert errors == []
    assert [c.name for c in calls] == ["add", "echo"]
    assert asyncio.run(TOOLS["add"](calls[0].arguments)) == "5"
    assert asyncio.run(TOOLS["echo"](calls[1].arguments)) == "hi"


def test_bad_calls_become_readable_errors():
    """Malformed JSON, an unknown tool, wrong argument types, extra arguments and an unclosed tag
    each give one error of the right kind with a message naming the problem."""
    cases = {
        '<tool_call>{"name": "add", "arguments": {"a": 1,}}</tool_call>': "malformed",
        '<tool_call>{"name": "mul", "arguments": {}}</tool_call>': "unknown_tool",
        '<tool_call>{"name": "add", "arguments": {"a": "two"}}</tool_call>': "bad_arguments",
        '<tool_call>{"name": "add", "arguments": {"a": 1, "c": 2}}</tool_call>': "bad_arguments",
        '<tool_call>{"name": "add", "arguments": [1, 2]}</tool_call>': "bad_arguments",
        '<tool_call>["add"]</tool_call>': "malformed",
        '<tool_call>{"name": "add", "arguments": {"a": 1}}': "malformed",
        '<tool_call>' + "[" * 5000 + "]" * 5000 + '</tool_call>': "malformed",  # past json's recursion limit
        '<tool_call>{"name": "add", "arguments": {"a": ' + "9" * 5000 + '}}</tool_call>': "malformed",  # 5,000 digits
    }
    for text, kind in cases.items():
        calls, errors = parse_tool_calls(text, TOOLS)
        assert calls == [] and len(errors) == 1, text
        assert errors[0].kind == kind, (text, errors[0])
    _, errors = parse_tool_calls('<tool_call>{"name": "mul", "arguments": {}}</tool_call>', TOOLS)
    assert "mul" in errors[0].message and "add" in errors[0].message  # says what exists


def test_openai_style_calls():
    """OpenAI tool_calls (arguments as a JSON string) map to the same calls and errors."""
    calls, errors = from_openai(
        [{"function": {"name": "add", "arguments": '{"a": 4}'}},
         {"function": {"name": "add", "arguments": "{not json"}}], TOOLS)
    assert [c.arguments for c in calls] == [{"a": 4}]
    assert [e.kind for e in errors] == ["bad_arguments"]


def test_system_prompt_convention_lists_every_tool():
    """The fallback convention names the tag format and every tool's schema."""
    text = system_prompt_for(list(TOOLS.values()))
    assert "<tool_call>" in text and '"add"' in text and '"echo"' in text
