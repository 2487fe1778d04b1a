"""Hidden checks: the new name everywhere, a warning alias for the old one, same behaviour."""

import ast
import sys
import warnings
from pathlib import Path

import original_money
import pytest

sys.path.insert(0, "/app")

from ledger import money, report, transfer  # noqa: E402
from ledger.accounts import Account  # noqa: E402

AMOUNTS = [0, 1, 99, 100, 12345, -500, -123456789, 100000000]


def test_format_amount_same_as_before():
    for c in AMOUNTS:
        for cur in ("EUR", "USD"):
            assert money.format_amount(c, cur) == original_money.fmt_amt(c, cur)
    assert money.format_amount(250) == "EUR 2.50"


def test_alias_warns_and_agrees():
    for c in AMOUNTS:
        with pytest.warns(DeprecationWarning, match="format_amount"):
            assert money.fmt_amt(c, "USD") == original_money.fmt_amt(c, "USD")


def test_package_does_not_use_old_name():
    for path in Path("/app/ledger").rglob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            if path.name == "money.py" and isinstance(node, ast.FunctionDef) and node.name == "fmt_amt":
                continue
            if isinstance(node, ast.Name) and node.id == "fmt_amt" or \
                    isinstance(node, ast.Attribute) and node.attr == "fmt_amt" or \
                    isinstance(node, ast.alias) and node.name == "fmt_amt":
                raise AssertionError(f"{path} still uses fmt_amt (line {getattr(node, 'lineno', '?')})")


def test_no_warnings_from_package_code():
    a, b = Account("cash"), Account("bank")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        a.post(10000, "opening")
        msg = transfer.transfer(a, b, 2550)
        text = report.statement(a)
        desc = b.describe()
    assert msg == "moved EUR 25.50 from cash to bank"
    assert desc == "bank: EUR 25.50"
    assert text.splitlines()[-1].split() == ["balance", "EUR", "74.50"]


def test_statement_layout():
    a = Account("x", "USD")
    a.post(-500, "fee")
    a.post(123456, "")
    assert report.statement(a) == (
        "Statement for x\n"
        "  fee                        USD (5.00)       USD (5.00)\n"
        "  -                        USD 1,234.56     USD 1,229.56\n"
        "  balance                                   USD 1,229.56"
    )
