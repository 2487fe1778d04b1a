"""The sql verifier: run the submitted query and the gold one, compare their result sets.

An answer scores 1 when its result set is the gold one under the rules of
:mod:`practicum.domains.sql.compare`, and 0 otherwise, always with an explanation. For tasks
that ask for one value (``answer: number`` or ``text``) the answer may also be that value.

What scores 0 whatever its result (:data:`~practicum.domains.sql.guard.FLAGS`):

* a write, file or extension access, or anything but one read query (refused unrun);
* ``hardcoded_values``: a result built from constants (a ``VALUES`` list, a ``SELECT`` without
  ``FROM``, no dataset table read), or, for a query that matches, a literal copied from the
  answer: a number (10 or more in size, or not whole) or a string (3 characters or more) that
  is a value of the gold result but appears neither in the question nor in the gold query.
  The second check is a heuristic: it catches ``... WHERE carrier = 'UA'`` picking out a
  looked-up answer only when the literal is long enough, and may rarely flag an honest query.

A query that fails (error, timeout, out of memory, more than ``max_rows`` rows) is a 0 with the
engine's message. Nothing a submitted query does raises out of :meth:`SqlVerifier.verify`; a
broken *gold* query is a task bug and raises :class:`~practicum.errors.TaskError`.
"""

from __future__ import annotations

import asyncio
import math
import re
import threading
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

from practicum.domains.plugin import Verdict
from practicum.domains.sql.compare import Value, close, compare, normalise, normalise_rows
from practicum.domains.sql.execute import Database, EngineName, QueryFailed, open_database
from practicum.domains.sql.guard import Inspection, Refusal, inspect_sql
from practicum.domains.sql.tasks import SqlTask
from practicum.errors import TaskError
from practicum.records import Score

COMPONENTS = ("correct", "executed")
_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_-]*)[ \t]*\n(.*?)(?:```|$)", re.S)
_ANSWER_LINE = re.compile(r"^\s*(?:final\s+)?answer\s*[:=]\s*(.+?)\s*$", re.I | re.M)
# An answer starting with a statement keyword is SQL (run, or refused with its flag), else a value.
_LOOKS_LIKE_SQL = re.compile(r"^\s*(\(\s*)*(select|with|from|values|table|copy|attach|detach|install|load|pragma|set|"
                             r"insert|update|delete|create|drop|alter|call|export|import|use|describe|show|summarize|"
                             r"vacuum|checkpoint|begin)\b", re.I)
_NUMBER_IN_TEXT = re.compile(r"-?\d[\d,]*(?:\.\d+)?|-?\.\d+")


def extract_answer(reply: str) -> str:
    """The answer in a reply: the last fenced code block, else the last ``Answer: ...`` line,
    else the whole reply."""
    blocks = [body for _, body in _FENCE.findall(reply) if body.strip()]
    if blocks:
        return blocks[-1].strip()
    lines = _ANSWER_LINE.findall(reply)
    if lines:
        return lines[-1].strip()
    return reply.strip()


@dataclass(frozen=True)
class Gold:
    inspection: Inspection
    rows: list[tuple[Value, ...]]


class SqlVerifier:
    """Verifies answers against one engine's copies of the datasets (built under ``home`` on
    first use). Gold results are computed once per (dataset, query) and kept (LRU)."""

    def __init__(self, home: Path, engine: EngineName = "duckdb", timeout_s: float = 5.0, max_rows: int = 10_000,
                 memory_limit: str = "1GB", gold_cache: int = 1024) -> None:
        self.home = Path(home)
        self.engine: EngineName = engine
        self.timeout_s = timeout_s
        self.max_rows = max_rows
        self.memory_limit = memory_limit
        self._gold: OrderedDict[tuple[str, str], Gold] = OrderedDict()
        self._gold_size = gold_cache
        self._lock = threading.Lock()

    def database(self, dataset: str) -> Database:
        return open_database(dataset, self.engine, self.home, self.memory_limit)

    def gold_sql(self, task: SqlTask) -> str:
        """The gold query in this engine's dialect (bank queries are DuckDB's)."""
        if self.engine == "duckdb":
            return task.gold_sql
        try:
            tree = sqlglot.parse_one(task.gold_sql, read="duckdb").transform(_sqlite_dates)
            return tree.sql(dialect=self.engine)
        except SqlglotError as e:
            raise TaskError(f"task {task.id}: its gold query cannot be written for {self.engine}: {e}") from None

    def gold(self, task: SqlTask) -> Gold:
        key = (task.dataset, task.gold_sql)
        with self._lock:
            hit = self._gold.get(key)
            if hit is not None:
                self._gold.move_to_end(key)
                return hit
        db = self.database(task.dataset)
        sql = self.gold_sql(task)
        ins = inspect_sql(sql, set(db.tables), db.dialect)
        if isinstance(ins, Refusal):
            raise TaskError(f"task {task.id}: its gold query is refused: {ins.reason}")
        try:
            result = db.run(sql, max(self.timeout_s, 30.0), self.max_rows)
        except QueryFailed as e:
            raise TaskError(f"task {task.id}: its gold query fails on {self.engine}: {e}") from None
        if result.truncated:
            raise TaskError(f"task {task.id}: its gold query returns more than {self.max_rows} rows")
        if task.answer != "rows" and (len(result.columns) != 1 or len(result.rows) != 1):
            raise TaskError(f"task {task.id}: answer '{task.answer}' needs a gold query returning one value, "
                            f"got {len(result.rows)} row(s) x {len(result.columns)} column(s)")
        gold = Gold(ins, normalise_rows(result.rows))
        with self._lock:
            self._gold[key] = gold
            while len(self._gold) > self._gold_size:
                self._gold.popitem(last=False)
        return gold

    async def verify(self, task: SqlTask, answer: str) -> Verdict:
        """Score one answer (a query, or a value where the task asks for one), off the event loop."""
        return await asyncio.to_thread(self.verify_sync, task, answer)

    def verify_sync(self, task: SqlTask, answer: str) -> Verdict:
        gold = self.gold(task)
        text = extract_answer(answer)
        if not text:
            return _verdict(0.0, False, "no answer")
        if task.answer != "rows" and not _LOOKS_LIKE_SQL.match(text):
            return _value_verdict(task, gold, text)
        try:
            return self._query_verdict(task, gold, text)
        except RecursionError:  # a reply nested past what a tree walk of it can follow is the reply's fault
            return _verdict(0.0, False, "refused: the query is nested deeper than it can be read")

    def _query_verdict(self, task: SqlTask, gold: Gold, sql: str) -> Verdict:
        db = self.database(task.dataset)
        ins = inspect_sql(sql, set(db.tables), db.dialect)
        if isinstance(ins, Refusal):
            return _verdict(0.0, False, f"refused: {ins.reason}", [ins.flag] if ins.flag else [])
        if ins.hardcoded:
            return _verdict(0.0, False, f"the result is hard-coded: {ins.hardcoded}", ["hardcoded_values"])
        try:
            result = db.run(sql, self.timeout_s, self.max_rows)
        except QueryFailed as e:
            return _verdict(0.0, False, f"the query failed ({e.kind}): {e}")
        if result.truncated:
            return _verdict(0.0, True, f"the query returns more than {self.max_rows} rows")
        ordered = gold.inspection.ordered if task.ordered is None else task.ordered
        cmp = compare(gold.rows, normalise_rows(result.rows), ordered=ordered,
                      order_keys=gold.inspection.order_keys if ordered else None, rel_tol=task.tolerance)
        if not cmp.match:
            return _verdict(0.0, True, f"wrong result: {cmp.reason}")
        copied = _copied_literals(task, gold, ins)
        if copied:
            return _verdict(0.0, True, f"the query matches, but hard-codes values of the answer ({', '.join(copied)}) "
                                       "that neither the question nor the schema gives", ["hardcoded_values"])
        return _verdict(1.0, True, "the result matches the gold result" + (" in order" if ordered else ""))


_STRFTIME = {exp.Year: "%Y", exp.Month: "%m", exp.Day: "%d", exp.Hour: "%H", exp.DayOfWeekIso: "%u"}


def _sqlite_dates(node: exp.Expr) -> exp.Expr:
    """DuckDB's date-part functions, which sqlglot leaves as functions SQLite lacks, as strftime."""
    for kind, fmt in _STRFTIME.items():
        if isinstance(node, kind):
            return sqlglot.parse_one(f"CAST(strftime('{fmt}', x) AS INTEGER)", read="sqlite").transform(
                lambda n: node.this.copy().transform(_sqlite_dates) if isinstance(n, exp.Column) and n.name == "x" else n)
    if isinstance(node, exp.Quarter):
        return sqlglot.parse_one("(CAST(strftime('%m', x) AS INTEGER) + 2) / 3", read="sqlite").transform(
            lambda n: node.this.copy().transform(_sqlite_dates) if isinstance(n, exp.Column) and n.name == "x" else n)
    if isinstance(node, exp.DateFromParts):
        y, m, d = (node.args[k] for k in ("year", "month", "day"))
        return exp.func("printf", exp.Literal.string("%04d-%02d-%02d"),
                        *(part.copy().transform(_sqlite_dates) for part in (y, m, d)))
    return node


def _verdict(value: float, executed: bool, why: str, flags: list[str] | None = None) -> Verdict:
    flags = flags or []
    components = {"correct": value, "executed": float(executed), **{f"flag:{f}": 1.0 for f in flags}}
    return Verdict(Score(value=value, components=components, explanation=why), flags)


def _value_verdict(task: SqlTask, gold: Gold, text: str) -> Verdict:
    expected = gold.rows[0][0]
    if task.answer == "number":
        numbers = _NUMBER_IN_TEXT.findall(text)
        if len(numbers) != 1:
            return _verdict(0.0, False, f"expected one number, got {text[:80]!r}")
        cleaned = numbers[0].replace(",", "")
        got = normalise(cleaned)
        assert isinstance(got, float)
        if isinstance(expected, float) and close(got, expected, task.tolerance):
            return _verdict(1.0, False, "the number matches")
        return _verdict(0.0, False, f"wrong number: {cleaned}")
    got_text = _plain(text)
    want = _plain(str(expected)) if not isinstance(expected, float) else None
    if want is not None and got_text == want:
        return _verdict(1.0, False, "the answer matches")
    if isinstance(expected, float) and isinstance(normalise(got_text), float) and close(normalise(got_text), expected,
                                                                                      task.tolerance):
        return _verdict(1.0, False, "the answer matches")
    return _verdict(0.0, False, f"wrong answer: {text[:80]!r}")


def _plain(text: str) -> str:
    text = text.strip().strip("`*").strip().strip("\"'").strip()
    return " ".join(text.rstrip(".").split()).casefold()


def _copied_literals(task: SqlTask, gold: Gold, ins: Inspection) -> list[str]:
    question = task.question.casefold()
    question_numbers = [float(n.replace(",", "")) for n in _NUMBER_IN_TEXT.findall(task.question)]
    allowed_numbers = question_numbers + gold.inspection.numbers
    allowed_strings = {s.casefold() for s in gold.inspection.strings}
    values = {v for row in gold.rows for v in row if v is not None}
    gold_numbers = [v for v in values if isinstance(v, float)]
    gold_strings = {v.casefold() for v in values if isinstance(v, str)}
    copied: list[str] = []
    for x in ins.numbers:
        if abs(x) < 10 and x == int(x):
            continue
        if any(math.isclose(x, a, rel_tol=1e-9) for a in allowed_numbers):
            continue
        if any(math.isclose(x, v, rel_tol=1e-9) for v in gold_numbers):
            copied.append(f"{x:g}")
    for s in ins.strings:
        folded = s.strip().casefold()
        if len(folded) >= 3 and folded in gold_strings and folded not in question and folded not in allowed_strings:
            copied.append(repr(s))
    return copied
