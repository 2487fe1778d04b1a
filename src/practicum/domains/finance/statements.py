"""Multi-year financial statements generated so that the accounting identities hold.

:func:`generate` simulates an industrial company year by year from an opening balance sheet:
revenue, margins, working capital (days of sales, inventory and payables), capital spending and
depreciation, debt issued and repaid, interest, tax, stock-based compensation, dividends and
buybacks. Every figure is an integer in the statements' unit (thousands or millions of US
dollars); per-share data is in dollars. Cash is never drawn at random: it is what the cash-flow
statement leaves, so the balance sheet balances by construction, and a year that would end
short of a minimum cash balance borrows the shortfall.

The identities are data, not prose: :func:`identities` lists them as linear equations over cells
``(line key, year index)``, each summing to zero: subtotals and totals, assets = liabilities +
equity, net income and depreciation carried from the income statement to the cash-flow
statement, the cash-flow reconciliation (operating + investing + financing = net change;
beginning + change = ending = the balance sheet's cash), and year-over-year roll-forwards
(retained earnings by net income less dividends, PP&E by capital spending less depreciation,
debt by issuance less repayment, paid-in capital by stock compensation, treasury stock by
buybacks, each working-capital line by its cash-flow change). :func:`violations` evaluates them.

:func:`plant_error` alters one figure for the inconsistency questions, choosing only a cell that
the identities pin down: one whose column in the equations is proportional to no other cell's,
so that exactly one single-figure correction restores every identity (changing revenue could as
well be explained by cost of revenue, so revenue is never chosen).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Literal

from practicum.domains.finance.companies import Company

Statement = Literal["income", "balance", "cash_flow"]
Scale = Literal["thousands", "millions"]
SCALE_FACTOR = {"units": 1.0, "thousands": 1e3, "millions": 1e6, "billions": 1e9}
MONTHS = ("January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
          "November", "December")
MONTH_END = (31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)


@dataclass(frozen=True)
class Line:
    key: str
    label: str
    statement: Statement
    total: bool = False  # a subtotal or total (rendered with a rule above it)
    section: str | None = None  # a heading printed before this line


LINES: tuple[Line, ...] = (
    Line("revenue", "Revenue", "income"),
    Line("cogs", "Cost of revenue", "income"),
    Line("gross_profit", "Gross profit", "income", total=True),
    Line("sga", "Selling, general and administrative", "income", section="Operating expenses:"),
    Line("rnd", "Research and development", "income"),
    Line("da", "Depreciation and amortization", "income"),
    Line("operating_income", "Operating income (loss)", "income", total=True),
    Line("interest", "Interest expense", "income"),
    Line("pretax", "Income (loss) before income taxes", "income", total=True),
    Line("tax", "Provision for (benefit from) income taxes", "income"),
    Line("net_income", "Net income (loss)", "income", total=True),
    Line("eps", "Diluted earnings (loss) per share", "income"),
    Line("shares", "Weighted-average diluted shares outstanding", "income"),
    Line("cash", "Cash and cash equivalents", "balance", section="Assets"),
    Line("ar", "Accounts receivable, net", "balance"),
    Line("inventory", "Inventories", "balance"),
    Line("prepaid", "Prepaid expenses and other current assets", "balance"),
    Line("current_assets", "Total current assets", "balance", total=True),
    Line("ppe", "Property, plant and equipment, net", "balance"),
    Line("goodwill", "Goodwill", "balance"),
    Line("other_assets", "Other non-current assets", "balance"),
    Line("total_assets", "Total assets", "balance", total=True),
    Line("ap", "Accounts payable", "balance", section="Liabilities and stockholders' equity"),
    Line("accrued", "Accrued liabilities", "balance"),
    Line("current_debt", "Current portion of long-term debt", "balance"),
    Line("current_liabilities", "Total current liabilities", "balance", total=True),
    Line("long_term_debt", "Long-term debt, net of current portion", "balance"),
    Line("other_liabilities", "Other non-current liabilities", "balance"),
    Line("total_liabilities", "Total liabilities", "balance", total=True),
    Line("paid_in", "Common stock and additional paid-in capital", "balance"),
    Line("retained", "Retained earnings (accumulated deficit)", "balance"),
    Line("treasury", "Treasury stock, at cost", "balance"),
    Line("equity", "Total stockholders' equity", "balance", total=True),
    Line("liabilities_and_equity", "Total liabilities and stockholders' equity", "balance", total=True),
    Line("cf_net_income", "Net income (loss)", "cash_flow", section="Operating activities"),
    Line("cf_da", "Depreciation and amortization", "cash_flow"),
    Line("sbc", "Stock-based compensation", "cash_flow"),
    Line("d_ar", "Change in accounts receivable", "cash_flow", section="Changes in operating assets and liabilities:"),
    Line("d_inventory", "Change in inventories", "cash_flow"),
    Line("d_prepaid", "Change in prepaid expenses and other current assets", "cash_flow"),
    Line("d_ap", "Change in accounts payable", "cash_flow"),
    Line("d_accrued", "Change in accrued liabilities", "cash_flow"),
    Line("d_other_liabilities", "Change in other non-current liabilities", "cash_flow"),
    Line("cfo", "Net cash provided by (used in) operating activities", "cash_flow", total=True),
    Line("capex", "Purchases of property, plant and equipment", "cash_flow", section="Investing activities"),
    Line("other_investing", "Other investing activities, net", "cash_flow"),
    Line("cfi", "Net cash provided by (used in) investing activities", "cash_flow", total=True),
    Line("debt_issued", "Proceeds from issuance of long-term debt", "cash_flow", section="Financing activities"),
    Line("debt_repaid", "Repayments of long-term debt", "cash_flow"),
    Line("dividends", "Dividends paid", "cash_flow"),
    Line("buybacks", "Repurchases of common stock", "cash_flow"),
    Line("cff", "Net cash provided by (used in) financing activities", "cash_flow", total=True),
    Line("net_change", "Net increase (decrease) in cash and cash equivalents", "cash_flow", total=True),
    Line("cash_begin", "Cash and cash equivalents at beginning of year", "cash_flow"),
    Line("cash_end", "Cash and cash equivalents at end of year", "cash_flow", total=True),
)
LINE = {line.key: line for line in LINES}
BALANCE_KEYS = tuple(line.key for line in LINES if line.statement == "balance")
TITLES = {"income": "Consolidated Statements of Operations", "balance": "Consolidated Balance Sheets",
          "cash_flow": "Consolidated Statements of Cash Flows"}

Cell = tuple[str, int]  # (line key, year index 0..n-1; -1 is the opening balance sheet, never shown)


@dataclass
class Financials:
    """A company's statements: ``values[key][i]`` is the figure of ``years[i]`` as displayed
    (cash outflows and treasury stock negative; expenses positive on the income statement)."""

    company: Company
    years: list[int]  # fiscal years, oldest first
    fiscal_year_end: int  # month (1-12) in which each fiscal year ends
    scale: Scale
    values: dict[str, list[float]]
    opening: dict[str, float] = field(default_factory=dict)  # the balance sheet before years[0]

    def __getitem__(self, cell: Cell) -> float:
        key, i = cell
        return self.opening[key] if i < 0 else self.values[key][i]

    def year_index(self, year: int) -> int:
        return self.years.index(year)

    @property
    def unit_words(self) -> str:
        return f"{self.scale} of U.S. dollars"

    def period_end(self, year: int) -> str:
        m = self.fiscal_year_end
        day = MONTH_END[m - 1] + (1 if m == 2 and year % 4 == 0 else 0)
        return f"{MONTHS[m - 1]} {day}, {year}"

    def copy(self) -> Financials:
        return Financials(self.company, list(self.years), self.fiscal_year_end, self.scale,
                          {k: list(v) for k, v in self.values.items()}, dict(self.opening))


# --- generation -------------------------------------------------------------------------------------

def generate(rng: random.Random, company: Company, years: int = 3, last_year: int = 2024,
             scale: Scale = "millions") -> Financials:
    """A company's statements for ``years`` fiscal years ending with ``last_year``."""
    u = rng.uniform
    base = u(300, 60_000) if scale == "millions" else u(40_000, 4_000_000)
    loss_maker = rng.random() < 0.12
    gm, sga, rnd = u(0.28, 0.68), u(0.08, 0.22), u(0.01, 0.12)
    if loss_maker:
        sga += gm - sga - rnd - u(-0.06, 0.02)  # operating margin around -6 % to +2 %
    dso, dio, dpo = u(25, 75), u(20, 120), u(20, 70)
    dep_rate, tax_rate, int_rate = u(0.08, 0.16), u(0.15, 0.28), u(0.03, 0.08)
    growth = u(-0.06, 0.22)
    payer, buyer = rng.random() < 0.55, rng.random() < 0.45
    payout, buyback = u(0.15, 0.5), u(0.02, 0.06)

    def r(x: float) -> int:
        return int(round(x))

    rev = base
    ppe, debt = r(rev * u(0.25, 0.9)), float(r(rev * u(0.05, 0.5)))
    o: dict[str, float] = {
        "cash": r(rev * u(0.06, 0.25)), "ar": r(rev * dso / 365), "inventory": r(rev * (1 - gm) * dio / 365),
        "prepaid": r(rev * u(0.01, 0.03)), "ppe": ppe, "goodwill": r(rev * u(0.05, 0.5)) if rng.random() < 0.8 else 0,
        "other_assets": r(rev * u(0.02, 0.12)), "ap": r(rev * (1 - gm) * dpo / 365), "accrued": r(rev * u(0.03, 0.08)),
        "other_liabilities": r(rev * u(0.02, 0.08)), "paid_in": r(rev * u(0.1, 0.4)),
        "treasury": -r(rev * u(0.0, 0.15)) if buyer else 0,
    }
    o["current_debt"] = r(debt * u(0.05, 0.2))
    o["long_term_debt"] = debt - o["current_debt"]
    assets = o["cash"] + o["ar"] + o["inventory"] + o["prepaid"] + o["ppe"] + o["goodwill"] + o["other_assets"]
    liabilities = o["ap"] + o["accrued"] + o["current_debt"] + o["long_term_debt"] + o["other_liabilities"]
    o["retained"] = r(assets * u(0.25, 0.55)) - o["paid_in"] - o["treasury"]  # equity: 25-55 % of assets
    o["cash"] += r(liabilities + o["paid_in"] + o["retained"] + o["treasury"] - assets)  # the opening sheet balances
    if o["cash"] < rev * 0.03:  # too little cash: the difference was debt that never existed
        short = r(rev * 0.05) - o["cash"]
        o["cash"] += short
        o["long_term_debt"] += short
    _subtotals(o)
    shares = max(5, r(base * u(0.04, 0.12) / u(1.5, 12)))  # in the statements' unit, as net income is

    vals: dict[str, list[float]] = {line.key: [] for line in LINES}
    prev = dict(o)
    rev_prev = base
    for _ in range(years):
        g = growth + u(-0.05, 0.05)
        rev = rev_prev * (1 + g)
        y: dict[str, float] = {"revenue": r(rev)}
        y["cogs"] = r(rev * (1 - gm - u(-0.02, 0.02)))
        y["gross_profit"] = y["revenue"] - y["cogs"]
        y["sga"], y["rnd"] = r(rev * (sga + u(-0.01, 0.01))), r(rev * rnd * u(0.9, 1.1))
        y["da"] = r(prev["ppe"] * dep_rate)
        y["operating_income"] = y["gross_profit"] - y["sga"] - y["rnd"] - y["da"]
        y["interest"] = r((prev["current_debt"] + prev["long_term_debt"]) * int_rate)
        y["pretax"] = y["operating_income"] - y["interest"]
        y["tax"] = r(y["pretax"] * tax_rate)
        y["net_income"] = y["pretax"] - y["tax"]
        y["sbc"] = r(rev * u(0.005, 0.03))
        # working capital and long-lived assets at the year's end
        y["ar"] = r(rev * (dso + u(-5, 5)) / 365)
        y["inventory"] = r(y["cogs"] * (dio + u(-8, 8)) / 365)
        y["prepaid"] = r(rev * u(0.01, 0.03))
        y["ap"] = r(y["cogs"] * (dpo + u(-5, 5)) / 365)
        y["accrued"] = r(rev * u(0.03, 0.08))
        y["other_assets"] = r(prev["other_assets"] * u(0.95, 1.1))
        y["other_liabilities"] = r(prev["other_liabilities"] * u(0.95, 1.1))
        y["goodwill"] = prev["goodwill"]
        y["capex"] = -r(y["da"] * u(0.8, 1.5) * (1 + max(g, 0)))
        y["ppe"] = prev["ppe"] - y["capex"] - y["da"]
        # financing
        y["debt_repaid"] = -prev["current_debt"]
        y["debt_issued"] = r((prev["current_debt"] + prev["long_term_debt"]) * u(0.1, 0.4)) if rng.random() < 0.5 else 0
        y["dividends"] = -r(max(y["net_income"], 0) * payout) if payer else 0
        healthy = prev["equity"] > 0.3 * prev["total_assets"] and y["net_income"] > 0
        y["buybacks"] = -r(rev * buyback) if buyer and healthy else 0
        # the cash-flow statement, then cash as what it leaves
        y["cf_net_income"], y["cf_da"] = y["net_income"], y["da"]
        y["d_ar"] = prev["ar"] - y["ar"]
        y["d_inventory"] = prev["inventory"] - y["inventory"]
        y["d_prepaid"] = prev["prepaid"] - y["prepaid"]
        y["d_ap"] = y["ap"] - prev["ap"]
        y["d_accrued"] = y["accrued"] - prev["accrued"]
        y["d_other_liabilities"] = y["other_liabilities"] - prev["other_liabilities"]
        y["other_investing"] = prev["other_assets"] - y["other_assets"]
        y["cfo"] = sum(y[k] for k in ("cf_net_income", "cf_da", "sbc", "d_ar", "d_inventory", "d_prepaid", "d_ap",
                                      "d_accrued", "d_other_liabilities"))
        y["cfi"] = y["capex"] + y["other_investing"]
        y["cash_begin"] = prev["cash"]
        floor = r(rev * 0.03)
        short = floor - (prev["cash"] + y["cfo"] + y["cfi"] + y["debt_repaid"] + y["dividends"] + y["buybacks"]
                         + y["debt_issued"])
        if short > 0:  # borrow what the year would otherwise lack
            y["debt_issued"] += short + r(rev * 0.02)
        y["cff"] = y["debt_issued"] + y["debt_repaid"] + y["dividends"] + y["buybacks"]
        y["net_change"] = y["cfo"] + y["cfi"] + y["cff"]
        y["cash_end"] = y["cash_begin"] + y["net_change"]
        y["cash"] = y["cash_end"]
        debt = prev["current_debt"] + prev["long_term_debt"] + y["debt_issued"] + y["debt_repaid"]
        y["current_debt"] = r(debt * u(0.05, 0.2))
        y["long_term_debt"] = debt - y["current_debt"]
        y["paid_in"] = prev["paid_in"] + y["sbc"]
        y["retained"] = prev["retained"] + y["net_income"] + y["dividends"]
        y["treasury"] = prev["treasury"] + y["buybacks"]
        _subtotals(y)
        shares = max(5, r(shares * (1 + (u(-0.03, 0.0) if y["buybacks"] else u(0.0, 0.02)))))
        y["shares"] = shares
        y["eps"] = round(y["net_income"] / shares, 2)
        for key in vals:
            vals[key].append(y[key])
        prev, rev_prev = y, rev
    return Financials(company, list(range(last_year - years + 1, last_year + 1)), rng.choice((12, 12, 12, 6, 9, 3, 1)),
                      scale, vals, {k: o[k] for k in BALANCE_KEYS})


def _subtotals(b: dict[str, float]) -> None:
    b["current_assets"] = b["cash"] + b["ar"] + b["inventory"] + b["prepaid"]
    b["total_assets"] = b["current_assets"] + b["ppe"] + b["goodwill"] + b["other_assets"]
    b["current_liabilities"] = b["ap"] + b["accrued"] + b["current_debt"]
    b["total_liabilities"] = b["current_liabilities"] + b["long_term_debt"] + b["other_liabilities"]
    b["equity"] = b["paid_in"] + b["retained"] + b["treasury"]
    b["liabilities_and_equity"] = b["total_liabilities"] + b["equity"]


# --- the identities ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class Identity:
    name: str
    terms: tuple[tuple[Cell, int], ...]  # sum(coefficient * value) == 0

    def residual(self, fin: Financials) -> float:
        return sum(c * fin[cell] for cell, c in self.terms)


def _eq(name: str, total: Cell, parts: list[tuple[Cell, int]]) -> Identity:
    return Identity(name, ((total, 1), *((cell, -c) for cell, c in parts)))


def identities(n_years: int, with_opening: bool = False) -> list[Identity]:
    """The accounting identities of ``n_years`` of statements. Year-over-year ones start at the
    second year unless ``with_opening`` (the first year then links to the unshown opening sheet)."""
    out: list[Identity] = []
    for i in range(n_years):
        def c(key: str, j: int = i) -> Cell:
            return (key, j)

        y = f"year {i}"
        out += [
            _eq(f"gross profit, {y}", c("gross_profit"), [(c("revenue"), 1), (c("cogs"), -1)]),
            _eq(f"operating income, {y}", c("operating_income"),
                [(c("gross_profit"), 1), (c("sga"), -1), (c("rnd"), -1), (c("da"), -1)]),
            _eq(f"pretax income, {y}", c("pretax"), [(c("operating_income"), 1), (c("interest"), -1)]),
            _eq(f"net income, {y}", c("net_income"), [(c("pretax"), 1), (c("tax"), -1)]),
            _eq(f"current assets, {y}", c("current_assets"),
                [(c("cash"), 1), (c("ar"), 1), (c("inventory"), 1), (c("prepaid"), 1)]),
            _eq(f"total assets, {y}", c("total_assets"),
                [(c("current_assets"), 1), (c("ppe"), 1), (c("goodwill"), 1), (c("other_assets"), 1)]),
            _eq(f"current liabilities, {y}", c("current_liabilities"),
                [(c("ap"), 1), (c("accrued"), 1), (c("current_debt"), 1)]),
            _eq(f"total liabilities, {y}", c("total_liabilities"),
                [(c("current_liabilities"), 1), (c("long_term_debt"), 1), (c("other_liabilities"), 1)]),
            _eq(f"stockholders' equity, {y}", c("equity"), [(c("paid_in"), 1), (c("retained"), 1), (c("treasury"), 1)]),
            _eq(f"liabilities and equity, {y}", c("liabilities_and_equity"),
                [(c("total_liabilities"), 1), (c("equity"), 1)]),
            _eq(f"assets = liabilities + equity, {y}", c("total_assets"), [(c("liabilities_and_equity"), 1)]),
            _eq(f"net income carried to cash flows, {y}", c("cf_net_income"), [(c("net_income"), 1)]),
            _eq(f"depreciation carried to cash flows, {y}", c("cf_da"), [(c("da"), 1)]),
            _eq(f"operating cash flow, {y}", c("cfo"), [(c(k), 1) for k in (
                "cf_net_income", "cf_da", "sbc", "d_ar", "d_inventory", "d_prepaid", "d_ap", "d_accrued",
                "d_other_liabilities")]),
            _eq(f"investing cash flow, {y}", c("cfi"), [(c("capex"), 1), (c("other_investing"), 1)]),
            _eq(f"financing cash flow, {y}", c("cff"),
                [(c("debt_issued"), 1), (c("debt_repaid"), 1), (c("dividends"), 1), (c("buybacks"), 1)]),
            _eq(f"net change in cash, {y}", c("net_change"), [(c("cfo"), 1), (c("cfi"), 1), (c("cff"), 1)]),
            _eq(f"ending cash, {y}", c("cash_end"), [(c("cash_begin"), 1), (c("net_change"), 1)]),
            _eq(f"cash flow ties to the balance sheet, {y}", c("cash_end"), [(c("cash"), 1)]),
        ]
        if i == 0 and not with_opening:
            continue
        p = i - 1
        out += [
            _eq(f"beginning cash, {y}", c("cash_begin"), [(c("cash", p), 1)]),
            _eq(f"retained earnings roll-forward, {y}", c("retained"),
                [(c("retained", p), 1), (c("net_income"), 1), (c("dividends"), 1)]),
            _eq(f"PP&E roll-forward, {y}", c("ppe"), [(c("ppe", p), 1), (c("capex"), -1), (c("da"), -1)]),
            _eq(f"debt roll-forward, {y}", c("long_term_debt"), [(c("long_term_debt", p), 1), (c("current_debt", p), 1),
                                                                  (c("debt_issued"), 1), (c("debt_repaid"), 1),
                                                                  (c("current_debt"), -1)]),
            _eq(f"paid-in capital roll-forward, {y}", c("paid_in"), [(c("paid_in", p), 1), (c("sbc"), 1)]),
            _eq(f"treasury stock roll-forward, {y}", c("treasury"), [(c("treasury", p), 1), (c("buybacks"), 1)]),
            _eq(f"goodwill unchanged, {y}", c("goodwill"), [(c("goodwill", p), 1)]),
            _eq(f"other non-current assets roll-forward, {y}", c("other_assets"),
                [(c("other_assets", p), 1), (c("other_investing"), -1)]),
        ]
        for key, asset in (("ar", True), ("inventory", True), ("prepaid", True), ("ap", False), ("accrued", False),
                           ("other_liabilities", False)):
            s = -1 if asset else 1  # an asset's increase uses cash; a liability's provides it
            out.append(_eq(f"{LINE[key].label} change, {y}", c(f"d_{key}"), [(c(key), s), (c(key, p), -s)]))
    return out


def violations(fin: Financials, with_opening: bool = False) -> list[str]:
    """The identities that do not hold, each with its residual."""
    return [f"{eq.name}: off by {eq.residual(fin):,.0f}" for eq in identities(len(fin.years), with_opening)
            if eq.residual(fin) != 0]


# --- planted errors -----------------------------------------------------------------------------------

def pinned_cells(n_years: int) -> list[Cell]:
    """Shown cells that one wrong figure could be traced back to unambiguously (module docstring)."""
    columns: dict[Cell, dict[int, int]] = {}
    for k, eq in enumerate(identities(n_years)):
        for cell, coef in eq.terms:
            columns.setdefault(cell, {})[k] = coef

    def signature(col: dict[int, int]) -> tuple[tuple[int, int], ...]:
        first = next(iter(sorted(col.items())))[1]
        return tuple(sorted((k, v * first) for k, v in col.items()))  # normalised: proportional columns agree

    seen: dict[tuple[tuple[int, int], ...], list[Cell]] = {}
    for cell, col in columns.items():
        seen.setdefault(signature(col), []).append(cell)
    return sorted(cells[0] for cells in seen.values() if len(cells) == 1)


@dataclass(frozen=True)
class PlantedError:
    cell: Cell
    shown: float  # the altered figure
    correct: float  # what it should be


def plant_error(rng: random.Random, fin: Financials) -> tuple[Financials, PlantedError]:
    """A copy of ``fin`` with one pinned, nonzero figure altered (a transposition of two digits, or
    a slip of one digit), and the alteration."""
    cells = [c for c in pinned_cells(len(fin.years)) if fin[c] != 0 and abs(fin[c]) >= 10]
    cell = rng.choice(cells)
    right = int(fin[cell])
    wrong = _slip(rng, right)
    out = fin.copy()
    out.values[cell[0]][cell[1]] = wrong
    return out, PlantedError(cell, wrong, right)


def _slip(rng: random.Random, value: int) -> int:
    """A transposition of two adjacent digits, or one of the three leading digits off by 1-3:
    never a difference of less than 9, which could pass for rounding."""
    digits = str(abs(value))
    sign = 1 if value > 0 else -1
    pairs = [i for i in range(len(digits) - 1) if digits[i] != digits[i + 1] and (i or digits[i + 1] != "0")]
    if pairs and rng.random() < 0.5:
        i = rng.choice(pairs)
        return sign * int(digits[:i] + digits[i + 1] + digits[i] + digits[i + 2:])
    place = 10 ** rng.randrange(max(1, len(digits) - 3), len(digits))
    step = rng.choice((-3, -2, -1, 1, 2, 3)) * place
    if abs(value + step) < place or (value + step > 0) != (value > 0):
        step = abs(step) * sign
    return value + step
