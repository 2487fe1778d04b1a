"""Hidden checks: every import order works in a fresh interpreter, and behaviour is intact."""

import subprocess
import sys

import pytest


def py(code):
    return subprocess.run([sys.executable, "-c", code], cwd="/app", capture_output=True, text=True, timeout=30)


@pytest.mark.parametrize("first", ["orders.models", "orders.validation", "orders.cli"])
def test_import_first(first):
    r = py(f"import {first}; import orders.models, orders.validation, orders.cli; print('ok')")
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr


def test_cli():
    r = subprocess.run([sys.executable, "-m", "orders.cli", "alice", "A1:2:350", "B2:1:99"], cwd="/app",
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "alice: 7.99"
    r = subprocess.run([sys.executable, "-m", "orders.cli", "bob", "A1:0:350"], cwd="/app", capture_output=True,
                       text=True, timeout=30)
    assert r.returncode == 1 and r.stderr.startswith("invalid:")


def test_validation_behaviour():
    code = """
from orders.validation import validate, InvalidOrder, MAX_LINES
from orders.models import Order, Line
o = Order("carol")
o.add("x", 1, 100)
try:
    validate("not an order"); print("no TypeError")
except TypeError:
    pass
for bad in (lambda: Order(" ").add("x", 1, 1), lambda: Order("d").add("x", -1, 1), lambda: Order("d").add("x", 1, -5)):
    try:
        bad(); print("accepted a bad order")
    except InvalidOrder:
        pass
big = Order("e")
for i in range(MAX_LINES):
    big.add(str(i), 1, 1)
try:
    big.add("one-too-many", 1, 1); print("accepted too many lines")
except InvalidOrder:
    pass
assert isinstance(o.lines[0], Line) and o.total_cents() == 100 and big.total_cents() == MAX_LINES + 1
print("ok")
"""
    r = py(code)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "ok"


def test_names_stay_put():
    r = py("import orders.models as m, orders.validation as v; "
           "assert m.Order.__module__ == m.Line.__module__ == 'orders.models'; "
           "assert v.validate.__module__ == v.InvalidOrder.__module__ == 'orders.validation'; "
           "assert issubclass(v.InvalidOrder, ValueError) and v.MAX_LINES == 50; print('ok')")
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr
