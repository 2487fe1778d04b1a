"""Fetch reports from a data source that sometimes drops the connection."""

from collections.abc import Callable


def fetch_report(source: Callable[[str], dict], name: str) -> dict:
    """The report `name`, as the source returns it."""
    report = source(name)
    if "rows" not in report:
        raise ValueError(f"malformed report {name!r}")
    return report
