"""python3 -m orders.cli CUSTOMER SKU:QTY:CENTS ... prints the order total."""

import sys

from orders.models import Order
from orders.validation import InvalidOrder


def main(argv: list[str]) -> int:
    order = Order(argv[1])
    try:
        for spec in argv[2:]:
            sku, qty, cents = spec.split(":")
            order.add(sku, int(qty), int(cents))
    except InvalidOrder as e:
        print(f"invalid: {e}", file=sys.stderr)
        return 1
    print(f"{order.customer}: {order.total_cents() / 100:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
