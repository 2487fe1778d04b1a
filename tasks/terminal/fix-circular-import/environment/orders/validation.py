from orders.models import Order

MAX_LINES = 50


class InvalidOrder(ValueError):
    pass


def validate(order: Order) -> None:
    if not isinstance(order, Order):
        raise TypeError("not an Order")
    if not order.customer.strip():
        raise InvalidOrder("an order needs a customer")
    if len(order.lines) > MAX_LINES:
        raise InvalidOrder(f"at most {MAX_LINES} lines")
    for line in order.lines:
        if line.quantity <= 0 or line.unit_cents < 0:
            raise InvalidOrder(f"bad line {line}")
