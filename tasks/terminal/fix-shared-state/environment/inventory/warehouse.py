"""A warehouse is a set of named bins."""

from inventory.bins import Bin


class Warehouse:
    def __init__(self, bins: dict[str, Bin] | None = None):
        self.bins = bins if bins is not None else {}

    def add_bin(self, name: str) -> Bin:
        if name in self.bins:
            raise KeyError(f"bin {name} exists")
        self.bins[name] = Bin(name)
        return self.bins[name]

    def stock(self, bin_name: str, sku: str, qty: int) -> None:
        self.bins[bin_name].put(sku, qty)

    def total(self, bin_name: str | None = None) -> int:
        if bin_name is not None:
            return self.bins[bin_name].quantity()
        return sum(b.quantity() for b in self.bins.values())

    def totals_by_sku(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for b in self.bins.values():
            for sku, qty in b.entries:
                out[sku] = out.get(sku, 0) + qty
        return out
