"""Hidden checks of temperature conversion (and that nothing else broke)."""

import subprocess
import sys

import pytest

sys.path.insert(0, "/app")

from units import convert  # noqa: E402

CASES = [(100, "C", "F", 212.0), (0, "K", "C", -273.15), (32, "F", "K", 273.15), (-40, "C", "F", -40.0),
         (300, "K", "F", 80.33), (98.6, "F", "C", 37.0), (25, "C", "K", 298.15), (0, "C", "C", 0.0)]


@pytest.mark.parametrize(("value", "src", "dst", "want"), CASES)
def test_temperature(value, src, dst, want):
    assert convert(value, src, dst) == pytest.approx(want, abs=1e-9 if want != 80.33 else 1e-2)


def test_roundtrip():
    for src in "CFK":
        for dst in "CFK":
            for v in (-300.5, 0.0, 12.25, 1000.0):
                assert convert(convert(v, src, dst), dst, src) == pytest.approx(v, abs=1e-9)


def test_kinds_do_not_mix():
    for a, b in (("C", "kg"), ("m", "F"), ("K", "ft")):
        with pytest.raises(ValueError):
            convert(1.0, a, b)
    with pytest.raises(ValueError):
        convert(1.0, "C", "R")


def test_length_and_mass_unchanged():
    assert convert(1, "km", "m") == pytest.approx(1000)
    assert convert(12, "in", "ft") == pytest.approx(1)
    assert convert(1, "lb", "g") == pytest.approx(453.59237)


def test_cli():
    out = subprocess.run([sys.executable, "-m", "units", "100", "C", "F"], cwd="/app", capture_output=True,
                         text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    assert float(out.stdout) == 212.0
    bad = subprocess.run([sys.executable, "-m", "units", "1", "C", "kg"], cwd="/app", capture_output=True, text=True,
                         timeout=30)
    assert bad.returncode == 2
