"""Deterministic shop databases as SQL scripts."""

import random

SCHEMA = """CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT NOT NULL, country TEXT NOT NULL);
CREATE TABLE orders (id INTEGER PRIMARY KEY, customer_id INTEGER NOT NULL REFERENCES customers(id),
                     created_at TEXT NOT NULL, status TEXT NOT NULL CHECK (status IN ('paid', 'refunded', 'pending')));
CREATE TABLE order_items (order_id INTEGER NOT NULL REFERENCES orders(id), product TEXT NOT NULL,
                          quantity INTEGER NOT NULL, unit_price_cents INTEGER NOT NULL);
"""


def shop_sql(seed: int, customers: int, orders: int) -> str:
    rng = random.Random(seed)
    names = ["Ada", "Bea", "Cyd", "Dov", "Eli", "Fay", "Gus", "Hal", "Ivy", "Jo", "Kai", "Liv", "Max", "Nia"]
    out = ["BEGIN;", SCHEMA.strip()]
    for c in range(1, customers + 1):
        name = f"{rng.choice(names)} {chr(65 + c % 26)}."
        out.append(f"INSERT INTO customers VALUES ({c}, '{name}', '{rng.choice(['DE', 'FR', 'NL'])}');")
    item_rows = []
    for o in range(1, orders + 1):
        year = rng.choice([2023, 2024, 2024, 2024, 2025])
        ts = f"{year}-{rng.randrange(1, 13):02d}-{rng.randrange(1, 29):02d} {rng.randrange(24):02d}:{rng.randrange(60):02d}:00"
        status = rng.choice(["paid"] * 6 + ["refunded", "pending"])
        out.append(f"INSERT INTO orders VALUES ({o}, {rng.randrange(1, customers + 1)}, '{ts}', '{status}');")
        for _ in range(rng.randrange(1, 4)):
            item_rows.append(f"INSERT INTO order_items VALUES ({o}, 'p{rng.randrange(30)}', {rng.randrange(1, 5)}, "
                             f"{rng.randrange(99, 20000)});")
    out += item_rows
    out.append("COMMIT;")
    return "\n".join(out) + "\n"
