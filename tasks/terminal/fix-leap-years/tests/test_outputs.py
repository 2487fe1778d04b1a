"""Hidden checks of calendarx against the standard library's proleptic Gregorian calendar."""

import calendar
import datetime as dt
import random
import sys

import pytest

sys.path.insert(0, "/app")

from calendarx.arith import add_days, day_of_year  # noqa: E402
from calendarx.rules import days_in_month, days_in_year, is_leap  # noqa: E402


def test_is_leap_all_years():
    assert [y for y in range(1, 10000) if is_leap(y)] == [y for y in range(1, 10000) if calendar.isleap(y)]


def test_month_lengths():
    for y in (1600, 1700, 1900, 2000, 2023, 2024, 2100):
        for m in range(1, 13):
            assert days_in_month(y, m) == calendar.monthrange(y, m)[1], (y, m)
        assert days_in_year(y) == (366 if calendar.isleap(y) else 365)


def test_day_of_year():
    for d in (dt.date(1900, 12, 31), dt.date(2000, 12, 31), dt.date(2100, 3, 1), dt.date(2024, 3, 1)):
        assert day_of_year(d.year, d.month, d.day) == d.timetuple().tm_yday
    with pytest.raises(ValueError):
        day_of_year(1900, 2, 29)


def test_add_days_across_centuries():
    assert add_days(1900, 2, 28, 1) == (1900, 3, 1)
    assert add_days(2000, 2, 28, 1) == (2000, 2, 29)
    rng = random.Random(7)
    for _ in range(300):
        start = dt.date(1800, 1, 1) + dt.timedelta(days=rng.randrange(120000))
        n = rng.randrange(2000)
        end = start + dt.timedelta(days=n)
        assert add_days(start.year, start.month, start.day, n) == (end.year, end.month, end.day)


def test_bad_month():
    with pytest.raises(ValueError):
        days_in_month(2000, 13)
