"""Total amount per customer."""

import sys
from collections import defaultdict

from sales.loader import load_orders


def totals(path: str) -> dict[str, float]:
    out: dict[str, float] = defaultdict(float)
    for order in load_orders(path):
        out[order.customer] += order.amount
    return dict(out)


def main(argv: list[str]) -> None:
    for name, total in sorted(totals(argv[1]).items()):
        print(f"{name}: {total:.2f}")


if __name__ == "__main__":
    main(sys.argv)
