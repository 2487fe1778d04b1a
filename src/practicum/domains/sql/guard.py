"""What a submitted query is, read with sqlglot before anything runs it.

:func:`inspect_sql` parses one statement and refuses what must never run or never score:

* anything but a single read query (``SELECT``, set operations, ``WITH``): writes (``INSERT``,
  ``CREATE [TEMP] TABLE``, ``UPDATE``...), ``COPY``, ``ATTACH``, ``INSTALL``/``LOAD``,
  ``PRAGMA``, ``SET``, transactions;
* tables that are not the dataset's own (a file path as a table name, another catalog) and
  table or scalar functions that touch files, extensions or the engine's settings
  (``read_csv``, ``glob``, ``query``, ``*_scan``, ``pragma_*``, ``duckdb_*``...).

It also reports what the verifier needs: whether the query orders its result and by which
output columns (:attr:`Inspection.order_keys`), the tables it reads, its literals, and whether it
builds its result from constants (``VALUES`` lists, ``SELECT`` without ``FROM``, no dataset
table at all): the ``hardcoded_values`` pattern.

This is the first of two walls. The second is the connection itself
(:mod:`practicum.domains.sql.execute`): read-only, external access disabled, configuration
locked, a timeout and a row cap. A query that slips past this reader still cannot write, read
a file or load an extension.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import sqlglot
from sqlglot import exp
from sqlglot.errors import SqlglotError

# Flags the verifier may report; each is a reason for a score of 0.
FLAGS: dict[str, str] = {
    "hardcoded_values": "builds its result from constants (VALUES, SELECT without FROM, no dataset table, "
                        "or literals copied from the answer) instead of computing it from the data",
    "file_access": "touches files, other databases or the engine's settings (read_csv, COPY, ATTACH, glob, "
                   "pragma...)",
    "extension": "installs or loads an extension",
    "write": "writes (INSERT, UPDATE, DELETE, CREATE, DROP, ALTER...)",
}

TABLE_FUNCTIONS = {"range", "generate_series", "unnest"}  # the only ones allowed in FROM
_DENY_FUNCTIONS = {"query", "query_table", "glob", "getenv", "load_extension", "readfile", "writefile", "edit",
                   "sniff_csv", "current_setting", "which_secret", "sql_auto_complete", "test_all_types",
                   "fts_main", "json_execute_serialized_sql", "parquet_metadata", "parquet_schema",
                   "parquet_file_metadata", "parquet_kv_metadata"}
_DENY_PREFIXES = ("read_", "pragma_", "duckdb_", "sqlite_", "iceberg_", "delta_", "postgres_", "mysql_", "json_serialize_sql")
_WRITES = (exp.Insert, exp.Update, exp.Delete, exp.Create, exp.Drop, exp.Alter, exp.Merge, exp.TruncateTable,
           exp.Transaction, exp.Commit, exp.Rollback)
_FILES = (exp.Copy, exp.Attach, exp.Detach, exp.Pragma, exp.Set, exp.Use, exp.Describe, exp.Show, exp.Summarize)


@dataclass
class Inspection:
    """A query that may run. ``order_keys``: for an ordered query, the output column indices of
    its ORDER BY keys, or None where a key is not an output column (then the order of every row
    counts)."""

    tree: exp.Expr
    ordered: bool
    order_keys: list[int] | None
    tables: set[str]  # dataset tables read (lower case)
    hardcoded: str = ""  # why the result looks built from constants ("" if it does not)
    numbers: list[float] = field(default_factory=list)
    strings: list[str] = field(default_factory=list)


@dataclass
class Refusal:
    """A query that must not run: ``flag`` is one of :data:`FLAGS` (or "" for a plain error)."""

    reason: str
    flag: str = ""


def inspect_sql(sql: str, tables: set[str], dialect: str = "duckdb") -> Inspection | Refusal:
    """Read one statement against the dataset's tables (names compared case-insensitively)."""
    try:
        statements = [s for s in sqlglot.parse(sql, read=dialect) if s is not None]
    except SqlglotError as e:
        return Refusal(f"the SQL does not parse: {_first_line(str(e))}")
    except RecursionError:
        return Refusal("the SQL does not parse: it is nested deeper than the parser goes")
    if not statements:
        return Refusal("no SQL statement found")
    if len(statements) > 1:
        return Refusal(f"{len(statements)} statements: submit exactly one query")
    tree: exp.Expr = statements[0]
    bad = _refuse_statement(tree)
    if bad is not None:
        return bad
    known = {t.lower() for t in tables}
    ctes = {c.alias_or_name.lower() for c in tree.find_all(exp.CTE)}
    read: set[str] = set()
    for node in tree.walk():
        if isinstance(node, _WRITES):
            return Refusal(f"a {node.key.upper()} inside the query: only reads are allowed", "write")
        if isinstance(node, exp.Table):
            refusal = _table(node, known, ctes, read)
            if refusal is not None:
                return refusal
        elif isinstance(node, exp.Func):
            name = _func_name(node)
            if _denied(name):
                return Refusal(f"function {name}() is not allowed: queries may only read the dataset's tables",
                               "file_access")
    ordered, keys = _order(tree)
    numbers, strings = _literals(tree)
    return Inspection(tree, ordered, keys, read, _hardcoded(tree, read), numbers, strings)


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else text


def _refuse_statement(tree: exp.Expr) -> Refusal | None:
    if isinstance(tree, exp.Query):
        return None
    if isinstance(tree, exp.Install) or (isinstance(tree, exp.Command) and str(tree.this).upper() in ("LOAD", "INSTALL")):
        return Refusal("installing or loading extensions is not allowed", "extension")
    if isinstance(tree, _WRITES):
        return Refusal(f"{tree.key.upper()} is a write: only read queries are allowed", "write")
    if isinstance(tree, _FILES) or isinstance(tree, exp.Command):
        name = str(tree.this).upper() if isinstance(tree, exp.Command) else tree.key.upper()
        return Refusal(f"{name} is not allowed: only read queries over the dataset's tables", "file_access")
    return Refusal(f"not a query ({tree.key.upper()}): submit one SELECT (WITH ... SELECT) statement")


def _func_name(node: exp.Func) -> str:
    if isinstance(node, exp.Anonymous):
        return str(node.this).lower()
    return node.sql_name().lower()


def _denied(name: str) -> bool:
    return name in _DENY_FUNCTIONS or name.startswith(_DENY_PREFIXES) or name.endswith("_scan") or name in (
        "readcsv", "readparquet")


def _table(node: exp.Table, known: set[str], ctes: set[str], read: set[str]) -> Refusal | None:
    target = node.this
    if isinstance(target, exp.Func):  # a table function: range(10), unnest(...)
        name = "generate_series" if isinstance(target, exp.GenerateSeries) else _func_name(target)
        if name in TABLE_FUNCTIONS:
            return None
        flag = "file_access" if _denied(name) or name not in TABLE_FUNCTIONS else ""
        return Refusal(f"table function {name}() is not allowed: read the dataset's tables", flag)
    name = node.name.lower()
    if node.args.get("catalog") or (node.args.get("db") and node.text("db").lower() != "main"):
        return Refusal(f"{node.sql()} is outside the dataset: use its tables by their plain names", "file_access")
    if name in ctes and not node.args.get("db"):
        return None
    if name in known:
        read.add(name)
        return None
    if "/" in name or "." in name or "\\" in name:
        return Refusal(f"{node.name!r} looks like a file: queries may only read the dataset's tables", "file_access")
    return Refusal(f"no table named {node.name!r} in this dataset (tables: {', '.join(sorted(known))})")


def _order(tree: exp.Expr) -> tuple[bool, list[int] | None]:
    order = tree.args.get("order")
    if not isinstance(tree, exp.Query) or order is None or not order.expressions:
        return False, None
    outputs = [s.alias_or_name.lower() for s in tree.selects]
    sources = [(s.this if isinstance(s, exp.Alias) else s).sql().lower() for s in tree.selects]
    keys: list[int] = []
    for ordered in order.expressions:
        key = ordered.this
        if isinstance(key, exp.Literal) and key.is_int and 1 <= int(key.this) <= len(outputs):
            keys.append(int(key.this) - 1)
        elif isinstance(key, exp.Column) and key.name.lower() in outputs:
            keys.append(outputs.index(key.name.lower()))
        elif key.sql().lower() in sources:
            keys.append(sources.index(key.sql().lower()))
        else:
            return True, None
    return True, keys


def _literals(tree: exp.Expr) -> tuple[list[float], list[str]]:
    numbers: list[float] = []
    strings: list[str] = []
    for lit in tree.find_all(exp.Literal):
        if isinstance(lit.parent, exp.Ordered | exp.Group) or lit.find_ancestor(exp.Limit, exp.Offset, exp.Fetch):
            continue  # ordinals and row counts, not values
        if lit.is_string:
            strings.append(str(lit.this))
        else:
            try:
                numbers.append(float(lit.this))
            except ValueError:
                pass
    return numbers, strings


def _hardcoded(tree: exp.Expr, read: set[str]) -> str:
    if not read:
        return "it reads no table of the dataset"
    if any(True for _ in tree.find_all(exp.Values)):
        return "it has a VALUES list"
    for select in tree.find_all(exp.Select):
        cte = select.find_ancestor(exp.CTE)
        with_ = cte.find_ancestor(exp.With) if cte is not None else None
        if cte is not None and isinstance(cte.this, exp.Union) and with_ is not None and with_.args.get("recursive"):
            continue  # the anchor of a recursive CTE (WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL ...))
        if select.args.get("from") is None and select.args.get("from_") is None and not any(
                True for p in select.selects for _ in p.find_all(exp.Subquery, exp.Select) if _ is not select):
            return f"it has a SELECT without FROM ({select.sql()[:80]})"
    return ""
