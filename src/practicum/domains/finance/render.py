"""Statements as the text a model reads: fixed-width tables (``text``) or pipe tables (``markdown``).

Figures print as filings print them: thousands separators, negatives in parentheses, zero as
``-``, per-share data with two decimals; each statement is headed by the company (name, exchange,
ticker, CIK), its title and its unit ("in millions of U.S. dollars, except per-share data"), and
each column by its fiscal year. A line that is zero in every year (a company that pays no
dividends) is left out, as filings leave it out; it still counts as zero in every identity.
"""

from __future__ import annotations

from typing import Literal

from practicum.domains.finance.statements import LINES, TITLES, Financials, Line, Statement

Format = Literal["text", "markdown"]
SYNTHETIC = "The figures are synthetic, generated for this exercise; they are not the company's reported results."


def figure(value: float, key: str = "") -> str:
    if key == "eps":
        return f"({abs(value):,.2f})" if value < 0 else f"{value:,.2f}"
    if value == 0:
        return "-"
    text = f"{abs(value):,.0f}"
    return f"({text})" if value < 0 else text


def unit_line(fin: Financials, statement: Statement) -> str:
    extra = ", except per-share data" if statement == "income" else ""
    return f"(in {fin.unit_words}{extra})"


def _label(line: Line, fin: Financials) -> str:
    if line.key == "shares":
        return f"{line.label} (in {fin.scale})"
    return line.label


def render_statement(fin: Financials, statement: Statement, fmt: Format = "text") -> str:
    lines = {ln for ln in LINES if ln.statement == statement and any(v != 0 for v in fin.values[ln.key])}
    when = "As of" if statement == "balance" else "Fiscal year ended"
    period = f"{when} {fin.period_end(fin.years[-1]).rsplit(',', 1)[0]}"  # "As of June 30"
    title = f"{fin.company.name}\n{TITLES[statement]}\n{unit_line(fin, statement)}"
    rows: list[tuple[str, list[str], bool]] = []  # label, cells, is a total
    section: str | None = None
    for ln in LINES:
        if ln.statement != statement:
            continue
        section = ln.section or section
        if ln not in lines:
            continue
        if section:  # a heading before the first line shown under it
            rows.append((section, [""] * len(fin.years), False))
            section = None
        indent = "" if ln.total or ln.key in ("revenue", "cogs", "eps", "shares") else "  "
        rows.append((indent + _label(ln, fin), [figure(v, ln.key) for v in fin.values[ln.key]], ln.total))
    years = [str(y) for y in fin.years]
    if fmt == "markdown":
        head = f"| {period} | " + " | ".join(years) + " |\n|---|" + "---:|" * len(years)
        body = "\n".join(f"| {'**' + label.strip() + '**' if total else label} | " + " | ".join(cells) + " |"
                         for label, cells, total in rows)
        return f"{title}\n\n{head}\n{body}"
    width = max(len(period), *(len(label) for label, _, _ in rows)) + 2
    col = max(10, *(len(c) for _, cells, _ in rows for c in cells)) + 2
    out = [title, "", period.ljust(width) + "".join(y.rjust(col) for y in years)]
    for label, cells, _total in rows:
        out.append((label.ljust(width) + "".join(c.rjust(col) for c in cells)).rstrip())
    return "\n".join(out)


def render(fin: Financials, fmt: Format = "text",
           statements: tuple[Statement, ...] = ("income", "balance", "cash_flow")) -> str:
    """The company heading, then each statement asked for."""
    head = f"{fin.company.heading()}\n{SYNTHETIC}"
    return "\n\n".join([head, *(render_statement(fin, s, fmt) for s in statements)])
