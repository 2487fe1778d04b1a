from dataclasses import dataclass, field

from orders.validation import validate


@dataclass
class Line:
    sku: str
    quantity: int
    unit_cents: int


@dataclass
class Order:
    customer: str
    lines: list[Line] = field(default_factory=list)

    def add(self, sku: str, quantity: int, unit_cents: int) -> "Order":
        self.lines.append(Line(sku, quantity, unit_cents))
        validate(self)
        return self

    def total_cents(self) -> int:
        return sum(line.quantity * line.unit_cents for line in self.lines)
