"""Questions over generated statements, each with the answer key that checks it.

A generator takes a random stream and a company's :class:`~.statements.Financials` and returns a
:class:`Question`: the document the model reads (statements, a credit agreement's definitions,
or nothing for a plain time-value problem), the question with its stated unit, rounding and sign
convention, and an :class:`~.verifier.AnswerKey` whose values are exact (unrounded) and computed
from the figures as printed. Time-value answers come from ``numpy-financial``.

Kinds and tiers (:data:`GENERATORS` lists which generator serves which pair):

* ``margin``: gross, operating, net margin (easy); EBITDA margin, effective tax rate, free-cash-flow
  margin, as a percentage or a decimal fraction (medium); one margin in two years and its change
  in percentage points (hard, three parts).
* ``ratio``: current ratio, debt to equity (easy); return on average equity, interest coverage,
  days sales outstanding, days inventory, quick ratio, asset turnover, payout ratio (medium).
* ``growth``: year-over-year revenue growth (easy); compound annual growth, net income and EPS
  growth, signed (medium).
* ``working_capital``: working capital in the statements' unit (easy); the change in operating
  working capital, free cash flow or net debt in another unit than the statements' (medium).
* ``tvm``: loan payment, present value of an annuity, future value of savings (medium); a
  project's NPV and IRR, and a discounted-cash-flow value of projected free cash flow (hard).
* ``covenant``: a credit agreement's definitions (EBITDA with or without stock compensation
  added back, total or net debt with a cash-netting cap, step-down thresholds), then the ratio
  and whether each covenant is met (hard, two or four parts).
* ``inconsistency``: one figure altered (:func:`~.statements.plant_error`); the line, the year
  and the right figure (hard, three parts).

A generator that does not apply to a company (no dividends to compute a payout ratio from, a
loss where a tax rate is asked) raises :class:`NotApplicable`, and the task source draws again.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import numpy_financial as npf

from practicum.domains.finance.statements import LINE, Financials, plant_error
from practicum.domains.finance.verifier import AnswerKey, Part, ScaleName

Kind = Literal["margin", "ratio", "growth", "working_capital", "tvm", "covenant", "inconsistency"]
Tier = Literal["easy", "medium", "hard"]
KINDS: tuple[Kind, ...] = ("margin", "ratio", "growth", "working_capital", "tvm", "covenant", "inconsistency")
TIERS: tuple[Tier, ...] = ("easy", "medium", "hard")
NEXT_SCALE: dict[str, tuple[ScaleName, float]] = {"thousands": ("millions", 1e3), "millions": ("billions", 1e3)}


class NotApplicable(Exception):
    """This generator cannot ask its question about these statements."""


@dataclass
class Question:
    kind: Kind
    tier: Tier
    name: str  # the metric or problem, e.g. "current_ratio"
    text: str  # the question, with its unit, rounding and sign convention
    key: AnswerKey
    statements: Financials | None = None  # shown before the question (None: a plain problem)
    agreement: str | None = None  # a credit agreement excerpt shown after the statements


def v(fin: Financials, key: str, year: int) -> float:
    return fin.values[key][fin.year_index(year)]


def _year(rng: random.Random, fin: Financials, need_prior: bool = False) -> int:
    years = fin.years[1:] if need_prior else fin.years
    return rng.choice(years)


def _pct_or_fraction(rng: random.Random, value: float, medium: bool) -> tuple[Part, str]:
    """A ratio asked as a percentage (1 decimal) or, at medium tier and above sometimes, as a
    decimal fraction (3 decimals)."""
    if medium and rng.random() < 0.3:
        return Part(kind="fraction", value=value, decimals=3), "as a decimal fraction (e.g. 0.125 for 12.5%), rounded to 3 decimal places"
    return Part(kind="percent", value=100 * value, decimals=1), "as a percentage rounded to 1 decimal place"


def _nonzero(x: float) -> float:
    if x == 0:
        raise NotApplicable("division by zero")
    return x


def _unit(fin: Financials) -> str:
    return f"in {fin.unit_words}"


# --- margin ---------------------------------------------------------------------------------------

MARGINS = {
    "gross_margin": ("gross margin", "gross profit divided by revenue", lambda f, y: v(f, "gross_profit", y)),
    "operating_margin": ("operating margin", "operating income divided by revenue", lambda f, y: v(f, "operating_income", y)),
    "net_margin": ("net margin", "net income divided by revenue", lambda f, y: v(f, "net_income", y)),
}


def margin_easy(rng: random.Random, fin: Financials) -> Question:
    name = rng.choice(list(MARGINS))
    label, formula, num = MARGINS[name]
    y = _year(rng, fin)
    value = num(fin, y) / _nonzero(v(fin, "revenue", y))
    part, how = _pct_or_fraction(rng, value, medium=False)
    text = f"What was the company's {label} ({formula}) for fiscal {y}? Give it {how}; a negative margin is negative."
    return Question("margin", "easy", name, text, AnswerKey(parts=[part]), fin)


def margin_medium(rng: random.Random, fin: Financials) -> Question:
    name = rng.choice(["ebitda_margin", "effective_tax_rate", "fcf_margin"])
    y = _year(rng, fin)
    rev = _nonzero(v(fin, "revenue", y))
    if name == "ebitda_margin":
        value = (v(fin, "operating_income", y) + v(fin, "da", y)) / rev
        text = (f"What was the company's EBITDA margin for fiscal {y}, with EBITDA defined as operating income plus "
                "depreciation and amortization?")
    elif name == "effective_tax_rate":
        if v(fin, "pretax", y) <= 0:
            raise NotApplicable("no pre-tax income")
        value = v(fin, "tax", y) / v(fin, "pretax", y)
        text = f"What was the company's effective income tax rate for fiscal {y} (provision for income taxes divided by income before income taxes)?"
    else:
        value = (v(fin, "cfo", y) + v(fin, "capex", y)) / rev
        text = (f"What was the company's free-cash-flow margin for fiscal {y}? Free cash flow is net cash provided by "
                "operating activities minus purchases of property, plant and equipment; divide it by revenue.")
    part, how = _pct_or_fraction(rng, value, medium=True)
    return Question("margin", "medium", name, f"{text} Give it {how}; a negative value is negative.", AnswerKey(parts=[part]), fin)


def margin_hard(rng: random.Random, fin: Financials) -> Question:
    name = rng.choice(list(MARGINS))
    label, formula, num = MARGINS[name]
    y1 = _year(rng, fin, need_prior=True)
    y0 = y1 - 1
    m0 = 100 * num(fin, y0) / _nonzero(v(fin, "revenue", y0))
    m1 = 100 * num(fin, y1) / _nonzero(v(fin, "revenue", y1))
    text = (f"Compute the company's {label} ({formula}) for (a) fiscal {y0} and (b) fiscal {y1}, each as a percentage "
            f"rounded to 1 decimal place, and (c) the change from {y0} to {y1} in percentage points, rounded to 1 decimal "
            "place (negative for a decline), computed from the unrounded margins.")
    parts = [Part(label="a", kind="percent", value=m0, decimals=1, weight=0.3),
             Part(label="b", kind="percent", value=m1, decimals=1, weight=0.3),
             Part(label="c", kind="percent", value=m1 - m0, decimals=1, weight=0.4)]
    return Question("margin", "hard", f"{name}_change", text, AnswerKey(parts=parts), fin)


# --- ratio ------------------------------------------------------------------------------------------

def ratio_easy(rng: random.Random, fin: Financials) -> Question:
    y = _year(rng, fin)
    if rng.random() < 0.5:
        value = v(fin, "current_assets", y) / _nonzero(v(fin, "current_liabilities", y))
        name, text = "current_ratio", f"What was the company's current ratio (total current assets divided by total current liabilities) at the end of fiscal {y}?"
    else:
        eq = v(fin, "equity", y)
        if eq <= 0:
            raise NotApplicable("negative equity")
        value = (v(fin, "current_debt", y) + v(fin, "long_term_debt", y)) / eq
        name = "debt_to_equity"
        text = (f"What was the company's debt-to-equity ratio at the end of fiscal {y}? Debt is the current portion of "
                "long-term debt plus long-term debt, net of current portion; equity is total stockholders' equity.")
    return Question("ratio", "easy", name, f"{text} Round to 2 decimal places.",
                    AnswerKey(parts=[Part(kind="ratio", value=value, decimals=2)]), fin)


def ratio_medium(rng: random.Random, fin: Financials) -> Question:
    name = rng.choice(["roe", "interest_coverage", "dso", "dio", "quick_ratio", "asset_turnover", "payout_ratio"])
    y = _year(rng, fin, need_prior=name in ("roe", "asset_turnover"))
    p = y - 1
    part: Part
    if name == "roe":
        avg = (v(fin, "equity", y) + v(fin, "equity", p)) / 2
        if avg <= 0:
            raise NotApplicable("negative equity")
        part, how = _pct_or_fraction(rng, v(fin, "net_income", y) / avg, medium=True)
        text = (f"What was the company's return on average equity for fiscal {y}: net income for the year divided by the "
                f"average of total stockholders' equity at the end of fiscal {p} and fiscal {y}? Give it {how}; a "
                "negative return is negative.")
    elif name == "interest_coverage":
        value = v(fin, "operating_income", y) / _nonzero(v(fin, "interest", y))
        part = Part(kind="ratio", value=value, decimals=2)
        text = (f"What was the company's interest coverage ratio for fiscal {y} (operating income divided by interest "
                "expense)? Round to 2 decimal places; a negative ratio is negative.")
    elif name == "dso":
        value = v(fin, "ar", y) / _nonzero(v(fin, "revenue", y)) * 365
        part = Part(kind="number", value=value, decimals=1, unit="days")
        text = (f"What were the company's days sales outstanding for fiscal {y}, computed as accounts receivable, net "
                "at year end divided by revenue for the year, times 365? Give the number of days rounded to 1 decimal place.")
    elif name == "dio":
        value = v(fin, "inventory", y) / _nonzero(v(fin, "cogs", y)) * 365
        part = Part(kind="number", value=value, decimals=1, unit="days")
        text = (f"What were the company's days of inventory on hand for fiscal {y}, computed as inventories at year end "
                "divided by cost of revenue for the year, times 365? Give the number of days rounded to 1 decimal place.")
    elif name == "quick_ratio":
        value = (v(fin, "cash", y) + v(fin, "ar", y)) / _nonzero(v(fin, "current_liabilities", y))
        part = Part(kind="ratio", value=value, decimals=2)
        text = (f"What was the company's quick ratio at the end of fiscal {y}: cash and cash equivalents plus accounts "
                "receivable, net, divided by total current liabilities? Round to 2 decimal places.")
    elif name == "asset_turnover":
        avg = (v(fin, "total_assets", y) + v(fin, "total_assets", p)) / 2
        part = Part(kind="ratio", value=v(fin, "revenue", y) / avg, decimals=2)
        text = (f"What was the company's asset turnover for fiscal {y}: revenue divided by the average of total assets "
                f"at the end of fiscal {p} and fiscal {y}? Round to 2 decimal places.")
    else:
        ni, div = v(fin, "net_income", y), -v(fin, "dividends", y)
        if ni <= 0 or div <= 0:
            raise NotApplicable("no dividends or no profit")
        part, how = _pct_or_fraction(rng, div / ni, medium=True)
        text = f"What was the company's dividend payout ratio for fiscal {y} (dividends paid divided by net income)? Give it {how}."
    return Question("ratio", "medium", name, text, AnswerKey(parts=[part]), fin)


# --- growth ------------------------------------------------------------------------------------------

def growth_easy(rng: random.Random, fin: Financials) -> Question:
    y = _year(rng, fin, need_prior=True)
    value = 100 * (v(fin, "revenue", y) / v(fin, "revenue", y - 1) - 1)
    text = (f"By what percentage did the company's revenue change from fiscal {y - 1} to fiscal {y}? Give the change "
            "as a percentage rounded to 1 decimal place, negative for a decline.")
    return Question("growth", "easy", "revenue_growth", text,
                    AnswerKey(parts=[Part(kind="percent", value=value, decimals=1)]), fin)


def growth_medium(rng: random.Random, fin: Financials) -> Question:
    choices = ["net_income_growth", "eps_growth"] + (["revenue_cagr"] if len(fin.years) >= 3 else [])
    name = rng.choice(choices)
    if name == "revenue_cagr":
        first, last = fin.years[0], fin.years[-1]
        n = last - first
        value = 100 * ((v(fin, "revenue", last) / v(fin, "revenue", first)) ** (1 / n) - 1)
        text = (f"What was the compound annual growth rate of the company's revenue from fiscal {first} to fiscal {last} "
                f"({n} years of growth)? Give it as a percentage rounded to 2 decimal places, negative for a decline.")
        part = Part(kind="percent", value=value, decimals=2)
    else:
        key, label = ("net_income", "net income") if name == "net_income_growth" else ("eps", "diluted earnings per share")
        y = _year(rng, fin, need_prior=True)
        a, b = v(fin, key, y - 1), v(fin, key, y)
        if a <= 0:
            raise NotApplicable("growth from a loss")
        value = 100 * (b / a - 1)
        text = (f"By what percentage did the company's {label} change from fiscal {y - 1} to fiscal {y}? Use the "
                "figures as printed. Give the change as a percentage rounded to 1 decimal place, negative for a decline.")
        part = Part(kind="percent", value=value, decimals=1)
    return Question("growth", "medium", name, text, AnswerKey(parts=[part]), fin)


# --- working capital, free cash flow, net debt --------------------------------------------------------------

def working_capital_easy(rng: random.Random, fin: Financials) -> Question:
    y = _year(rng, fin)
    value = v(fin, "current_assets", y) - v(fin, "current_liabilities", y)
    text = (f"What was the company's working capital (total current assets minus total current liabilities) at the end "
            f"of fiscal {y}? Answer {_unit(fin)}, as a whole number, negative if current liabilities are larger.")
    return Question("working_capital", "easy", "working_capital", text,
                    AnswerKey(parts=[Part(kind="amount", value=value, scale=fin.scale, decimals=0)]), fin)


def working_capital_medium(rng: random.Random, fin: Financials) -> Question:
    name = rng.choice(["owc_change", "free_cash_flow", "net_debt"])
    y = _year(rng, fin, need_prior=name == "owc_change")
    scale, factor = NEXT_SCALE[fin.scale]
    decimals = 1 if scale == "millions" else 2
    if name == "owc_change":
        def owc(year: int) -> float:
            return (v(fin, "ar", year) + v(fin, "inventory", year) + v(fin, "prepaid", year)
                    - v(fin, "ap", year) - v(fin, "accrued", year))
        value = owc(y) - owc(y - 1)
        text = (f"Operating working capital is accounts receivable, net plus inventories plus prepaid expenses and other "
                f"current assets, minus accounts payable and accrued liabilities. By how much did it change from the end "
                f"of fiscal {y - 1} to the end of fiscal {y}? Negative for a decrease.")
    elif name == "free_cash_flow":
        value = v(fin, "cfo", y) + v(fin, "capex", y)
        text = (f"What was the company's free cash flow for fiscal {y}: net cash provided by operating activities minus "
                "purchases of property, plant and equipment? Negative if it was an outflow.")
    else:
        value = v(fin, "current_debt", y) + v(fin, "long_term_debt", y) - v(fin, "cash", y)
        text = (f"What was the company's net debt at the end of fiscal {y}: the current portion of long-term debt plus "
                "long-term debt, net of current portion, minus cash and cash equivalents? Negative if cash exceeds debt.")
    text += f" Answer in {scale} of U.S. dollars (the statements are in {fin.scale}), rounded to {decimals} decimal place{'s' if decimals > 1 else ''}."
    part = Part(kind="amount", value=value / factor, scale=scale, decimals=decimals)
    return Question("working_capital", "medium", name, text, AnswerKey(parts=[part]), fin)


# --- time value of money (numpy-financial is the ground truth) -------------------------------------------------

def tvm_medium(rng: random.Random, fin: Financials) -> Question:
    name = rng.choice(["loan_payment", "annuity_pv", "savings_fv"])
    co = fin.company.name
    if name == "loan_payment":
        principal = rng.randrange(20, 500) * 10_000
        rate = rng.choice(range(300, 1001, 25)) / 100
        years = rng.choice((3, 4, 5, 7, 10, 15, 20))
        value = float(npf.pmt(rate / 100 / 12, years * 12, -principal))
        text = (f"{co} finances equipment with a term loan of ${principal:,} at a fixed annual interest rate of "
                f"{rate:g}%, compounded monthly, repaid in equal monthly installments (paid at the end of each month) over "
                f"{years} years. What is the monthly payment, in U.S. dollars? Round to the nearest cent.")
        part = Part(kind="amount", value=value, scale="units", decimals=2)
    elif name == "annuity_pv":
        payment = rng.randrange(10, 500) * 1_000
        rate = rng.choice(range(200, 1201, 25)) / 100
        n = rng.randrange(3, 21)
        value = float(npf.pv(rate / 100, n, -payment))
        text = (f"{co} is offered a contract that pays ${payment:,} at the end of each year for {n} years. At a discount "
                f"rate of {rate:g}% a year, what is the contract worth today, in U.S. dollars? Round to the nearest dollar.")
        part = Part(kind="amount", value=value, scale="units", decimals=0)
    else:
        deposit = rng.randrange(5, 200) * 1_000
        rate = rng.choice(range(100, 901, 25)) / 100
        n = rng.randrange(3, 31)
        value = float(npf.fv(rate / 100, n, -deposit, 0))
        text = (f"{co} sets aside ${deposit:,} at the end of each year in a fund that earns {rate:g}% a year, compounded "
                f"annually. What is the fund's balance right after the {n}th deposit, in U.S. dollars? Round to the nearest dollar.")
        part = Part(kind="amount", value=value, scale="units", decimals=0)
    return Question("tvm", "medium", name, text, AnswerKey(parts=[part]))


def tvm_hard(rng: random.Random, fin: Financials) -> Question:
    if rng.random() < 0.5:
        return _npv_irr(rng, fin)
    return _dcf(rng, fin)


def _npv_irr(rng: random.Random, fin: Financials) -> Question:
    n = rng.randrange(3, 8)
    invest = rng.randrange(50, 2000) * 100  # thousands of dollars
    yearly = invest * rng.uniform(0.22, 0.45)
    flows = [-invest] + [round(yearly * rng.uniform(0.7, 1.3)) for _ in range(n)]
    irr = float(npf.irr(flows))
    if not -0.5 < irr < 1.0:
        raise NotApplicable("no sensible IRR")
    rate = rng.choice(range(500, 1501, 50)) / 100
    npv = float(npf.npv(rate / 100, flows))
    shown = ", ".join(f"year {t}: {f:,}" for t, f in enumerate(flows))
    text = (f"{fin.company.name} is evaluating a project with these cash flows, in thousands of U.S. dollars (year 0 is "
            f"today; later flows arrive at the end of each year; a negative flow is an outlay): {shown}. "
            f"(a) What is the project's net present value at a discount rate of {rate:g}% a year, in thousands of U.S. "
            "dollars, rounded to 1 decimal place (negative if it destroys value)? (b) What is its internal rate of "
            "return, as a percentage rounded to 2 decimal places?")
    parts = [Part(label="a", kind="amount", value=npv, scale="thousands", decimals=1, weight=0.5),
             Part(label="b", kind="percent", value=100 * irr, decimals=2, weight=0.5)]
    return Question("tvm", "hard", "npv_irr", text, AnswerKey(parts=parts))


def _dcf(rng: random.Random, fin: Financials) -> Question:
    y = fin.years[-1]
    fcf = v(fin, "cfo", y) + v(fin, "capex", y)
    if fcf <= 0:
        raise NotApplicable("negative free cash flow")
    g = rng.choice(range(0, 121, 5)) / 10
    r = rng.choice(range(70, 141, 5)) / 10
    projected = [fcf * (1 + g / 100) ** t for t in range(1, 6)]
    value = float(npf.npv(r / 100, [0.0, *projected]))
    text = (f"(a) What was the company's free cash flow for fiscal {y} (net cash provided by operating activities minus "
            f"purchases of property, plant and equipment), {_unit(fin)}, as a whole number? (b) Suppose free cash flow "
            f"grows {g:g}% a year for the next five years, starting from fiscal {y}'s (so the first projected year is "
            f"fiscal {y} free cash flow times {1 + g / 100:g}), and each year's flow arrives at the end of that year. "
            f"Discounted at {r:g}% a year, what is the present value of those five flows at the end of fiscal {y}, "
            f"{_unit(fin)}? Round to a whole number; answers within 0.05% are accepted.")
    parts = [Part(label="a", kind="amount", value=fcf, scale=fin.scale, decimals=0, weight=0.4),
             Part(label="b", kind="amount", value=value, scale=fin.scale, decimals=0,
                  tolerance=max(0.5, 0.0005 * abs(value)), weight=0.6)]
    return Question("tvm", "hard", "dcf", text, AnswerKey(parts=parts), fin)


# --- covenants -------------------------------------------------------------------------------------------------

AGENTS = ("JPMorgan Chase Bank, N.A.", "Bank of America, N.A.", "Wells Fargo Bank, National Association",
          "Citibank, N.A.", "U.S. Bank National Association", "PNC Bank, National Association",
          "Truist Bank", "MUFG Bank, Ltd.")


def covenant_hard(rng: random.Random, fin: Financials) -> Question:
    y = _year(rng, fin)
    add_sbc = rng.random() < 0.5
    net_cash = rng.random() < 0.5
    coverage_on_ebit = rng.random() < 0.3
    both = rng.random() < 0.5
    ni, interest, tax, da, sbc = (v(fin, k, y) for k in ("net_income", "interest", "tax", "da", "sbc"))
    ebitda = ni + interest + tax + da + (sbc if add_sbc else 0)
    if ebitda <= 0 or interest <= 0:
        raise NotApplicable("no EBITDA or no interest")
    debt = v(fin, "current_debt", y) + v(fin, "long_term_debt", y)
    cash = v(fin, "cash", y)
    cap = _round_sig(cash * rng.uniform(0.3, 1.3), 2)
    netted = min(cash, cap) if net_cash else 0.0
    leverage = (debt - netted) / ebitda
    coverage = (ni + interest + tax if coverage_on_ebit else ebitda) / interest
    if not 0.2 <= leverage <= 8 or not 0.5 <= coverage <= 40:
        raise NotApplicable("ratios no lender would write a covenant around")
    scale = fin.unit_words.replace(" of U.S. dollars", "")
    step_down = rng.random() < 0.4 and y > fin.years[0]
    lev_max, lev_text = _threshold(rng, leverage, upper=True)
    if step_down:  # the test year falls under the later, tighter step
        early = lev_max + 0.5
        lev_text = (f"{early:.2f} to 1.00 for any fiscal year ending on or before {fin.period_end(y - 1)}, and "
                    f"{lev_max:.2f} to 1.00 for any fiscal year ending thereafter")
    cov_min, cov_text = _threshold(rng, coverage, upper=False)
    sbc_def = (", and (d) non-cash stock-based compensation expense" if add_sbc else "")
    defs = [
        '"Consolidated EBITDA" means, for any period, Consolidated Net Income for such period plus, without duplication '
        "and to the extent deducted in determining such Consolidated Net Income, (a) Consolidated Interest Expense, "
        f"(b) the provision for income taxes, (c) depreciation and amortization expense{sbc_def}."
        + ("" if add_sbc else " For the avoidance of doubt, stock-based compensation expense is not added back."),
        '"Consolidated Interest Expense" means, for any period, the total interest expense of the Borrower and its '
        "Subsidiaries for such period, determined on a consolidated basis in accordance with GAAP.",
        '"Consolidated Net Income" means, for any period, the net income (or loss) of the Borrower and its '
        "Subsidiaries for such period, determined on a consolidated basis in accordance with GAAP.",
        '"Consolidated Total Debt" means, as of any date, the aggregate principal amount of all Indebtedness for '
        "borrowed money of the Borrower and its Subsidiaries outstanding on such date, including the current portion thereof.",
    ]
    if net_cash:
        defs.append('"Unrestricted Cash" means, as of any date, the cash and cash equivalents of the Borrower and its '
                    f"Subsidiaries on such date; provided that Unrestricted Cash shall not exceed {cap:,.0f} ({scale} of "
                    "U.S. dollars) for any purpose of this Agreement.")
    lev_num = "Consolidated Total Debt minus Unrestricted Cash" if net_cash else "Consolidated Total Debt"
    defs.append(f'"Consolidated Leverage Ratio" means, as of the last day of any fiscal year, the ratio of (a) {lev_num} '
                "as of such day to (b) Consolidated EBITDA for the fiscal year then ended.")
    cov_num = ("Consolidated EBITDA minus depreciation and amortization expense" if coverage_on_ebit and not add_sbc else
               "Consolidated Net Income plus Consolidated Interest Expense plus the provision for income taxes"
               if coverage_on_ebit else "Consolidated EBITDA")
    defs.append(f'"Consolidated Interest Coverage Ratio" means, for any fiscal year, the ratio of (a) {cov_num} for '
                "such fiscal year to (b) Consolidated Interest Expense for such fiscal year.")
    agent = rng.choice(AGENTS)
    agreement = "\n\n".join([
        f"EXCERPT FROM THE CREDIT AGREEMENT dated as of {fin.period_end(fin.years[0] - 1)} among {fin.company.name}, as "
        f"Borrower, the Lenders party hereto, and {agent}, as Administrative Agent",
        "Section 1.01 Defined Terms.\n" + "\n".join(sorted(defs)),
        "Section 7.11 Financial Covenants.\n"
        f"(a) Maximum Consolidated Leverage Ratio. The Borrower shall not permit the Consolidated Leverage Ratio as of "
        f"the last day of any fiscal year to exceed {lev_text}.\n"
        f"(b) Minimum Consolidated Interest Coverage Ratio. The Borrower shall not permit the Consolidated Interest "
        f"Coverage Ratio for any fiscal year to be less than {cov_text}.",
    ])
    lev_q = (f"What is the Consolidated Leverage Ratio as of the last day of fiscal {y}, as defined in the Credit "
             "Agreement, rounded to 2 decimal places?")
    cov_q = (f"What is the Consolidated Interest Coverage Ratio for fiscal {y}, as defined in the Credit Agreement, "
             "rounded to 2 decimal places?")
    if both:
        text = (f"Apply the Credit Agreement's definitions to the fiscal {y} statements. (a) {lev_q} (b) Is the covenant in "
                f"Section 7.11(a) met for fiscal {y}? Answer yes or no. (c) {cov_q} (d) Is the covenant in Section 7.11(b) "
                f"met for fiscal {y}? Answer yes or no.")
        parts = [Part(label="a", kind="ratio", value=leverage, decimals=2, weight=0.3),
                 Part(label="b", kind="boolean", value=leverage <= lev_max, weight=0.2),
                 Part(label="c", kind="ratio", value=coverage, decimals=2, weight=0.3),
                 Part(label="d", kind="boolean", value=coverage >= cov_min, weight=0.2)]
        name = "leverage_and_coverage"
    elif rng.random() < 0.6:
        text = (f"Apply the Credit Agreement's definitions to the fiscal {y} statements. (a) {lev_q} (b) Is the covenant "
                f"in Section 7.11(a) met for fiscal {y}? Answer yes or no.")
        parts = [Part(label="a", kind="ratio", value=leverage, decimals=2, weight=0.6),
                 Part(label="b", kind="boolean", value=leverage <= lev_max, weight=0.4)]
        name = "leverage_covenant"
    else:
        text = (f"Apply the Credit Agreement's definitions to the fiscal {y} statements. (a) {cov_q} (b) Is the covenant "
                f"in Section 7.11(b) met for fiscal {y}? Answer yes or no.")
        parts = [Part(label="a", kind="ratio", value=coverage, decimals=2, weight=0.6),
                 Part(label="b", kind="boolean", value=coverage >= cov_min, weight=0.4)]
        name = "coverage_covenant"
    return Question("covenant", "hard", name, text, AnswerKey(parts=parts), fin, agreement)


def _round_sig(x: float, digits: int) -> float:
    if x <= 0:
        return 0.0
    return float(f"{x:.{digits}g}")


def _threshold(rng: random.Random, actual: float, upper: bool) -> tuple[float, str]:
    """A covenant level near ``actual``, met or not with even odds, never within 0.03 of it (so
    that a ratio rounded to 2 decimals decides the test)."""
    for _ in range(20):
        met = rng.random() < 0.5
        off = actual * rng.uniform(0.05, 0.3) + 0.1
        level = actual + off if met == upper else actual - off
        level = round(level * 4) / 4  # quarter turns, as agreements write them
        if level > 0.25 and abs(level - actual) >= 0.03:
            return level, f"{level:.2f} to 1.00"
    raise NotApplicable("no covenant level far enough from the ratio")


# --- planted inconsistencies -------------------------------------------------------------------------------------

def inconsistency_hard(rng: random.Random, fin: Financials) -> Question:
    bad, err = plant_error(rng, fin)
    key, i = err.cell
    line = LINE[key]
    year = fin.years[i]
    text = ("Exactly one figure in these statements was altered after they were prepared, so that they no longer tie: "
            "every subtotal and total, total assets = total liabilities + stockholders' equity, the cash-flow "
            "reconciliation (operating + investing + financing = net change; beginning cash + net change = ending cash "
            "= the balance sheet's cash), net income and depreciation carried to the cash-flow statement, and the "
            "year-to-year roll-forwards (retained earnings, PP&E, debt, paid-in capital, treasury stock, working-capital "
            "lines) held before. (a) Which line item holds the altered figure? Give its label as printed. (b) In which "
            f"fiscal year's column? (c) What should the figure be, {_unit(fin)}, as a whole number (negative if it "
            "should print in parentheses)?")
    parts = [Part(label="a", kind="text", value=line.label, aliases=_aliases(line.label), weight=0.4),
             Part(label="b", kind="year", value=year, weight=0.3),
             Part(label="c", kind="amount", value=err.correct, scale=fin.scale, decimals=0, weight=0.3)]
    return Question("inconsistency", "hard", f"altered_{key}", text, AnswerKey(parts=parts), bad)


def _aliases(label: str) -> list[str]:
    out = {re.sub(r"\s*\([^)]*\)", "", label).strip(), label.replace(", net", "").strip(),
           re.sub(r"\s*\([^)]*\)", "", label).replace(", net", "").strip()}
    out.discard(label)
    return sorted(out)


# --- the registry ----------------------------------------------------------------------------------------------------

Generator = Callable[[random.Random, Financials], Question]


GENERATORS: dict[tuple[Kind, Tier], Generator] = {
    ("margin", "easy"): margin_easy,
    ("margin", "medium"): margin_medium,
    ("margin", "hard"): margin_hard,
    ("ratio", "easy"): ratio_easy,
    ("ratio", "medium"): ratio_medium,
    ("growth", "easy"): growth_easy,
    ("growth", "medium"): growth_medium,
    ("working_capital", "easy"): working_capital_easy,
    ("working_capital", "medium"): working_capital_medium,
    ("tvm", "medium"): tvm_medium,
    ("tvm", "hard"): tvm_hard,
    ("covenant", "hard"): covenant_hard,
    ("inconsistency", "hard"): inconsistency_hard,
}
