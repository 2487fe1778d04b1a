"""Hidden checks: bins and warehouses no longer share state."""

import sys

sys.path.insert(0, "/app")

from inventory.bins import Bin  # noqa: E402
from inventory.warehouse import Warehouse  # noqa: E402


def test_bins_of_one_warehouse_are_independent():
    w = Warehouse()
    w.add_bin("A")
    w.add_bin("B")
    w.stock("A", "bolt", 5)
    w.stock("B", "nut", 2)
    assert w.total("A") == 5
    assert w.total("B") == 2
    assert w.total() == 7


def test_warehouses_are_independent():
    w1, w2 = Warehouse(), Warehouse()
    w1.add_bin("X")
    w2.add_bin("X")
    w1.stock("X", "gear", 3)
    assert w2.total() == 0
    assert w2.totals_by_sku() == {}


def test_fresh_bins_are_empty():
    a, b = Bin("a"), Bin("b")
    a.put("s", 1)
    assert b.quantity() == 0
    assert Bin("c").entries == []


def test_given_entries_still_used():
    b = Bin("d", [("s", 4)])
    b.put("t", 1)
    assert b.quantity() == 5
    assert b.quantity("s") == 4


def test_totals_by_sku():
    w = Warehouse()
    for name in "PQ":
        w.add_bin(name)
    w.stock("P", "bolt", 1)
    w.stock("Q", "bolt", 2)
    w.stock("Q", "nut", 3)
    assert w.totals_by_sku() == {"bolt": 3, "nut": 3}
