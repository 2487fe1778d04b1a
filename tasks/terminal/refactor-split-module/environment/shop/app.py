"""Print a receipt for an order file: one `SKU QTY UNIT_PRICE` line per item."""

import sys
from decimal import ROUND_HALF_UP, Decimal


def parse_order_line(line: str) -> tuple[str, int, Decimal]:
    sku, qty, price = line.split()
    if int(qty) <= 0:
        raise ValueError(f"bad quantity in {line!r}")
    return sku.upper(), int(qty), Decimal(price)


def parse_orders(text: str) -> list[tuple[str, int, Decimal]]:
    items = []
    for raw in text.splitlines():
        line = raw.split("#", 1)[0].strip()
        if line:
            items.append(parse_order_line(line))
    return items


def apply_discount(amount: Decimal, percent: int) -> Decimal:
    if not 0 <= percent <= 100:
        raise ValueError("discount must be between 0 and 100")
    return (amount * (100 - percent) / 100).quantize(Decimal("0.01"), rounding=ROUND_HALF_UP)


def compute_total(items: list[tuple[str, int, Decimal]], discount: int = 0) -> Decimal:
    subtotal = sum((qty * price for _, qty, price in items), Decimal("0"))
    return apply_discount(subtotal, discount)


def format_receipt(items: list[tuple[str, int, Decimal]], discount: int = 0) -> str:
    lines = [f"{sku:<10}{qty:>4} x {price:>8.2f}" for sku, qty, price in items]
    if discount:
        lines.append(f"discount {discount}%")
    lines.append(f"TOTAL {compute_total(items, discount):>17.2f}")
    return "\n".join(lines)


def main(argv: list[str]) -> int:
    with open(argv[1], encoding="utf-8") as f:
        items = parse_orders(f.read())
    discount = int(argv[2]) if len(argv) > 2 else 0
    print(format_receipt(items, discount))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
