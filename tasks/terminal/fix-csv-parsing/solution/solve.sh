#!/bin/bash
# Split rows with the csv module, which understands quoting, instead of str.split(",").
set -euo pipefail
cd /app
cat > sales/loader.py <<'PY'
"""Read order rows from a CSV file with a header: order_id,customer,amount."""

import csv
from dataclasses import dataclass


@dataclass
class Order:
    order_id: str
    customer: str
    amount: float


def load_orders(path: str) -> list[Order]:
    orders = []
    with open(path, encoding="utf-8", newline="") as f:
        for row in csv.DictReader(f):
            if not row.get("order_id"):
                continue
            orders.append(Order(row["order_id"], row["customer"], float(row["amount"])))
    return orders
PY
python3 -m sales.report data/orders.csv
