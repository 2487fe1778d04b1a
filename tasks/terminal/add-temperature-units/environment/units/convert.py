"""Convert a value between two units of the same kind."""

from units.table import UNITS


def convert(value: float, from_unit: str, to_unit: str) -> float:
    try:
        kind_from, f_from = UNITS[from_unit]
        kind_to, f_to = UNITS[to_unit]
    except KeyError as e:
        raise ValueError(f"unknown unit {e.args[0]!r}") from None
    if kind_from != kind_to:
        raise ValueError(f"cannot convert {kind_from} to {kind_to}")
    return value * f_from / f_to
