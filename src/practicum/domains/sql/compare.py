"""Comparing a submitted result set with the gold one.

Rules (docs/sql.md):

* **Values** are normalised before comparing: integers, floats, decimals and numeric strings
  are numbers; dates, timestamps and times are ISO text (a timestamp at midnight is its date,
  so ``2009-01-01`` matches ``2009-01-01 00:00:00``); intervals are seconds; booleans are 0/1;
  NULL matches NULL only. Numbers match within a relative tolerance (the task's, default
  1e-6) or an absolute 1e-9.
* **Columns** may come in any order and under any names, but there must be exactly as many as
  the gold result has: each gold column is matched to a distinct submitted column.
* **Rows** form a multiset (duplicates count), unless the gold query orders its result. Then
  the order counts, by the gold's ORDER BY keys: rows that tie on those keys may come in any
  order among themselves (when a key is not an output column, every row's position counts).

:func:`compare` returns a :class:`Comparison`: whether the sets match, and if not, a sentence
the model (or a person reading the episode) can act on.
"""

from __future__ import annotations

import datetime as dt
import decimal
import math
import re
import uuid
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import groupby
from typing import Any

Value = float | str | None  # a normalised value: a number, text, or NULL

ABS_TOL = 1e-9
_NUMBER = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?")
_MIDNIGHT = re.compile(r"^(\d{4}-\d{2}-\d{2})[ T]00:00:00(\.0+)?$")
_ISO_T = re.compile(r"^(\d{4}-\d{2}-\d{2})T(\d{2}:\d{2}:\d{2}(\.\d+)?)$")


def normalise(v: Any) -> Value:
    if v is None:
        return None
    if isinstance(v, bool):
        return float(v)
    if isinstance(v, int | float | decimal.Decimal):
        f = float(v)
        return "NaN" if math.isnan(f) else f
    if isinstance(v, dt.datetime):
        if v.tzinfo is not None:
            v = v.astimezone(dt.UTC).replace(tzinfo=None)
        return v.date().isoformat() if v.time() == dt.time(0) else v.isoformat(sep=" ")
    if isinstance(v, dt.date | dt.time):
        return v.isoformat()
    if isinstance(v, dt.timedelta):
        return v.total_seconds()
    if isinstance(v, str):
        s = v.strip()
        if _NUMBER.fullmatch(s):
            return float(s)
        m = _MIDNIGHT.match(s)
        if m:
            return m.group(1)
        m = _ISO_T.match(s)
        return f"{m.group(1)} {m.group(2)}" if m else s
    if isinstance(v, bytes):
        return v.hex()
    if isinstance(v, uuid.UUID):
        return str(v)
    if isinstance(v, list | tuple):
        return repr([normalise(x) for x in v])
    if isinstance(v, dict):
        return repr({k: normalise(x) for k, x in v.items()})
    return str(v)


def normalise_rows(rows: Sequence[Sequence[Any]]) -> list[tuple[Value, ...]]:
    return [tuple(normalise(v) for v in row) for row in rows]


def close(a: Value, b: Value, rel_tol: float) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return math.isclose(a, b, rel_tol=rel_tol, abs_tol=ABS_TOL)
    return a == b


@dataclass(frozen=True)
class Comparison:
    match: bool
    reason: str = ""  # why not, for the explanation


def compare(gold: list[tuple[Value, ...]], got: list[tuple[Value, ...]], *, ordered: bool,
            order_keys: list[int] | None, rel_tol: float) -> Comparison:
    """Whether ``got`` (normalised rows) is the gold result, by the module's rules."""
    width = len(gold[0]) if gold else None
    got_width = len(got[0]) if got else None
    if width is not None and got_width is not None and width != got_width:
        return Comparison(False, f"the result has {got_width} column(s); the question asks for {width}")
    if len(got) != len(gold):
        return Comparison(False, f"the result has {len(got)} row(s); expected {len(gold)}")
    if not gold:
        return Comparison(True)
    assert width is not None
    candidates = [[i for i in range(width) if _same_column([r[j] for r in gold], [r[i] for r in got], rel_tol)]
                  for j in range(width)]
    if any(not c for c in candidates):
        missing = sum(1 for c in candidates if not c)
        return Comparison(False, f"{missing} of the {width} expected column(s) have no matching column in the "
                                 f"result (wrong values, rows, units or rounding)")
    for perm in _assignments(candidates):
        aligned = [tuple(r[i] for i in perm) for r in got]
        if _rows_match(gold, aligned, ordered, order_keys, rel_tol):
            return Comparison(True)
    if ordered and any(_rows_match(gold, [tuple(r[i] for i in p) for r in got], False, None, rel_tol)
                       for p in _assignments(candidates)):
        return Comparison(False, "the right rows, in the wrong order")
    return Comparison(False, "each column holds the right values, but the rows pair them up wrongly")


def _sort_key(v: Value) -> tuple[int, Any]:
    if v is None:
        return (0, 0)
    if isinstance(v, float):
        return (1, float(f"{v:.6g}"))  # rounded, so values within tolerance sort alike
    return (2, v)


def _same_column(gold: list[Value], got: list[Value], rel_tol: float) -> bool:
    a, b = sorted(gold, key=_sort_key), sorted(got, key=_sort_key)
    return all(close(x, y, rel_tol) for x, y in zip(a, b))


def _assignments(candidates: list[list[int]], limit: int = 5000):
    """Distinct submitted-column indices, one per gold column (backtracking, bounded)."""
    count = 0

    def walk(j: int, used: tuple[int, ...]):
        nonlocal count
        if j == len(candidates):
            count += 1
            yield used
            return
        for i in candidates[j]:
            if i not in used and count < limit:
                yield from walk(j + 1, (*used, i))

    yield from walk(0, ())


def _exact_part(row: tuple[Value, ...]) -> tuple[Value, ...]:
    return tuple(None if isinstance(v, float) else v for v in row)


def _multiset_match(gold: list[tuple[Value, ...]], got: list[tuple[Value, ...]], rel_tol: float) -> bool:
    # Rows are bucketed by their non-numeric values, which must match exactly; within a bucket
    # the numbers are compared in sorted order, within tolerance.
    if Counter(map(_exact_part, gold)) != Counter(map(_exact_part, got)):
        return False
    buckets: defaultdict[tuple[Value, ...], list[list[tuple[Value, ...]]]] = defaultdict(lambda: [[], []])
    for r in gold:
        buckets[_exact_part(r)][0].append(r)
    for r in got:
        buckets[_exact_part(r)][1].append(r)
    for a, b in buckets.values():
        key = lambda r: tuple(_sort_key(v) for v in r)  # noqa: E731
        for x, y in zip(sorted(a, key=key), sorted(b, key=key)):
            if not all(close(u, v, rel_tol) for u, v in zip(x, y)):
                return False
    return True


def _rows_match(gold: list[tuple[Value, ...]], got: list[tuple[Value, ...]], ordered: bool,
                order_keys: list[int] | None, rel_tol: float) -> bool:
    if not ordered:
        return _multiset_match(gold, got, rel_tol)
    if order_keys is None:
        return all(all(close(u, v, rel_tol) for u, v in zip(x, y)) for x, y in zip(gold, got))
    # Runs of gold rows that tie on the ORDER BY keys: the same positions in the submission must
    # hold the same multiset of rows.
    start = 0
    for _, run in groupby(gold, key=lambda r: tuple(_sort_key(r[k]) for k in order_keys)):
        n = len(list(run))
        if not _multiset_match(gold[start:start + n], got[start:start + n], rel_tol):
            return False
        start += n
    return True
