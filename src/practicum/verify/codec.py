"""Plain data across the sandbox boundary: a tagged JSON codec with a strict decoder.

The grader never compares an object the solution made. The solution's worker sends its return
values as JSON text; the harness rebuilds them with :func:`decode`, which produces only exact
builtin types — ``None``, ``bool``, ``int``, ``float``, ``complex``, ``str``, ``bytes``,
``list``, ``tuple``, ``dict``, ``set``, ``frozenset`` — so every comparison in the hidden tests
runs on values whose ``__eq__`` is the interpreter's own. A value of any other type cannot be
encoded (:class:`CodecError`); a malformed message cannot be decoded (:class:`CodecError`).

Encoding: JSON null/true/false/numbers/strings/arrays stand for themselves (an array is a
``list``); other types are one-key objects: ``{"$t": [...]}`` tuple, ``{"$s": [...]}`` set,
``{"$fs": [...]}`` frozenset, ``{"$d": [[k, v], ...]}`` dict, ``{"$b": "base64"}`` bytes,
``{"$c": [re, im]}`` complex, ``{"$f": "nan"|"inf"|"-inf"}`` non-finite floats.

This module uses the standard library only: it is copied verbatim into sandboxes, where the
worker and the harness run without Practicum installed.
"""

from __future__ import annotations

import base64
import json
import math

MAX_DEPTH = 100
MAX_NODES = 1_000_000


class CodecError(ValueError):
    """A value that is not plain data, or a message that is not a valid encoding."""


def encode(value, _depth=0):
    """Plain data -> JSON-able structure. Only exact builtin types are accepted."""
    if _depth > MAX_DEPTH:
        raise CodecError("value nested too deeply")
    t = type(value)
    if value is None or t is bool or t is str:
        return value
    if t is int:
        return value
    if t is float:
        if math.isfinite(value):
            return value
        return {"$f": "nan" if value != value else ("inf" if value > 0 else "-inf")}
    if t is list:
        return [encode(v, _depth + 1) for v in value]
    if t is tuple:
        return {"$t": [encode(v, _depth + 1) for v in value]}
    if t is set or t is frozenset:
        return {"$s" if t is set else "$fs": [encode(v, _depth + 1) for v in value]}
    if t is dict:
        return {"$d": [[encode(k, _depth + 1), encode(v, _depth + 1)] for k, v in value.items()]}
    if t is bytes:
        return {"$b": base64.b64encode(value).decode("ascii")}
    if t is complex:
        return {"$c": [encode(value.real, _depth + 1), encode(value.imag, _depth + 1)]}
    raise CodecError(f"a value of type {t.__module__}.{t.__qualname__} is not plain data")


def dumps(value) -> str:
    return json.dumps(encode(value), separators=(",", ":"), allow_nan=False)


def decode(node):
    """JSON-parsed structure -> plain data of exact builtin types, or CodecError."""
    budget = [MAX_NODES]
    try:
        return _decode(node, 0, budget)
    except RecursionError:
        raise CodecError("message nested too deeply") from None


def call_key(attr, args, kwargs) -> str:
    """The memo key of one call: its target and its encoded arguments, as canonical text."""
    return json.dumps([attr, args, kwargs], separators=(",", ":"), sort_keys=True, allow_nan=False)


def loads(text: str):
    try:
        node = json.loads(text, parse_constant=_reject_constant)
    except (ValueError, RecursionError) as e:
        raise CodecError(f"not valid JSON: {e}") from None
    return decode(node)


def _reject_constant(name):
    raise CodecError(f"bare {name} is not allowed (use the $f tag)")


_FLOATS = {"nan": float("nan"), "inf": float("inf"), "-inf": float("-inf")}


def _decode(node, depth, budget):
    budget[0] -= 1
    if budget[0] < 0:
        raise CodecError("message too large")
    if depth > MAX_DEPTH:
        raise CodecError("message nested too deeply")
    t = type(node)
    if node is None or t is bool or t is str or t is int:
        return node
    if t is float:
        if not math.isfinite(node):
            raise CodecError("non-finite float without the $f tag")
        return node
    if t is list:
        return [_decode(v, depth + 1, budget) for v in node]
    if t is not dict or len(node) != 1:
        raise CodecError(f"unexpected {t.__name__} in message")
    ((tag, body),) = node.items()
    if tag == "$f":
        if body not in _FLOATS:
            raise CodecError(f"bad $f value {body!r}")
        return _FLOATS[body]
    if tag == "$b":
        if type(body) is not str:
            raise CodecError("$b needs a string")
        try:
            return base64.b64decode(body, validate=True)
        except ValueError as e:
            raise CodecError(f"bad base64: {e}") from None
    if type(body) is not list:
        raise CodecError(f"{tag} needs an array")
    if tag == "$t":
        return tuple(_decode(v, depth + 1, budget) for v in body)
    if tag in ("$s", "$fs"):
        items = [_decode(v, depth + 1, budget) for v in body]
        try:
            return set(items) if tag == "$s" else frozenset(items)
        except TypeError as e:
            raise CodecError(f"unhashable set element: {e}") from None
    if tag == "$d":
        out = {}
        for pair in body:
            if type(pair) is not list or len(pair) != 2:
                raise CodecError("$d needs [key, value] pairs")
            k = _decode(pair[0], depth + 1, budget)
            try:
                out[k] = _decode(pair[1], depth + 1, budget)
            except TypeError as e:
                raise CodecError(f"unhashable dict key: {e}") from None
        return out
    if tag == "$c":
        if len(body) != 2:
            raise CodecError("$c needs [re, im]")
        re_, im = (_decode(v, depth + 1, budget) for v in body)
        if type(re_) is not float or type(im) is not float:
            raise CodecError("$c parts must be floats")
        return complex(re_, im)
    raise CodecError(f"unknown tag {tag!r}")
