"""Storage bins: each holds (sku, quantity) entries."""


class Bin:
    def __init__(self, name: str, entries: list[tuple[str, int]] = []):
        self.name = name
        self.entries = entries

    def put(self, sku: str, qty: int) -> None:
        if qty <= 0:
            raise ValueError("quantity must be positive")
        self.entries.append((sku, qty))

    def quantity(self, sku: str | None = None) -> int:
        return sum(q for s, q in self.entries if sku is None or s == sku)
