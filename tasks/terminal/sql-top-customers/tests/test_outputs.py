"""Hidden checks: the agent's query, run on fresh databases, against results computed here."""

import sqlite3
from collections import defaultdict
from pathlib import Path

import pytest
from genshop import shop_sql


def database(sql):
    conn = sqlite3.connect(":memory:")
    conn.executescript(sql)
    return conn


def expected(conn):
    orders = {oid: (cid, ts, st) for oid, cid, ts, st in conn.execute("SELECT * FROM orders")}
    names = dict(conn.execute("SELECT id, name FROM customers"))
    spent, counted = defaultdict(int), defaultdict(set)
    for oid, _product, qty, price in conn.execute("SELECT * FROM order_items"):
        cid, ts, status = orders[oid]
        if status == "paid" and ts.startswith("2024-"):
            spent[cid] += qty * price
            counted[cid].add(oid)
    rows = [(names[c], len(counted[c]), round(spent[c] / 100, 2)) for c in spent]
    return sorted(rows, key=lambda r: (-r[2], r[0]))[:5]


def run_query(conn):
    sql = Path("/app/queries/top_customers.sql").read_text()
    cur = conn.execute(sql)
    assert [d[0] for d in cur.description] == ["name", "orders", "spent"]
    return cur.fetchall()


def check(conn):
    got, want = run_query(conn), expected(conn)
    assert [(n, k) for n, k, _ in got] == [(n, k) for n, k, _ in want]
    assert [s for _, _, s in got] == pytest.approx([s for _, _, s in want], abs=0.005)


def test_shipped_database():
    sql = Path("/tests/shop.sql").read_text()
    assert Path("/app/data/shop.sql").read_text() == sql
    check(database(sql))


@pytest.mark.parametrize("seed", [1, 2])
def test_unseen_databases(seed):
    check(database(shop_sql(seed, 40 * seed, 500 * seed)))
