"""Deterministic staff CSV files (with quoting, blanks and odd spacing)."""

import csv
import io
import random

FIRST = ["Ana", "Ben", "Chloé", "Dmitri", "Eve", "Farid", "Grace", "Hiro", "Ines", "Jonas", "Kemal", "Lena"]
LAST = ["O'Neil", "Smith", "García", "Nguyen", "Müller", "Okafor", "Rossi", "Kowalski"]
DEPTS = ["Engineering", "Sales", "Support", "Finance", "Research & Development"]


def staff_csv(seed: int, n: int) -> str:
    rng = random.Random(seed)
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["id", "name", "department", "salary", "start_date"])
    for i in range(n):
        name = f"{rng.choice(LAST)}, {rng.choice(FIRST)}" if rng.random() < 0.5 else \
            f"{rng.choice(FIRST)} {rng.choice(LAST)}"
        dept = rng.choice(DEPTS)
        salary = f"{rng.randrange(30000, 150000)}" if rng.random() < 0.7 else f"{rng.randrange(3000000, 15000000) / 100:.2f}"
        if rng.random() < 0.1:
            salary = f" {salary} "
        w.writerow([1000 + i, name, dept, salary, f"20{rng.randrange(10, 24)}-{rng.randrange(1, 13):02d}-{rng.randrange(1, 29):02d}"])
    return buf.getvalue()
