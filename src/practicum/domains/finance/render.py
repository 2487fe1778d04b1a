"""Statements as the text a model reads: fixed-width tables (``text``), pipe tables (``markdown``),
or an inline XBRL document (``ixbrl``: XHTML whose figures are ``ix:nonFraction`` facts tagged
with us-gaap concepts, as EDGAR filings are; :func:`render_ixbrl`).

Figures print as filings print them: thousands separators, negatives in parentheses, zero as
``-``, per-share data with two decimals; each statement is headed by the company (name, exchange,
ticker, CIK), its title and its unit ("in millions of U.S. dollars, except per-share data"), and
each column by its fiscal year. A line that is zero in every year (a company that pays no
dividends) is left out, as filings leave it out; it still counts as zero in every identity.
"""

from __future__ import annotations

from typing import Literal

from practicum.domains.finance.statements import LINES, TITLES, Financials, Line, Statement

Format = Literal["text", "markdown", "ixbrl"]
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
    if fmt == "ixbrl":
        return render_ixbrl(fin, statements)
    head = f"{fin.company.heading()}\n{SYNTHETIC}"
    return "\n\n".join([head, *(render_statement(fin, s, fmt) for s in statements)])


# --- inline XBRL ---------------------------------------------------------------------------------------

# line -> (us-gaap concept, factor): the fact's value is factor x the printed figure. Outflows print
# negative but their concepts (PaymentsTo..., IncreaseDecreaseIn... of an asset) count them positive.
CONCEPTS: dict[str, tuple[str, int]] = {
    "revenue": ("Revenues", 1), "cogs": ("CostOfRevenue", 1), "gross_profit": ("GrossProfit", 1),
    "sga": ("SellingGeneralAndAdministrativeExpense", 1), "rnd": ("ResearchAndDevelopmentExpense", 1),
    "da": ("DepreciationDepletionAndAmortization", 1), "operating_income": ("OperatingIncomeLoss", 1),
    "interest": ("InterestExpense", 1),
    "pretax": ("IncomeLossFromContinuingOperationsBeforeIncomeTaxesExtraordinaryItemsNoncontrollingInterest", 1),
    "tax": ("IncomeTaxExpenseBenefit", 1), "net_income": ("NetIncomeLoss", 1), "eps": ("EarningsPerShareDiluted", 1),
    "shares": ("WeightedAverageNumberOfDilutedSharesOutstanding", 1),
    "cash": ("CashAndCashEquivalentsAtCarryingValue", 1), "ar": ("AccountsReceivableNetCurrent", 1),
    "inventory": ("InventoryNet", 1), "prepaid": ("PrepaidExpenseAndOtherAssetsCurrent", 1),
    "current_assets": ("AssetsCurrent", 1), "ppe": ("PropertyPlantAndEquipmentNet", 1), "goodwill": ("Goodwill", 1),
    "other_assets": ("OtherAssetsNoncurrent", 1), "total_assets": ("Assets", 1), "ap": ("AccountsPayableCurrent", 1),
    "accrued": ("AccruedLiabilitiesCurrent", 1), "current_debt": ("LongTermDebtCurrent", 1),
    "current_liabilities": ("LiabilitiesCurrent", 1), "long_term_debt": ("LongTermDebtNoncurrent", 1),
    "other_liabilities": ("OtherLiabilitiesNoncurrent", 1), "total_liabilities": ("Liabilities", 1),
    "paid_in": ("CommonStocksIncludingAdditionalPaidInCapital", 1), "retained": ("RetainedEarningsAccumulatedDeficit", 1),
    "treasury": ("TreasuryStockValue", -1), "equity": ("StockholdersEquity", 1),
    "liabilities_and_equity": ("LiabilitiesAndStockholdersEquity", 1),
    "cf_net_income": ("NetIncomeLoss", 1), "cf_da": ("DepreciationDepletionAndAmortization", 1),
    "sbc": ("ShareBasedCompensation", 1), "d_ar": ("IncreaseDecreaseInAccountsReceivable", -1),
    "d_inventory": ("IncreaseDecreaseInInventories", -1),
    "d_prepaid": ("IncreaseDecreaseInPrepaidDeferredExpenseAndOtherAssets", -1),
    "d_ap": ("IncreaseDecreaseInAccountsPayable", 1), "d_accrued": ("IncreaseDecreaseInAccruedLiabilities", 1),
    "d_other_liabilities": ("IncreaseDecreaseInOtherNoncurrentLiabilities", 1),
    "cfo": ("NetCashProvidedByUsedInOperatingActivities", 1),
    "capex": ("PaymentsToAcquirePropertyPlantAndEquipment", -1),
    "other_investing": ("PaymentsForProceedsFromOtherInvestingActivities", -1),
    "cfi": ("NetCashProvidedByUsedInInvestingActivities", 1), "debt_issued": ("ProceedsFromIssuanceOfLongTermDebt", 1),
    "debt_repaid": ("RepaymentsOfLongTermDebt", -1), "dividends": ("PaymentsOfDividends", -1),
    "buybacks": ("PaymentsForRepurchaseOfCommonStock", -1), "cff": ("NetCashProvidedByUsedInFinancingActivities", 1),
    "net_change": ("CashAndCashEquivalentsPeriodIncreaseDecrease", 1),
    "cash_begin": ("CashAndCashEquivalentsAtCarryingValue", 1), "cash_end": ("CashAndCashEquivalentsAtCarryingValue", 1),
}
IX_NAMESPACES = {"": "http://www.w3.org/1999/xhtml", "ix": "http://www.xbrl.org/2013/inlineXBRL",
                 "ixt": "http://www.xbrl.org/inlineXBRL/transformation/2020-02-12",
                 "xbrli": "http://www.xbrl.org/2003/instance", "link": "http://www.xbrl.org/2003/linkbase",
                 "xlink": "http://www.w3.org/1999/xlink", "iso4217": "http://www.xbrl.org/2003/iso4217",
                 "us-gaap": "http://fasb.org/us-gaap/2024"}


def _iso_end(fin: Financials, year: int) -> str:
    from datetime import date, timedelta

    m = fin.fiscal_year_end
    first_of_next = date(year + (m == 12), m % 12 + 1, 1)
    return (first_of_next - timedelta(days=1)).isoformat()


def _iso_start(fin: Financials, year: int) -> str:
    from datetime import date, timedelta

    return (date.fromisoformat(_iso_end(fin, year - 1)) + timedelta(days=1)).isoformat()


def _context(fin: Financials, key: str, i: int) -> str:
    year = fin.years[i]
    if key == "cash_begin":
        return f"I{year - 1}"
    return f"I{year}" if LINE_STATEMENT[key] == "balance" or key == "cash_end" else f"D{year}"


LINE_STATEMENT = {ln.key: ln.statement for ln in LINES}


def ix_fact(fin: Financials, key: str, i: int) -> str:
    """One figure as an ``ix:nonFraction`` fact, inside the parentheses that print a negative."""
    from html import escape

    value = fin.values[key][i]
    concept, factor = CONCEPTS[key]
    unit, scale, decimals = ("USDPerShare", 0, "2") if key == "eps" else (
        "shares" if key == "shares" else "USD", 3 if fin.scale == "thousands" else 6,
        "-3" if fin.scale == "thousands" else "-6")
    attrs = (f'name="us-gaap:{concept}" contextRef="{_context(fin, key, i)}" unitRef="{unit}" '
             f'decimals="{decimals}" scale="{scale}"')
    if value == 0:
        return f'<ix:nonFraction {attrs} format="ixt:fixed-zero">-</ix:nonFraction>'
    sign = ' sign="-"' if value * factor < 0 else ""
    text = f"{abs(value):,.2f}" if key == "eps" else f"{abs(value):,.0f}"
    fact = f'<ix:nonFraction {attrs} format="ixt:num-dot-decimal"{sign}>{escape(text)}</ix:nonFraction>'
    return f"({fact})" if value < 0 else fact


def render_ixbrl(fin: Financials, statements: tuple[Statement, ...] = ("income", "balance", "cash_flow")) -> str:
    """The statements as an inline XBRL (XHTML) document: contexts for each fiscal year (durations)
    and year end (instants), units, and every printed figure tagged with its us-gaap concept."""
    from html import escape

    ns = " ".join(f'xmlns{":" + p if p else ""}="{u}"' for p, u in IX_NAMESPACES.items())
    cik = fin.company.cik
    contexts = []
    for y in fin.years:
        ident = f'<xbrli:entity><xbrli:identifier scheme="http://www.sec.gov/CIK">{cik}</xbrli:identifier></xbrli:entity>'
        contexts.append(f'<xbrli:context id="D{y}">{ident}<xbrli:period><xbrli:startDate>{_iso_start(fin, y)}'
                        f'</xbrli:startDate><xbrli:endDate>{_iso_end(fin, y)}</xbrli:endDate></xbrli:period></xbrli:context>')
    for y in [fin.years[0] - 1, *fin.years]:
        ident = f'<xbrli:entity><xbrli:identifier scheme="http://www.sec.gov/CIK">{cik}</xbrli:identifier></xbrli:entity>'
        contexts.append(f'<xbrli:context id="I{y}">{ident}<xbrli:period><xbrli:instant>{_iso_end(fin, y)}'
                        "</xbrli:instant></xbrli:period></xbrli:context>")
    units = ('<xbrli:unit id="USD"><xbrli:measure>iso4217:USD</xbrli:measure></xbrli:unit>'
             '<xbrli:unit id="shares"><xbrli:measure>xbrli:shares</xbrli:measure></xbrli:unit>'
             '<xbrli:unit id="USDPerShare"><xbrli:divide><xbrli:unitNumerator><xbrli:measure>iso4217:USD</xbrli:measure>'
             "</xbrli:unitNumerator><xbrli:unitDenominator><xbrli:measure>xbrli:shares</xbrli:measure>"
             "</xbrli:unitDenominator></xbrli:divide></xbrli:unit>")
    header = ('<div style="display:none"><ix:header><ix:references><link:schemaRef xlink:type="simple" '
              'xlink:href="https://xbrl.fasb.org/us-gaap/2024/elts/us-gaap-2024.xsd"/></ix:references><ix:resources>'
              + "".join(contexts) + units + "</ix:resources></ix:header></div>")
    body = [f"<p>{escape(fin.company.heading())}</p>", f"<p>{escape(SYNTHETIC)}</p>"]
    for st in statements:
        shown = [ln for ln in LINES if ln.statement == st and any(v != 0 for v in fin.values[ln.key])]
        when = "As of" if st == "balance" else "Fiscal year ended"
        rows = [f"<tr><th>{escape(when)} {escape(fin.period_end(fin.years[-1]).rsplit(',', 1)[0])}</th>"
                + "".join(f"<th>{y}</th>" for y in fin.years) + "</tr>"]
        for ln in shown:
            cells = "".join(f"<td>{ix_fact(fin, ln.key, i)}</td>" for i in range(len(fin.years)))
            rows.append(f"<tr><td>{escape(_label(ln, fin))}</td>{cells}</tr>")
        body.append(f"<p>{escape(TITLES[st])}<br/>{escape(unit_line(fin, st))}</p><table>{''.join(rows)}</table>")
    return (f'<?xml version="1.0" encoding="utf-8"?>\n<html {ns}><head><title>{escape(fin.company.name)}</title></head>'
            f"<body>{header}\n" + "\n".join(body) + "\n</body></html>")
