"""Hidden checks: the report reads quoted CSV fields."""

import csv
import subprocess
import sys

sys.path.insert(0, "/app")

from sales.loader import load_orders  # noqa: E402

ROWS = [
    ("1", "Plain Co", "10.00"),
    ("2", "Doe, John", "5.50"),
    ("3", 'He said "hi", twice', "1.25"),
    ("4", "Doe, John", "4.50"),
    ("5", "Plain Co", "0.10"),
]


def write(tmp_path):
    p = tmp_path / "orders.csv"
    with open(p, "w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["order_id", "customer", "amount"])
        w.writerows(ROWS)
    return p


def test_loader_reads_quoted_fields(tmp_path):
    orders = load_orders(str(write(tmp_path)))
    assert [o.customer for o in orders] == [r[1] for r in ROWS]
    assert [o.amount for o in orders] == [float(r[2]) for r in ROWS]


def test_report_output(tmp_path):
    out = subprocess.run([sys.executable, "-m", "sales.report", str(write(tmp_path))], cwd="/app",
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["Doe, John: 10.00", 'He said "hi", twice: 1.25', "Plain Co: 10.10"]


def test_shipped_file():
    out = subprocess.run([sys.executable, "-m", "sales.report", "/tests/orders.csv"], cwd="/app",
                         capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == [
        "Acme Ltd: 130.00", "Bolt & Nut: 15.25", "Smith, Jane: 99.99", 'The "Best" Shop: 42.00',
    ]


def test_blank_lines_ignored(tmp_path):
    p = tmp_path / "o.csv"
    p.write_text('order_id,customer,amount\n1,"A, B",2.00\n\n2,C,3.00\n', encoding="utf-8")
    assert [(o.customer, o.amount) for o in load_orders(str(p))] == [("A, B", 2.0), ("C", 3.0)]
