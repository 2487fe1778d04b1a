"""The sql domain: its datasets and task bank, the verifier's verdicts on right and wrong
answers (the wrong answers models actually write), hostile queries, task files, and the
environments run through scripted episodes.

Datasets are built once into PRACTICUM_HOME (the user's cache by default) and reused, so only
the first run pays for the build (about 5 s). A missing dataset package skips locally and fails
under CI=true.
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from practicum.config import DomainSection
from practicum.domains.plugin import BuildContext, DomainPlugin
from practicum.domains.sql import SqlOptions, SqlTask, SqlVerifier, plugin
from practicum.domains.sql.compare import compare, normalise_rows
from practicum.domains.sql.datasets import DATASETS, DatasetMissing, database
from practicum.domains.sql.execute import QueryFailed, open_database
from practicum.domains.sql.guard import Inspection, Refusal, inspect_sql
from practicum.domains.sql.tasks import builtin_tasks, load_task_file, load_tasks
from practicum.errors import TaskError
from practicum.models import practicum_home


def _need(dataset: str, engine: str = "duckdb", home: Path | None = None) -> Path:
    try:
        return database(dataset, engine, home or practicum_home())
    except DatasetMissing as e:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI=true: the sql dataset {dataset} is missing, so this test fails instead of skipping: {e}")
        pytest.skip(str(e))


@pytest.fixture(scope="module")
def verifier() -> SqlVerifier:
    for name in DATASETS:
        _need(name)
    return SqlVerifier(practicum_home())


def run_async(fn):
    """A plain test function that runs the coroutine test in its own event loop."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return asyncio.run(fn(*args, **kwargs))

    return wrapper


BANK = builtin_tasks()
BY_ID = {t.id: t for t in BANK}


def verdict(verifier: SqlVerifier, task_id: str, answer: str):
    return verifier.verify_sync(BY_ID[task_id], answer)


# --- the bank ------------------------------------------------------------------------------------

def test_the_bank_has_150_tasks_in_three_tiers_over_every_skill_and_dataset():
    assert len(BANK) >= 150
    assert len(BY_ID) == len(BANK), "task ids are unique"
    tiers = Counter(t.tier for t in BANK)
    assert set(tiers) == {"easy", "medium", "hard"} and min(tiers.values()) >= 30, tiers
    skills = Counter(s for t in BANK for s in t.skills)
    for skill in ("join", "group", "having", "window", "date", "null", "subquery", "cte", "topk", "ties"):
        assert skills[skill] >= 3, f"few tasks practise {skill}: {skills[skill]}"
    assert set(Counter(t.dataset for t in BANK)) == set(DATASETS)
    assert {"rows", "number", "text"} <= {t.answer for t in BANK}


@pytest.mark.parametrize("dataset", sorted(DATASETS))
def test_every_gold_query_runs_and_scores_full_marks(verifier, dataset):
    tasks = [t for t in BANK if t.dataset == dataset]
    failures = []
    for t in tasks:
        v = verifier.verify_sync(t, t.gold_sql)
        if v.score.value != 1.0 or v.flags:
            failures.append(f"{t.id}: {v.score.explanation} {v.flags}")
        if t.answer != "rows":  # the value itself is an accepted answer too
            value = verifier.gold(t).rows[0][0]
            text = f"{value:.15g}" if isinstance(value, float) else str(value)
            v = verifier.verify_sync(t, f"Answer: {text}")
            if v.score.value != 1.0:
                failures.append(f"{t.id} (value {text}): {v.score.explanation}")
    assert not failures, "\n".join(failures)


def test_each_question_names_what_the_gold_query_returns(verifier):
    # Value questions return one cell; row questions no more than a screenful of rows, so the
    # model can read its own result in a tool call.
    for t in BANK:
        rows = verifier.gold(t).rows
        assert rows, f"{t.id}: the gold result is empty"
        assert len(rows) <= 100, f"{t.id}: {len(rows)} rows"


# --- right answers in other forms ------------------------------------------------------------------

@pytest.mark.parametrize("task_id, answer", [
    # column order and names are free
    ("nycflights13/per_origin", "SELECT count(*) AS flights_n, origin AS airport FROM flights GROUP BY origin"),
    # no ORDER BY in the gold: any order
    ("nycflights13/per_origin", "SELECT origin, count(*) FROM flights GROUP BY origin ORDER BY origin DESC"),
    # int vs float vs decimal
    ("chinook/total_sales", "SELECT sum(Total)::DOUBLE FROM Invoice"),
    ("nycflights13/count_flights", "SELECT count(*)::DECIMAL(18, 2) FROM flights"),
    # dates as text
    ("nycflights13/busiest_day", "SELECT strftime(make_date(year, month, day), '%Y-%m-%d') AS d, count(*) FROM flights "
                                 "GROUP BY d ORDER BY 2 DESC LIMIT 1"),
    # a timestamp at midnight is its date
    ("chinook/oldest_employee", "SELECT LastName FROM Employee WHERE BirthDate = (SELECT min(BirthDate) FROM Employee)"),
    # ordered gold: rows that tie on the ORDER BY keys may come in any order
    ("vega/heaviest_per_origin", "SELECT Origin, Name, Weight_in_lbs FROM cars c WHERE Weight_in_lbs = "
                                 "(SELECT max(Weight_in_lbs) FROM cars d WHERE d.Origin = c.Origin) ORDER BY Name DESC"),
    ("lahman/allstar_most", "SELECT playerID, count(*) AS n FROM AllstarFull GROUP BY playerID "
                            "QUALIFY rank() OVER (ORDER BY count(*) DESC) <= 3 ORDER BY n DESC, playerID DESC"),
    # a CTE, a subquery, a different join
    ("nycflights13/unlisted_dest", "SELECT DISTINCT f.dest FROM flights f LEFT JOIN airports a ON a.faa = f.dest "
                                   "WHERE a.faa IS NULL"),
    # a value question answered with the value, in words around it
    ("nycflights13/ewr_lax_hours", "The average is about 5.43 hours.\nAnswer: 5.43"),
    ("nycflights13/count_flights", "Answer: 336,776"),
    ("nycflights13/top_carrier_name", "Answer: united air lines inc"),
    # a fenced block in a reply
    ("nycflights13/jfk_departures", "Let me count.\n```sql\nSELECT count(*) FROM flights WHERE origin = 'JFK'\n```"),
    # a recursive CTE's anchor selects without FROM, legitimately
    ("chinook/org_depth", "WITH RECURSIVE c(id, lvl) AS (SELECT EmployeeId, 0 FROM Employee WHERE ReportsTo IS NULL "
                          "UNION ALL SELECT e.EmployeeId, c.lvl + 1 FROM Employee e JOIN c ON e.ReportsTo = c.id) "
                          "SELECT e.FirstName, e.LastName, c.lvl FROM c JOIN Employee e ON e.EmployeeId = c.id "
                          "ORDER BY c.lvl, e.LastName"),
])
def test_right_answers_in_other_forms_score_1(verifier, task_id, answer):
    v = verdict(verifier, task_id, answer)
    assert v.score.value == 1.0, v.score.explanation
    assert v.flags == []


# --- the wrong answers models produce ----------------------------------------------------------------

WRONG = [
    # off by one
    ("nycflights13/count_flights", "Answer: 336777", "wrong number", None),
    ("nycflights13/per_origin", "SELECT origin, count(*) + 1 FROM flights GROUP BY origin", "no matching column", None),
    ("nycflights13/busy_dest", "SELECT dest, count(*) FROM flights GROUP BY dest HAVING count(*) > 12000", "row(s)", None),
    # wrong rows: an inner join drops the destinations missing from airports
    ("nycflights13/jfk_top5_dest", "SELECT f.dest, a.name, count(*) AS n FROM flights f JOIN airports a ON a.faa = f.dest "
                                   "WHERE f.origin = 'JFK' GROUP BY f.dest, a.name ORDER BY n DESC LIMIT 5", "wrong result", None),
    # NULL handling: count(*) instead of count of a column
    ("chinook/rep_customers", "SELECT e.FirstName, e.LastName, count(*) FROM Employee e LEFT JOIN Customer c "
                              "ON c.SupportRepId = e.EmployeeId GROUP BY e.EmployeeId, e.FirstName, e.LastName",
     "wrong result", None),
    # right rows, wrong order where the question asks for one
    ("nycflights13/per_month", "SELECT month, count(*) FROM flights GROUP BY month ORDER BY month DESC", "wrong order", None),
    ("nycflights13/per_month", "SELECT month, count(*) FROM flights GROUP BY month ORDER BY count(*)", "wrong order", None),
    # wrong units or scale
    ("nycflights13/ewr_lax_hours", "SELECT round(avg(air_time), 2) FROM flights WHERE origin = 'EWR' AND dest = 'LAX'",
     "wrong result", None),
    ("chinook/avg_minutes", "SELECT round(avg(Milliseconds) / 1000, 2) FROM Track", "wrong result", None),
    ("nycflights13/late_pct_origin", "SELECT origin, round(avg(CASE WHEN arr_delay > 15 THEN 1 ELSE 0 END), 4) FROM flights "
                                     "WHERE arr_delay IS NOT NULL GROUP BY origin", "no matching column", None),
    # extra rows, missing rows, extra columns
    ("nycflights13/carrier_planes_top5", "SELECT carrier, count(DISTINCT tailnum) AS p FROM flights GROUP BY carrier "
                                         "ORDER BY p DESC LIMIT 6", "6 row(s); expected 5", None),
    ("lahman/allstar_most", "SELECT playerID, count(*) AS n FROM AllstarFull GROUP BY playerID ORDER BY n DESC LIMIT 1",
     "1 row(s); expected 3", None),
    ("nycflights13/per_origin", "SELECT origin, count(*), avg(dep_delay) FROM flights GROUP BY origin", "3 column(s)", None),
    # a top-k that drops ties
    ("nycflights13/origin_top_dest", "SELECT origin, dest, count(*) FROM flights GROUP BY origin, dest ORDER BY 3 DESC LIMIT 3",
     "wrong result", None),
    # hard-coded results
    ("nycflights13/per_origin", "SELECT * FROM (VALUES ('EWR', 120835), ('LGA', 104662), ('JFK', 111279)) t(origin, n)",
     "hard-coded", "hardcoded_values"),
    ("nycflights13/per_origin", "SELECT origin, count(*) FROM flights GROUP BY origin UNION ALL SELECT 'XXX', 1 LIMIT 3",
     "hard-coded", "hardcoded_values"),
    ("nycflights13/count_flights", "SELECT 336776", "hard-coded", "hardcoded_values"),
    ("nycflights13/count_flights", "SELECT 336776 AS n FROM flights LIMIT 1", "hard-codes", "hardcoded_values"),
    ("nycflights13/top_carrier_name", "SELECT name FROM airlines WHERE name = 'United Air Lines Inc.'", "hard-codes",
     "hardcoded_values"),
    ("lahman/ruth_hr", "SELECT max(714) FROM People", "hard-codes", "hardcoded_values"),
    ("nycflights13/count_flights", "SELECT * FROM range(336776, 336777)", "hard-coded", "hardcoded_values"),
    # files, extensions, other databases, settings
    ("nycflights13/count_flights", "SELECT count(*) FROM read_csv('/etc/passwd')", "read_csv", "file_access"),
    ("nycflights13/count_flights", "SELECT count(*) FROM '/etc/passwd'", "file", "file_access"),
    ("nycflights13/count_flights", "SELECT count(*) FROM glob('/*')", "glob", "file_access"),
    ("nycflights13/count_flights", "SELECT * FROM query('SELECT count(*) FROM flights')", "query", "file_access"),
    ("nycflights13/count_flights", "COPY flights TO '/tmp/flights.csv'", "COPY", "file_access"),
    ("nycflights13/count_flights", "ATTACH '/tmp/other.db' AS other", "ATTACH", "file_access"),
    ("nycflights13/count_flights", "INSTALL httpfs", "extension", "extension"),
    ("nycflights13/count_flights", "LOAD httpfs", "extension", "extension"),
    ("nycflights13/count_flights", "PRAGMA version", "PRAGMA", "file_access"),
    ("nycflights13/count_flights", "SET threads = 8", "SET", "file_access"),
    ("nycflights13/count_flights", "SELECT count(*) FROM system.main.duckdb_tables()", "not allowed", "file_access"),
    ("nycflights13/count_flights", "SELECT current_setting('threads') FROM flights LIMIT 1", "not allowed", "file_access"),
    # writes
    ("nycflights13/count_flights", "DELETE FROM flights WHERE origin = 'JFK'", "write", "write"),
    ("nycflights13/count_flights", "CREATE TEMP TABLE t AS SELECT count(*) FROM flights", "write", "write"),
    ("nycflights13/count_flights", "INSERT INTO airlines VALUES ('ZZ', 'Zed')", "write", "write"),
    ("nycflights13/count_flights", "DROP TABLE flights", "write", "write"),
    ("nycflights13/count_flights", "UPDATE flights SET dep_delay = 0", "write", "write"),
    ("nycflights13/count_flights", "SELECT count(*) FROM flights; DROP TABLE flights", "2 statements", None),
    # broken SQL, no answer, a runaway result
    ("nycflights13/per_origin", "SELEC origin FROM flights", "", None),
    ("nycflights13/per_origin", "SELECT origin, count(*) FROM flights", "failed", None),
    ("nycflights13/per_origin", "SELECT origin, count(*) FROM nosuchtable GROUP BY origin", "no table", None),
    ("nycflights13/per_origin", "", "no answer", None),
    ("nycflights13/per_origin", "SELECT origin, dest FROM flights", "more than", None),
]


@pytest.mark.parametrize("task_id, answer, why, flag", WRONG)
def test_wrong_answers_score_0_with_a_reason(verifier, task_id, answer, why, flag):
    v = verdict(verifier, task_id, answer)
    assert v.score.value == 0.0, f"{answer!r} passed: {v.score.explanation}"
    assert why in v.score.explanation, v.score.explanation
    assert v.flags == ([flag] if flag else []), v.flags
    if flag:
        assert v.score.components[f"flag:{flag}"] == 1.0


def test_the_connection_itself_refuses_what_the_reader_would_miss(verifier):
    # The guard is the first wall; the read-only, external-access-disabled, locked connection is
    # the second. Bypass the guard and talk to the engine directly.
    db = verifier.database("nycflights13")
    for sql in ("CREATE TABLE x AS SELECT 1", "DELETE FROM flights", "SELECT * FROM read_csv('/etc/passwd')",
                "COPY flights TO '/tmp/practicum-sql-test.csv'", "ATTACH '/tmp/practicum-sql-test.db'",
                "INSTALL httpfs", "LOAD httpfs", "SET enable_external_access = true", "SET threads = 16"):
        with pytest.raises(QueryFailed):
            db.run(sql, 5.0, 10)
    assert not Path("/tmp/practicum-sql-test.csv").exists()
    assert db.run("SELECT count(*) FROM flights", 5.0, 10).rows == [(336776,)]


def test_a_runaway_query_is_stopped_at_the_timeout_and_scored_0():
    fast = SqlVerifier(practicum_home(), timeout_s=1.0)
    task = BY_ID["nycflights13/count_flights"]
    start = time.monotonic()
    v = fast.verify_sync(task, "SELECT count(*) FROM flights a, flights b, flights c")
    assert time.monotonic() - start < 10
    assert v.score.value == 0.0 and "timeout" in v.score.explanation
    v = fast.verify_sync(task, "WITH RECURSIVE r(i) AS (SELECT count(*) FROM flights UNION ALL SELECT i + 1 FROM r) "
                               "SELECT max(i) FROM r")
    assert v.score.value == 0.0 and ("timeout" in v.score.explanation or "memory" in v.score.explanation)


def test_a_query_that_exhausts_memory_is_scored_0_not_raised(tmp_path):
    _need("vega", home=tmp_path)  # a home of its own: the memory limit is set when a file is first opened
    small = SqlVerifier(tmp_path, timeout_s=20.0, memory_limit="64MB")
    task = SqlTask(id="cars", dataset="vega", question="How many cars?", gold_sql="SELECT count(*) FROM cars")
    v = small.verify_sync(task, "SELECT length(string_agg(repeat(Name, 200000), '')) FROM cars")
    assert v.score.value == 0.0 and "failed (memory)" in v.score.explanation, v.score.explanation


@run_async
async def test_concurrent_verifications_do_not_interfere(verifier):
    tasks = [t for t in BANK if t.dataset in ("nycflights13", "chinook")][:40]
    answers = [t.gold_sql if i % 2 == 0 else "SELECT 1" for i, t in enumerate(tasks)]
    verdicts = await asyncio.gather(*(verifier.verify(t, a) for t, a in zip(tasks, answers)))
    assert [v.score.value for v in verdicts] == [1.0 if i % 2 == 0 else 0.0 for i in range(len(tasks))]


# --- the comparison rules, by hand ---------------------------------------------------------------

def test_ties_in_an_ordered_result_may_come_in_any_order():
    gold = normalise_rows([("a", 3), ("b", 2), ("c", 2), ("d", 1)])
    swapped = normalise_rows([("a", 3), ("c", 2), ("b", 2), ("d", 1)])
    moved = normalise_rows([("a", 3), ("b", 2), ("d", 1), ("c", 2)])
    assert compare(gold, swapped, ordered=True, order_keys=[1], rel_tol=1e-6).match
    assert not compare(gold, moved, ordered=True, order_keys=[1], rel_tol=1e-6).match
    # when the key is not an output column, every position counts
    assert not compare(gold, swapped, ordered=True, order_keys=None, rel_tol=1e-6).match


def test_numbers_match_within_the_relative_tolerance_only():
    gold = normalise_rows([("x", 100.0)])
    assert compare(gold, normalise_rows([("x", 100.001)]), ordered=False, order_keys=None, rel_tol=1e-6).match is False
    assert compare(gold, normalise_rows([("x", 100.001)]), ordered=False, order_keys=None, rel_tol=1e-4).match
    assert compare(gold, normalise_rows([("x", 100.00001)]), ordered=False, order_keys=None, rel_tol=1e-6).match
    assert compare(gold, normalise_rows([("x", "100")]), ordered=False, order_keys=None, rel_tol=1e-6).match


def test_duplicate_rows_count():
    gold = normalise_rows([("a",), ("a",), ("b",)])
    assert not compare(gold, normalise_rows([("a",), ("b",), ("b",)]), ordered=False, order_keys=None, rel_tol=0).match


def test_the_reader_finds_the_order_keys_of_the_gold_query():
    ins = inspect_sql("SELECT origin AS o, count(*) AS n FROM flights GROUP BY o ORDER BY n DESC, 1", {"flights"})
    assert isinstance(ins, Inspection) and ins.ordered and ins.order_keys == [1, 0]
    ins = inspect_sql("SELECT origin FROM flights ORDER BY dep_delay", {"flights"})
    assert isinstance(ins, Inspection) and ins.ordered and ins.order_keys is None
    assert isinstance(inspect_sql("SELECT * FROM other_db.main.flights", {"flights"}), Refusal)


# --- task files ----------------------------------------------------------------------------------

def test_a_minimal_task_file_verifies_through_the_plugin(tmp_path, verifier):
    path = tmp_path / "task.json"
    path.write_text(json.dumps({"dataset": "nycflights13", "question": "How many airlines are there?",
                                "gold_sql": "SELECT count(*) FROM airlines"}))
    task = plugin.load_task(path)
    assert task.id == "task" and "How many airlines" in task.prompt[-1].content
    assert "airlines(carrier VARCHAR, name VARCHAR)" in task.prompt[-1].content  # the tables it needs
    ctx = BuildContext(home=practicum_home())
    good = asyncio.run(plugin.verify(task, "SELECT count(DISTINCT carrier) FROM airlines", ctx))
    bad = asyncio.run(plugin.verify(task, "SELECT count(*) FROM airports", ctx))
    assert good.score.value == 1.0 and bad.score.value == 0.0
    assert asyncio.run(plugin.verify(task, task.metadata["reference"], ctx)).score.value == 1.0


@pytest.mark.parametrize("content, message", [
    ("{not json", "not valid JSON"),
    ('["a list"]', "must be a JSON object"),
    ('{"dataset": "nycflights13", "question": "q"}', "gold_sql"),
    ('{"dataset": "nosuch", "question": "q", "gold_sql": "SELECT 1"}', "unknown dataset 'nosuch'"),
    ('{"dataset": "nycflights13", "question": "q", "gold_sql": "SELECT 1", "answer": "list"}', "answer"),
    ('{"dataset": "nycflights13", "question": "q", "gold_sql": "SELECT 1", "colour": "red"}', "colour"),
])
def test_bad_task_files_name_the_file_and_field(tmp_path, content, message):
    path = tmp_path / "broken.json"
    path.write_text(content)
    with pytest.raises(TaskError) as e:
        plugin.load_task(path)
    assert str(path) in str(e.value) and message in str(e.value)


def test_a_bad_line_of_a_jsonl_file_is_named_with_its_line(tmp_path):
    path = tmp_path / "tasks.jsonl"
    good = json.dumps({"dataset": "vega", "question": "q", "gold_sql": "SELECT count(*) FROM cars"})
    path.write_text(good + "\n" + json.dumps({"dataset": "vega", "question": "q"}) + "\n")
    with pytest.raises(TaskError, match=rf"{path}:2: .*gold_sql"):
        load_tasks(path)
    with pytest.raises(TaskError, match="cannot read task file .*missing.json"):
        load_task_file(tmp_path / "missing.json")
    with pytest.raises(TaskError, match="no such sql task file"):
        load_tasks(tmp_path / "missing.jsonl")


def test_a_broken_gold_query_is_a_task_error_naming_the_task(verifier):
    task = SqlTask(id="mine/broken", dataset="nycflights13", question="q", gold_sql="SELECT nosuchcolumn FROM flights")
    with pytest.raises(TaskError, match="mine/broken"):
        verifier.verify_sync(task, "SELECT 1")
    task = SqlTask(id="mine/two", dataset="nycflights13", question="q", answer="number",
                   gold_sql="SELECT origin, count(*) FROM flights GROUP BY origin")
    with pytest.raises(TaskError, match="one value"):
        verifier.verify_sync(task, "SELECT 1")


# --- environments --------------------------------------------------------------------------------

def _section(name: str = "sql") -> DomainSection:
    return DomainSection(name=name, env="sql")


def _build(**options):
    opts = SqlOptions.model_validate(options)
    return plugin.build(_section(), opts, BuildContext(seed=3, home=practicum_home()))


def _call(name: str, **arguments) -> str:
    return f'<tool_call>{json.dumps({"name": name, "arguments": arguments})}</tool_call>'


@run_async
async def test_a_scripted_multi_turn_episode_inspects_queries_and_submits(verifier):
    domain = _build(mode="multi", datasets=["nycflights13"])
    task = domain.source.task(BY_ID["nycflights13/jfk_top5_dest"])
    env = domain.make_env()
    obs = await env.reset(task)
    assert "Question:" in obs.messages[-1].content and "submit" in obs.messages[0].content
    assert {t.name for t in env.tools()} == {"schema", "describe", "sql", "submit"}

    obs = await env.step(_call("schema"))
    assert "flights(year BIGINT" in obs.messages[0].content and not obs.done
    obs = await env.step(_call("describe", table="airports"))
    assert "1458 rows" in obs.messages[0].content and "faa" in obs.messages[0].content
    obs = await env.step(_call("sql", query="SELECT dest, count(*) AS n FROM flights WHERE origin = 'JFK' "
                                            "GROUP BY dest ORDER BY n DESC LIMIT 5"))
    assert "LAX | 11262" in obs.messages[0].content and "(5 rows)" in obs.messages[0].content
    obs = await env.step(_call("sql", query="DROP TABLE flights"))
    assert "error (tool_failed): refused" in obs.messages[0].content
    obs = await env.step(_call("sql", query="SELECT nosuch FROM flights"))
    assert "the query failed (error)" in obs.messages[0].content
    final = ("SELECT f.dest, a.name, count(*) AS n FROM flights f LEFT JOIN airports a ON a.faa = f.dest "
             "WHERE f.origin = 'JFK' GROUP BY f.dest, a.name ORDER BY n DESC LIMIT 5")
    obs = await env.step(_call("submit", answer=final))
    assert obs.done and obs.score is not None and obs.score.value == 1.0, obs.score
    assert obs.info["tool_calls"] == {"schema": 1, "describe": 1, "sql": 3, "submit": 1}
    assert obs.info["sql"] == {"queries": 3, "failed_queries": 2} and obs.info["flags"] == []
    await env.close()


@run_async
async def test_an_episode_that_hits_a_limit_without_submitting_scores_0(verifier):
    domain = _build(mode="multi", datasets=["chinook"], max_queries=1)
    env = domain.make_env()
    await env.reset(domain.source.train_task(0))
    await env.step(_call("sql", query="SELECT 1"))
    obs = await env.step(_call("sql", query="SELECT 2"))
    assert "all 1 queries" in obs.messages[0].content
    obs = await env.finish("turn_limit")
    assert obs.done and obs.score is not None and obs.score.value == 0.0
    await env.close()


@run_async
async def test_a_single_turn_episode_scores_the_fenced_query_and_reports_flags(verifier):
    domain = _build(mode="single", datasets=["nycflights13"], tiers=["easy"])
    task = domain.source.task(BY_ID["nycflights13/per_origin"])
    assert "Relevant tables:\nflights(" in task.prompt[-1].content and "```sql" in task.prompt[0].content
    env = domain.make_env()
    await env.reset(task)
    obs = await env.step("```sql\nSELECT origin, count(*) FROM flights GROUP BY origin\n```")
    assert obs.done and obs.score.value == 1.0
    env = domain.make_env()
    await env.reset(task)
    obs = await env.step("```sql\nSELECT * FROM (VALUES ('EWR', 120835)) t(a, b)\n```")
    assert obs.score.value == 0.0 and obs.info["flags"] == ["hardcoded_values"]


def test_the_source_filters_splits_and_draws_deterministically(verifier):
    domain = _build(mode="single", datasets=["chinook", "vega"], tiers=["easy", "medium"])
    source = domain.source
    train = [source.train_task(i).id for i in range(len(source._train))]
    assert sorted(train) == sorted(t.id for t in source._train)
    assert train == [_build(mode="single", datasets=["chinook", "vega"], tiers=["easy", "medium"]).source.train_task(i).id
                     for i in range(len(train))]
    held = {t.id for t in source.eval_tasks()}
    assert held and not held & set(train)
    assert all(BY_ID[i].dataset in ("chinook", "vega") and BY_ID[i].tier != "hard" for i in held | set(train))


def test_the_plugin_meets_the_contract_and_validates_its_options():
    assert isinstance(plugin, DomainPlugin)
    assert plugin.name == "sql" and plugin.components == ("correct", "executed")
    with pytest.raises(ValueError, match="unknown dataset"):
        SqlOptions.model_validate({"datasets": ["nosuch"]})
    with pytest.raises(ValueError, match="kind"):
        SqlOptions.model_validate({"source": {"kind": "humaneval"}})


# --- engines and the cache -------------------------------------------------------------------------

def test_the_sqlite_engine_runs_transpiled_gold_queries_behind_the_same_walls(verifier):
    _need("chinook", "sqlite")
    lite = SqlVerifier(practicum_home(), engine="sqlite", timeout_s=1.0)
    chinook = [t for t in BANK if t.dataset == "chinook"]
    # DuckDB's date parts (year(), isodow(), make_date()...) are rewritten with strftime
    assert all(lite.verify_sync(t, lite.gold_sql(t)).score.value == 1.0 for t in chinook)
    task = BY_ID["chinook/sales_by_year"]
    assert lite.verify_sync(task, "SELECT strftime('%Y', InvoiceDate) AS y, sum(Total) FROM Invoice "
                                  "GROUP BY y ORDER BY y").score.value == 1.0
    db = open_database("chinook", "sqlite", practicum_home())
    for sql in ("DELETE FROM Track", "CREATE TABLE x (a)", "ATTACH '/tmp/practicum-sql-lite.db' AS x",
                "SELECT load_extension('x')", "PRAGMA writable_schema = 1"):
        with pytest.raises(QueryFailed):
            db.run(sql, 1.0, 10)
    with pytest.raises(QueryFailed) as e:
        db.run("WITH RECURSIVE r(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM r) SELECT max(i) FROM r", 0.5, 10)
    assert e.value.kind == "timeout"
    domain = _build(mode="single", engine="sqlite", datasets=["chinook"])
    assert "SQLite" in domain.source.train_task(0).prompt[0].content


_BUILD = """
import sys
from pathlib import Path
from practicum.domains.sql.datasets import database
print(database("vega", "duckdb", Path(sys.argv[1])))
"""


def test_concurrent_first_uses_build_the_cache_once_and_whole(tmp_path):
    _need("vega", home=tmp_path / "probe")
    procs = [subprocess.Popen([sys.executable, "-c", _BUILD, str(tmp_path)], stdout=subprocess.PIPE, text=True)
             for _ in range(3)]
    outs = [p.communicate(timeout=120)[0].strip() for p in procs]
    assert all(p.returncode == 0 for p in procs)
    assert len(set(outs)) == 1 and outs[0] == str(tmp_path / "data" / "sql" / "vega.duckdb")
    assert sorted(p.name for p in (tmp_path / "data" / "sql").iterdir()) == ["vega.duckdb", "vega.duckdb.stamp", "vega.lock"]
    db = open_database("vega", "duckdb", tmp_path)
    assert db.run("SELECT count(*) FROM cars", 5.0, 10).rows == [(406,)]


def test_an_episode_through_the_rollout_records_score_tools_and_flags(verifier):
    """The scripted engine plays a whole episode through the real rollout: the episode's info
    carries the tool counts, the verifier's flags and the domain's query counts."""
    from practicum.engines.base import SamplingParams
    from practicum.engines.scripted import ScriptedEngine
    from practicum.records import EpisodeState
    from practicum.rollout import run_episodes

    domain = _build(mode="multi", datasets=["nycflights13"])
    task = domain.source.task(BY_ID["nycflights13/count_flights"])
    script = [_call("schema"), _call("sql", query="SELECT count(*) FROM flights"),
              _call("submit", answer="SELECT 336776 FROM flights LIMIT 1")]
    engine = ScriptedEngine(lambda prompt, i: script[i])
    [ep] = asyncio.run(run_episodes([task], lambda t: domain.make_env(), engine, SamplingParams(max_new_tokens=200),
                                    max_turns=5))
    assert ep.state == EpisodeState.done and ep.reward == 0.0
    assert ep.info.flags == ["hardcoded_values"]
    assert ep.info.tool_calls == {"schema": 1, "sql": 1, "submit": 1}
    assert ep.info.extra["sql"] == {"queries": 1, "failed_queries": 0}
    assert "336776" in [m.content for m in ep.messages if m.role == "tool"][1]
