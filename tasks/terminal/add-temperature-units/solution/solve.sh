#!/bin/bash
# Give every unit an offset as well as a factor: base = value * factor + offset (kelvin for temperature).
set -euo pipefail
cd /app
cat > units/table.py <<'PY'
"""Each unit: (kind, factor, offset) with base = value * factor + offset."""

UNITS: dict[str, tuple[str, float, float]] = {
    "m": ("length", 1.0, 0.0),
    "cm": ("length", 0.01, 0.0),
    "mm": ("length", 0.001, 0.0),
    "km": ("length", 1000.0, 0.0),
    "in": ("length", 0.0254, 0.0),
    "ft": ("length", 0.3048, 0.0),
    "kg": ("mass", 1.0, 0.0),
    "g": ("mass", 0.001, 0.0),
    "lb": ("mass", 0.45359237, 0.0),
    "K": ("temperature", 1.0, 0.0),
    "C": ("temperature", 1.0, 273.15),
    "F": ("temperature", 5 / 9, 273.15 - 32 * 5 / 9),
}
PY
cat > units/convert.py <<'PY'
"""Convert a value between two units of the same kind."""

from units.table import UNITS


def convert(value: float, from_unit: str, to_unit: str) -> float:
    try:
        kind_from, f_from, o_from = UNITS[from_unit]
        kind_to, f_to, o_to = UNITS[to_unit]
    except KeyError as e:
        raise ValueError(f"unknown unit {e.args[0]!r}") from None
    if kind_from != kind_to:
        raise ValueError(f"cannot convert {kind_from} to {kind_to}")
    return (value * f_from + o_from - o_to) / f_to
PY
python3 -m units 100 C F
