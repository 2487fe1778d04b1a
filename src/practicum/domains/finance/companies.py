"""Real company names and identifiers, shipped with the package (no download, no extra dependency).

``data/companies.csv`` holds 500 US-listed companies (NYSE and Nasdaq): SEC Central Index Key
(10 digits, zero-padded), ticker, exchange and the name as registered with the SEC. It was cut
from the SEC's ``company_tickers`` table as ``edgartools`` 5.62.1 bundles it
(``edgar/reference/data/company_tickers.parquet``, 10,365 rows, ordered by market value): the
first listing of each CIK on NYSE or Nasdaq, skipping share classes (tickers with ``-`` or
``.``), names that look like banks, insurers, trusts, funds or SPACs, and a short list of large
financial companies, whose statements do not look like the industrial template this domain
generates (docs/finance.md says how to re-cut it). edgartools itself is not a dependency: it
installs 25 MB and seventeen further packages (httpx, lxml, rapidfuzz, orjson...; 58 MB in
all) for a 291 KB table.

The statements attached to these names are synthetic; every prompt says so.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from functools import cache
from importlib import resources

from practicum.errors import TaskError


@dataclass(frozen=True)
class Company:
    cik: str  # SEC Central Index Key, 10 digits
    ticker: str
    exchange: str  # "NYSE" or "Nasdaq"
    name: str

    def heading(self) -> str:
        return f"{self.name} ({self.exchange.upper()}: {self.ticker}; CIK {self.cik})"


@cache
def companies() -> tuple[Company, ...]:
    """The bundled companies, in the table's order."""
    try:
        text = resources.files("practicum.domains.finance").joinpath("data/companies.csv").read_text(encoding="utf-8")
    except OSError as e:
        raise TaskError(f"the finance domain's company table is missing ({e}); reinstall practicum") from None
    rows = list(csv.DictReader(text.splitlines()))
    out = tuple(Company(r["cik"], r["ticker"], r["exchange"], r["name"]) for r in rows)
    if not out or any(len(c.cik) != 10 or not c.cik.isdigit() or not c.ticker for c in out):
        raise TaskError("the finance domain's company table (data/companies.csv) is malformed; reinstall practicum")
    return out


def by_ticker(ticker: str) -> Company | None:
    return next((c for c in companies() if c.ticker == ticker.upper()), None)
