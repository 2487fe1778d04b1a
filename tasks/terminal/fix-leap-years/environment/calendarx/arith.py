"""Date arithmetic on (year, month, day) tuples."""

from calendarx.rules import days_in_month


def day_of_year(year: int, month: int, day: int) -> int:
    if not 1 <= day <= days_in_month(year, month):
        raise ValueError(f"{year:04d}-{month:02d}-{day:02d} does not exist")
    return sum(days_in_month(year, m) for m in range(1, month)) + day


def add_days(year: int, month: int, day: int, n: int) -> tuple[int, int, int]:
    """The date n days after (n >= 0) the given one."""
    if n < 0:
        raise ValueError("n must be >= 0")
    day_of_year(year, month, day)  # validates
    while n > 0:
        left = days_in_month(year, month) - day
        if n <= left:
            return year, month, day + n
        n -= left + 1
        day = 1
        month += 1
        if month == 13:
            year, month = year + 1, 1
    return year, month, day
