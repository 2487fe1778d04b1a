"""Read order rows from a CSV file with a header: order_id,customer,amount."""

from dataclasses import dataclass


@dataclass
class Order:
    order_id: str
    customer: str
    amount: float


def load_orders(path: str) -> list[Order]:
    orders = []
    with open(path, encoding="utf-8") as f:
        header = f.readline().strip().split(",")
        for line in f:
            if not line.strip():
                continue
            row = dict(zip(header, line.strip().split(","), strict=True))
            orders.append(Order(row["order_id"], row["customer"], float(row["amount"])))
    return orders
