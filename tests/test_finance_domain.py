"""The finance domain: statements whose accounting identities hold, planted errors that one fix
explains, numpy-financial ground truth checked against closed forms, the verifier's reading of
units, scale words, percent signs, signs and rounding, task files and their errors, the
held-out split, prompt budgets measured with the embedded model's tokenizer, and the CLI."""

from __future__ import annotations

import asyncio
import json
import random
import re
from pathlib import Path
from typing import Any

import numpy_financial as npf
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from practicum.cli import app
from practicum.config import DomainSection
from practicum.domains import build_domain, get_plugin
from practicum.domains.finance import questions as q
from practicum.domains.finance.companies import companies
from practicum.domains.finance.env import estimate_tokens
from practicum.domains.finance.statements import (
    LINE,
    Financials,
    generate,
    identities,
    pinned_cells,
    plant_error,
    violations,
)
from practicum.domains.finance.verifier import AnswerKey, Part, check
from practicum.domains.plugin import BuildContext
from practicum.errors import ConfigError, TaskError
from practicum.records import Task

runner = CliRunner()
plugin = get_plugin("finance")


def section(**kw: Any) -> DomainSection:
    return DomainSection.model_validate({"name": "finance", "env": "finance", **kw})


def fin_of(seed: int, years: int = 3, scale: str = "millions") -> Financials:
    rng = random.Random(seed)
    return generate(rng, rng.choice(companies()), years, 2024, scale)  # type: ignore[arg-type]


def verify(task: Task, answer: str):  # type: ignore[no-untyped-def]
    return asyncio.run(plugin.verify(task, answer, BuildContext()))


# --- companies ---------------------------------------------------------------------------------------------

def test_companies_are_real_listings_with_ciks() -> None:
    cos = companies()
    assert len(cos) == 500
    by = {c.ticker: c for c in cos}
    assert by["AAPL"].cik == "0000320193" and by["MSFT"].cik == "0000789019"  # SEC's own identifiers
    assert len({c.cik for c in cos}) == 500 and {c.exchange for c in cos} == {"NYSE", "Nasdaq"}


# --- statements: the identities hold (property-style over many seeds) ----------------------------------------

@settings(max_examples=150, deadline=None)
@given(seed=st.integers(0, 2**31), years=st.integers(2, 5), scale=st.sampled_from(["thousands", "millions"]))
def test_generated_statements_satisfy_the_accounting_identities(seed: int, years: int, scale: str) -> None:
    f = fin_of(seed, years, scale)
    assert violations(f, with_opening=True) == []
    for i in range(years):  # the headline identities, written out independently of identities()
        def g(k: str, j: int = i) -> float:
            return f[(k, j)]

        assert g("total_assets") == g("total_liabilities") + g("equity")
        assert g("cfo") + g("cfi") + g("cff") == g("net_change")
        assert g("cash_begin") + g("net_change") == g("cash_end") == g("cash")
        assert g("retained") == g("retained", i - 1) + g("net_income") + g("dividends")
        assert g("cash_begin") == g("cash", i - 1)
        assert g("ppe") == g("ppe", i - 1) - g("capex") - g("da")
        assert all(float(f.values[k][i]).is_integer() for k in LINE if k != "eps")
        assert g("cash") > 0 and g("revenue") > 0 and g("ar") > 0 and g("ppe") > 0
        assert g("eps") == round(g("net_income") / g("shares"), 2)


def test_identity_check_catches_a_broken_statement() -> None:
    f = fin_of(7)
    f.values["retained"][2] += 5  # equity and the balance sheet no longer tie, nor the roll-forward
    broken = violations(f)
    assert any("retained earnings roll-forward, year 2" in v for v in broken)
    assert any("stockholders' equity, year 2" in v for v in broken)


def _explains(f: Financials, cell: tuple[str, int]) -> bool:
    """Whether some single change to ``cell`` makes every shown identity hold (brute force)."""
    eqs = identities(len(f.years))
    bad = [e for e in eqs if e.residual(f) != 0]
    coef = dict(bad[0].terms).get(cell)
    if coef is None:
        return False
    g = f.copy()
    g.values[cell[0]][cell[1]] -= bad[0].residual(f) / coef
    return all(e.residual(g) == 0 for e in eqs)


@pytest.mark.parametrize("seed", range(40))
def test_a_planted_error_has_exactly_one_single_figure_fix(seed: int) -> None:
    f = fin_of(seed, years=3 + seed % 3, scale="thousands" if seed % 2 else "millions")
    bad, err = plant_error(random.Random(seed), f)
    assert violations(bad) and err.shown != err.correct and abs(err.shown - err.correct) >= 9
    shown = [(k, i) for k in LINE for i in range(len(f.years)) if k not in ("eps", "shares")]
    assert [c for c in shown if _explains(bad, c)] == [err.cell]
    bad.values[err.cell[0]][err.cell[1]] = err.correct
    assert violations(bad) == []


def test_pinned_cells_exclude_figures_another_figure_could_explain() -> None:
    pinned = set(pinned_cells(3))
    assert ("revenue", 1) not in pinned and ("cogs", 1) not in pinned  # either could be the wrong one
    assert {("cash", 1), ("current_assets", 1), ("retained", 2), ("net_income", 0)} <= pinned


IX = {"ix": "http://www.xbrl.org/2013/inlineXBRL", "xbrli": "http://www.xbrl.org/2003/instance"}


@pytest.mark.parametrize("seed", range(6))
def test_inline_xbrl_facts_carry_the_statements_and_their_identities(seed: int) -> None:
    import xml.etree.ElementTree as ET

    from practicum.domains.finance.render import CONCEPTS, render

    f = fin_of(seed, years=2 + seed % 4, scale="thousands" if seed % 2 else "millions")
    root = ET.fromstring(render(f, "ixbrl").encode())  # well-formed XHTML, or this raises
    contexts = {c.get("id") for c in root.iter(f"{{{IX['xbrli']}}}context")}
    facts: dict[tuple[str, str], float] = {}
    for el in root.iter(f"{{{IX['ix']}}}nonFraction"):
        assert el.get("contextRef") in contexts and el.get("unitRef") in ("USD", "shares", "USDPerShare")
        text = el.text or ""
        value = 0.0 if el.get("format") == "ixt:fixed-zero" else float(text.replace(",", "")) * 10 ** int(el.get("scale", "0"))
        value = -value if el.get("sign") == "-" else value
        key = (el.get("name", ""), el.get("contextRef", ""))
        assert facts.setdefault(key, value) == value, key  # a concept repeated in a context agrees with itself
    unit = 1e3 if f.scale == "thousands" else 1e6
    for k, (concept, factor) in CONCEPTS.items():
        for i, y in enumerate(f.years):
            ctx = f"I{y - 1}" if k == "cash_begin" else f"I{y}" if LINE[k].statement == "balance" or k == "cash_end" else f"D{y}"
            if any(f.values[k]):
                want = f.values[k][i] * factor * (1 if k == "eps" else unit)
                assert facts[(f"us-gaap:{concept}", ctx)] == pytest.approx(want), (k, y)
    for y in f.years:
        def fact(c: str, ctx: str) -> float:
            return facts.get((f"us-gaap:{c}", ctx), 0.0)
        assert fact("Assets", f"I{y}") == fact("LiabilitiesAndStockholdersEquity", f"I{y}")
        assert (fact("NetCashProvidedByUsedInOperatingActivities", f"D{y}")
                + fact("NetCashProvidedByUsedInInvestingActivities", f"D{y}")
                + fact("NetCashProvidedByUsedInFinancingActivities", f"D{y}")) == fact("CashAndCashEquivalentsPeriodIncreaseDecrease", f"D{y}")


def test_inline_xbrl_prompts_need_a_long_window() -> None:
    with pytest.raises(ConfigError, match="max_prompt_tokens to at least 16,000"):
        build_domain(section(options={"format": "ixbrl"}), seed=0)
    d = build_domain(section(options={"format": "ixbrl", "max_prompt_tokens": 32000, "kinds": ["ratio"]}), seed=0)
    t = d.source.train_task(0)
    assert "<ix:nonFraction" in t.prompt[-1].content and t.metadata["tokens_estimate"] <= 32000
    assert verify(t, t.metadata["reference"]).score.value == 1


# --- time value of money: numpy-financial against closed forms -------------------------------------------------

def _npv(rate: float, flows: list[float]) -> float:
    return sum(c / (1 + rate) ** t for t, c in enumerate(flows))


def _irr(flows: list[float]) -> float:
    lo, hi = -0.99, 10.0
    for _ in range(200):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if _npv(mid, flows) > 0 else (lo, mid)
    return (lo + hi) / 2


@pytest.mark.parametrize("seed", range(30))
def test_npv_and_irr_keys_match_numpy_financial_and_the_definitions(seed: int) -> None:
    rng = random.Random(seed)
    question = q._npv_irr(rng, fin_of(seed))
    flows = [float(x.replace(",", "")) for x in re.findall(r"year \d+: (-?[\d,]+)", question.text)]
    rate = float(re.search(r"discount rate of ([\d.]+)%", question.text).group(1)) / 100  # type: ignore[union-attr]
    npv_key, irr_key = (p.value for p in question.key.parts)
    assert npv_key == pytest.approx(npf.npv(rate, flows), abs=1e-6) == pytest.approx(_npv(rate, flows), abs=1e-6)
    assert irr_key == pytest.approx(100 * npf.irr(flows), abs=1e-6) == pytest.approx(100 * _irr(flows), abs=1e-6)


@pytest.mark.parametrize("seed", range(40))
def test_annuity_keys_match_closed_forms(seed: int) -> None:
    question = q.tvm_medium(random.Random(seed), fin_of(seed))
    value = question.key.parts[0].value
    nums = [float(x.replace(",", "")) for x in re.findall(r"\$([\d,]+)", question.text)]
    rate = float(re.search(r"([\d.]+)%", question.text).group(1)) / 100  # type: ignore[union-attr]
    if question.name == "loan_payment":
        n = 12 * int(re.search(r"over (\d+) years", question.text).group(1))  # type: ignore[union-attr]
        i = rate / 12
        assert value == pytest.approx(nums[0] * i / (1 - (1 + i) ** -n), rel=1e-12)
    elif question.name == "annuity_pv":
        n = int(re.search(r"for (\d+) years", question.text).group(1))  # type: ignore[union-attr]
        assert value == pytest.approx(nums[0] * (1 - (1 + rate) ** -n) / rate, rel=1e-12)
    else:
        n = int(re.search(r"the (\d+)th deposit", question.text).group(1))  # type: ignore[union-attr]
        assert value == pytest.approx(nums[0] * ((1 + rate) ** n - 1) / rate, rel=1e-12)


def test_dcf_key_is_the_discounted_sum_of_projected_free_cash_flow() -> None:
    for seed in range(60):
        f = fin_of(seed)
        try:
            question = q._dcf(random.Random(seed), f)
        except q.NotApplicable:
            continue
        g = float(re.search(r"grows ([\d.]+)%", question.text).group(1)) / 100  # type: ignore[union-attr]
        r = float(re.search(r"Discounted at ([\d.]+)%", question.text).group(1)) / 100  # type: ignore[union-attr]
        fcf = f.values["cfo"][-1] + f.values["capex"][-1]
        assert question.key.parts[0].value == fcf
        assert question.key.parts[1].value == pytest.approx(sum(fcf * (1 + g) ** t / (1 + r) ** t for t in range(1, 6)))
        return
    pytest.fail("no statements with positive free cash flow in 60 seeds")


# --- the verifier: the reference gets full marks; the mistakes models make do not ---------------------------------

@pytest.fixture(scope="module")
def tasks() -> list[Task]:
    d = build_domain(section(), seed=3)
    return [d.source.train_task(i) for i in range(400)]


def test_every_reference_answer_gets_full_marks(tasks: list[Task]) -> None:
    kinds = set()
    for t in tasks:
        v = verify(t, f"Working through it... {t.metadata['reference']}")
        assert v.score.value == 1.0 and v.score.components == {"correct": 1.0, "credit": 1.0}, (t.id, v.score)
        kinds.add((t.metadata["kind"], t.metadata["tier"]))
    assert len(kinds) == len(q.GENERATORS)


def _single(tasks: list[Task], kind: str) -> list[tuple[Task, Part]]:
    out = []
    for t in tasks:
        key = AnswerKey.model_validate(t.target)
        if len(key.parts) == 1 and key.parts[0].kind == kind:
            out.append((t, key.parts[0]))
    return out


def test_thousands_read_as_millions_is_rejected_and_flagged(tasks: list[Task]) -> None:
    amounts = _single(tasks, "amount")
    assert len(amounts) >= 20
    for t, p in amounts:
        for factor in (1000, 1 / 1000):
            places = (p.decimals or 0) + (3 if factor < 1 else 0)  # the figure as a model would write it
            v = verify(t, f"<answer>{float(p.value) * factor:.{places}f}</answer>")
            if abs(float(p.value) * factor) >= 1:
                assert v.score.value == 0 and "scale" in v.flags, (t.id, p, v)


def test_a_correctly_labelled_figure_in_another_unit_is_right() -> None:
    key = AnswerKey(parts=[Part(kind="amount", value=1234.4, scale="millions", decimals=0)])
    assert check(key, "<answer>$1.234 billion</answer>").score.value == 1
    assert check(key, "<answer>1,234,000 thousand</answer>").score.value == 1
    assert check(key, "<answer>USD 1,234m</answer>").score.value == 1
    v = check(key, "<answer>1,234,400,000</answer>")  # dollars where millions were asked
    assert v.score.value == 0 and v.flags == ["scale"]
    v = check(key, "<answer>€1,234</answer>")
    assert v.score.value == 0 and v.flags == ["wrong_unit"]


def test_sign_errors_are_rejected_and_flagged(tasks: list[Task]) -> None:
    checked = 0
    for kind in ("amount", "percent", "ratio"):
        for t, p in _single(tasks, kind):
            if abs(float(p.value)) < 0.01:
                continue
            v = verify(t, f"<answer>{-float(p.value):.{p.decimals or 0}f}</answer>")
            assert v.score.value == 0 and v.flags == ["sign"], (t.id, v)
            checked += 1
    assert checked >= 50
    key = AnswerKey(parts=[Part(kind="amount", value=-512.0, scale="thousands", decimals=0)])
    assert check(key, "<answer>(512)</answer>").score.value == 1  # parentheses, as statements print negatives
    assert check(key, "<answer>\u2212512</answer>").score.value == 1


def test_percent_versus_fraction(tasks: list[Task]) -> None:
    pcts = _single(tasks, "percent")
    assert len(pcts) >= 30
    for t, p in pcts:
        if abs(float(p.value)) < 1:
            continue
        v = verify(t, f"<answer>{float(p.value) / 100:.{(p.decimals or 0) + 2}f}</answer>")
        assert v.score.value == 0 and v.flags == ["percent_vs_fraction"], (t.id, v)
    frac = AnswerKey(parts=[Part(kind="fraction", value=0.43219, decimals=3)])
    assert check(frac, "0.432").score.value == 1 and check(frac, "43.2%").score.value == 1  # a % sign converts
    v = check(frac, "43.2")
    assert v.score.value == 0 and v.flags == ["percent_vs_fraction"]


def test_rounding_outside_the_stated_rule() -> None:
    key = AnswerKey(parts=[Part(kind="ratio", value=1.4567, decimals=2)])
    assert check(key, "<answer>1.46</answer>").score.value == 1
    assert check(key, "<answer>1.46x</answer>").score.value == 1
    assert check(key, "<answer>1.460</answer>").score.value == 1  # a trailing zero is not more precision
    over = check(key, "<answer>1.4567</answer>")  # right, more decimals than asked: half credit
    assert over.score.value == 0.5 and over.flags == ["rounding"]
    coarse = check(key, "<answer>1.5</answer>")  # right only to one decimal: nothing (else round to win)
    assert coarse.score.value == 0 and coarse.flags == ["rounding"]
    wrong = check(key, "<answer>1.45</answer>")  # rounded the wrong way
    assert wrong.score.value == 0 and wrong.flags == []
    tie = AnswerKey(parts=[Part(kind="percent", value=12.25, decimals=1)])  # an exact tie: both neighbours
    assert check(tie, "12.2%").score.value == check(tie, "12.3%").score.value == 1


def test_one_wrong_part_of_a_multi_part_answer_costs_its_weight(tasks: list[Task]) -> None:
    multi = [(t, AnswerKey.model_validate(t.target)) for t in tasks if len(t.target["parts"]) > 1]
    assert len(multi) >= 40
    for t, key in multi:
        total = sum(p.weight for p in key.parts)
        for wrong in key.parts:
            lines = []
            for p in key.parts:
                answer = p.reference()
                if p is wrong:
                    answer = ("yes" if p.value is False else "no") if p.kind == "boolean" else \
                        "Goodwill typo" if p.kind == "text" else str(int(p.value) - 1) if p.kind == "year" else "123456789"  # type: ignore[arg-type]
                lines.append(f"({p.label}) {answer}")
            v = verify(t, "<answer>\n" + "\n".join(lines) + "\n</answer>")
            assert v.score.value == pytest.approx(1 - wrong.weight / total, abs=1e-6), (t.id, wrong, v.score)
            assert v.score.components["correct"] == 0


def test_multi_part_answers_in_the_forms_models_write() -> None:
    key = AnswerKey(parts=[Part(label="a", kind="ratio", value=3.1234, decimals=2, weight=0.6),
                           Part(label="b", kind="boolean", value=False, weight=0.4)])
    for reply in ("(a) 3.12\n(b) no", "a) 3.12x\nb) Not met", "a: 3.12\nb: the covenant is breached", "3.12\nNo",
                  "3.12; no", "(b) No\n(a) 3.12 to 1.00"):
        assert check(key, f"<answer>{reply}</answer>").score.value == 1, reply
    v = check(key, "<answer>(a) 3.12\n(b) yes, it is met</answer>")
    assert v.score.value == pytest.approx(0.6) and "(b) said yes" in v.score.explanation
    assert check(key, "<answer>(a) 3.12</answer>").score.value == pytest.approx(0.6)  # a missing part: 0 for it


def test_answers_that_are_not_answers_score_zero_without_crashing(tasks: list[Task]) -> None:
    for reply in ("", "I don't know", "<answer></answer>", "<answer>lots</answer>", "<answer>1,2,3</answer>",
                  "<answer>(((</answer>", "<answer>" + "9" * 400 + "</answer>", "<answer>nan</answer>"):
        for t in tasks[:30]:
            v = verify(t, reply)
            assert v.score.value < 1 and 0 <= v.score.value <= 1


def test_the_last_answer_tags_count() -> None:
    key = AnswerKey(parts=[Part(kind="percent", value=5.0, decimals=1)])
    assert check(key, "First <answer>4.0%</answer>, no wait: <answer>5.0%</answer>").score.value == 1


def test_inconsistency_answers_by_label_alias_and_year() -> None:
    rng = random.Random(11)
    question = q.inconsistency_hard(rng, fin_of(11, scale="thousands"))
    line, year, value = (p.value for p in question.key.parts)
    aliases = question.key.parts[0].aliases
    for name in (line, str(line).upper(), *aliases):
        v = check(question.key, f"<answer>\n(a) {name}\n(b) FY{year}\n(c) {value:,.0f}\n</answer>")
        assert v.score.value == 1, (name, v.score)
    v = check(question.key, f"<answer>\n(a) Total assets and {line}\n(b) {year}\n(c) {value:,.0f}\n</answer>")
    assert v.score.value == pytest.approx(0.6)  # naming two lines is not naming the one


# --- covenants ---------------------------------------------------------------------------------------------------------

def test_covenant_keys_follow_the_agreement_definitions() -> None:
    seen = set()
    for seed in range(200):
        f = fin_of(seed)
        try:
            question = q.covenant_hard(random.Random(seed), f)
        except q.NotApplicable:
            continue
        text, year = question.agreement or "", int(re.search(r"fiscal (\d{4})", question.text).group(1))  # type: ignore[union-attr]
        i = f.year_index(year)

        def g(k: str, f: Financials = f, i: int = i) -> float:
            return f.values[k][i]

        sbc = "(d) non-cash stock-based compensation" in text
        ebitda = g("net_income") + g("interest") + g("tax") + g("da") + (g("sbc") if sbc else 0)
        debt = g("current_debt") + g("long_term_debt")
        cap = re.search(r"shall not exceed ([\d,]+) \(", text)
        net = min(g("cash"), float(cap.group(1).replace(",", ""))) if cap else 0
        parts = {p.label: p for p in question.key.parts}
        levels = re.findall(r"(?:exceed|less than) ([\d.]+) to 1\.00", text)
        if question.name in ("leverage_covenant", "leverage_and_coverage"):
            assert parts["a"].value == pytest.approx((debt - net) / ebitda)
            limit = float(re.findall(r"([\d.]+) to 1\.00 for any fiscal year ending thereafter", text)[0]) \
                if "thereafter" in text else float(levels[0])
            assert parts["b"].value == ((debt - net) / ebitda <= limit)
            assert abs((debt - net) / ebitda - limit) >= 0.03
        seen.add((question.name, sbc, bool(cap), "thereafter" in text))
    assert len(seen) >= 10  # the definitions vary: add-backs, cash netting, step-downs


# --- tasks: enough of them, a disjoint held-out split, options, budgets ----------------------------------------------

def test_at_least_200_distinct_training_tasks_disjoint_from_the_held_out_set() -> None:
    d = build_domain(section(), seed=0)
    held = d.source.eval_tasks()
    train = [d.source.train_task(i) for i in range(250)]
    assert len(held) == 50
    assert len({t.prompt[-1].content for t in train}) == 250
    assert not {t.prompt[-1].content for t in train} & {t.prompt[-1].content for t in held}
    again = build_domain(section(), seed=0)
    assert [again.source.train_task(i).prompt for i in (0, 17, 249)] == [train[i].prompt for i in (0, 17, 249)]
    assert build_domain(section(), seed=1).source.train_task(0).prompt != train[0].prompt


def test_a_training_draw_that_repeats_a_held_out_task_is_replaced() -> None:
    d = build_domain(section(eval_size=5), seed=4321)  # the training stream is the held-out stream
    held = {t.metadata["fingerprint"] for t in d.source.eval_tasks()}
    first = [d.source.train_task(i) for i in range(5)]
    assert not held & {t.metadata["fingerprint"] for t in first}


def test_the_sections_eval_size_and_seed_set_the_held_out_set() -> None:
    d = build_domain(section(eval_size=7, eval_seed=99), seed=0)
    assert len(d.source.eval_tasks()) == 7
    other = build_domain(section(eval_size=7), seed=0)
    assert d.source.eval_tasks()[0].prompt != other.source.eval_tasks()[0].prompt
    mine = build_domain(section(eval_size=7, options={"eval_size": 3}), seed=0)
    assert len(mine.source.eval_tasks()) == 3


def test_kinds_tiers_years_and_format_are_options() -> None:
    d = build_domain(section(options={"kinds": ["covenant", "ratio"], "tiers": ["easy", "hard"], "years": 5,
                                      "scales": ["millions"], "format": "markdown"}), seed=0)
    ts = [d.source.train_task(i) for i in range(30)]
    assert {(t.metadata["kind"], t.metadata["tier"]) for t in ts} == {("covenant", "hard"), ("ratio", "easy")}
    assert all(len(t.metadata["years"]) == 5 and t.metadata["scale"] == "millions" for t in ts)
    assert all("|---|" in t.prompt[-1].content for t in ts)
    with pytest.raises(ConfigError, match="options.kinds"):
        build_domain(section(options={"kinds": ["astrology"]}), seed=0)
    with pytest.raises(ConfigError, match="options.years"):
        build_domain(section(options={"years": 9}), seed=0)
    with pytest.raises(TaskError, match="no finance questions"):
        build_domain(section(options={"kinds": ["covenant"], "tiers": ["easy"]}), seed=0)


def test_default_prompts_fit_3000_tokens_of_the_embedded_models_tokenizer() -> None:
    from practicum.models import cached_path

    path = cached_path("smollm2-135m-instruct") / "tokenizer.json"
    if not path.is_file():
        pytest.skip("embedded model not prepared (`practicum models prepare`): its tokenizer is needed")
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(path))
    for opts in ({}, {"format": "markdown"}, {"years": 5}):
        d = build_domain(section(options=opts), seed=8)
        for i in range(60):
            t = d.source.train_task(i)
            real = sum(len(tok.encode(m.content).ids) for m in t.prompt)
            assert real <= t.metadata["tokens_estimate"] <= 3000, (opts, t.id, real)


def test_a_small_budget_drops_unread_statements_then_redraws() -> None:
    d = build_domain(section(options={"max_prompt_tokens": 1400}), seed=0)
    for i in range(20):
        t = d.source.train_task(i)
        assert t.metadata["tokens_estimate"] <= 1400
        assert estimate_tokens(t.prompt[-1].content) < 1400


# --- the environment ---------------------------------------------------------------------------------------------------

def test_an_episode_scores_its_one_reply() -> None:
    d = build_domain(section(), seed=0)
    task = d.source.train_task(0)

    async def run() -> tuple[Any, Any]:
        env = d.make_env()
        first = await env.reset(task)
        assert first.messages == task.prompt and env.tools() == []
        done = await env.step(task.metadata["reference"])
        late = d.make_env()
        await late.reset(task)
        return done, await late.finish("token_limit")

    done, late = asyncio.run(run())
    assert done.done and done.score.value == 1 and done.info == {"flags": []}
    assert late.done and late.score is None
    assert task.metadata["reference"] not in task.prompt[-1].content or len(task.metadata["reference"]) < 20


def test_multi_mode_runs_python_in_the_sandbox_then_scores_the_submitted_answer() -> None:
    from practicum.domains import default_context
    from practicum.sandbox.namespaced import NsjailSandbox

    ok, why = NsjailSandbox.available()
    if not ok:
        pytest.skip(f"isolated sandbox unavailable: {why}")
    d = build_domain(section(options={"mode": "multi", "kinds": ["ratio"], "tiers": ["easy"], "max_runs": 2,
                                      "run_timeout_s": 2}), seed=0, ctx=default_context(sandbox="nsjail"))
    task = d.source.train_task(0)
    assert "call submit" in task.prompt[-1].content and "python tool" in task.prompt[0].content
    answer = AnswerKey.model_validate(task.target).parts[0].reference()

    def call(name: str, **args: Any) -> str:
        return "<tool_call>" + json.dumps({"name": name, "arguments": args}) + "</tool_call>"

    async def run() -> list[Any]:
        env = d.make_env()
        try:
            await env.reset(task)
            assert [t.name for t in env.tools()] == ["python", "submit"]
            obs = [await env.step(call("python", code="print(round(1234 / 847, 4))"))]
            obs.append(await env.step(call("python", code="while True: pass")))
            obs.append(await env.step(call("python", code="print(1)")))  # over max_runs
            obs.append(await env.step(call("submit", answer=answer)))
            return obs
        finally:
            await env.close()
            await d.close()

    ran, looped, refused, done = asyncio.run(run())
    assert "exit code 0" in ran.messages[0].content and "1.4569" in ran.messages[0].content
    assert "timed out" in looped.messages[0].content
    assert "used all 2 runs" in refused.messages[0].content
    assert done.done and done.score.value == 1 and done.info["tool_calls"] == {"python": 3, "submit": 1}


# --- task files ----------------------------------------------------------------------------------------------------------

EXAMPLE = {"id": "acme/current-ratio",
           "context": "Acme Corp. balance sheet (in millions): total current assets 1,234; total current liabilities 847.",
           "question": "What was Acme's current ratio? Round to 2 decimal places.",
           "answer": 1.45691, "kind": "ratio", "decimals": 2}


def test_verify_cli_on_a_task_file(tmp_path: Path) -> None:
    task, good, over, bad = (tmp_path / n for n in ("task.json", "good.txt", "over.txt", "bad.txt"))
    task.write_text(json.dumps(EXAMPLE))
    good.write_text("1234 / 847 = 1.4569. <answer>1.46</answer>")
    over.write_text("<answer>1.4569</answer>")
    bad.write_text("<answer>146</answer>")
    out = runner.invoke(app, ["verify", "finance", "--task", str(task), "--answer", str(good), "--json"])
    assert out.exit_code == 0, out.output
    assert json.loads(out.output) == {"value": 1.0, "components": {"correct": 1.0, "credit": 1.0},
                                      "explanation": "right", "flags": []}
    out = runner.invoke(app, ["verify", "finance", "--task", str(task), "--answer", str(over), "--answer", str(bad),
                              "--json"])
    assert [(v["value"], v["flags"]) for v in json.loads(out.output)] == [(0.5, ["rounding"]), (0.0, ["percent_vs_fraction"])]


def test_verify_cli_on_a_draw(tmp_path: Path) -> None:
    task = tmp_path / "draw.json"
    task.write_text(json.dumps({"draw": {"seed": 3, "index": 5, "options": {"kinds": ["covenant"]}}}))
    drawn = plugin.load_task(task)
    assert drawn.metadata["kind"] == "covenant"
    answer = tmp_path / "a.txt"
    answer.write_text(drawn.metadata["reference"])
    out = runner.invoke(app, ["verify", "finance", "--task", str(task), "--answer", str(answer), "--json"])
    assert out.exit_code == 0 and json.loads(out.output)["value"] == 1.0


@pytest.mark.parametrize(("data", "field"), [
    ({**EXAMPLE, "kind": "vibes"}, "kind: Input should be"),
    ({k: v for k, v in EXAMPLE.items() if k != "question"}, "question: required"),
    ({**EXAMPLE, "decimals": -1}, "decimals: Input should be greater"),
    ({k: v for k, v in EXAMPLE.items() if k != "kind"}, "kind: required"),
    ({**EXAMPLE, "answer": "lots"}, "answer: a ratio part needs a finite number"),
    ({"question": "q", "parts": [{"label": "a", "kind": "boolean", "value": "maybe"}]}, "parts.0"),
    ({"question": "q", "parts": [{"label": "a", "kind": "ratio", "value": 1}, {"label": "a", "kind": "ratio", "value": 2}]},
     "labels repeat"),
    ({**EXAMPLE, "colour": "red"}, "colour: Extra inputs"),
    ({"draw": {"index": 0, "options": {"years": 12}}}, "draw.options.years"),
    ([1, 2], "JSON object"),
])
def test_bad_task_files_name_the_file_and_the_field(tmp_path: Path, data: Any, field: str) -> None:
    path = tmp_path / "broken_task.json"
    path.write_text(json.dumps(data))
    with pytest.raises(TaskError) as e:
        plugin.load_task(path)
    assert "broken_task.json" in str(e.value) and field in str(e.value), str(e.value)
    answer = tmp_path / "a.txt"
    answer.write_text("<answer>1</answer>")
    out = runner.invoke(app, ["verify", "finance", "--task", str(path), "--answer", str(answer)])
    assert out.exit_code == 2 and "broken_task.json" in out.output


def test_unreadable_task_files_name_the_file(tmp_path: Path) -> None:
    path = tmp_path / "garbled.json"
    path.write_text("{not json")
    with pytest.raises(TaskError, match="garbled.json: not valid JSON"):
        plugin.load_task(path)
    with pytest.raises(TaskError, match="missing.json"):
        plugin.load_task(tmp_path / "missing.json")


def test_a_tasks_source_reads_files_and_holds_out_the_leading_fraction(tmp_path: Path) -> None:
    lines = [json.dumps({**EXAMPLE, "id": f"t{i}", "answer": 1 + i / 10}) for i in range(10)]
    (tmp_path / "tasks.jsonl").write_text("\n".join(lines) + "\n")
    d = build_domain(section(source={"kind": "tasks", "path": str(tmp_path / "tasks.jsonl"), "eval_fraction": 0.3}),
                     seed=0)
    assert [t.id for t in d.source.eval_tasks()] == ["t0", "t1", "t2"]
    assert {d.source.train_task(i).id for i in range(7)} == {f"t{i}" for i in range(3, 10)}
    (tmp_path / "bad.jsonl").write_text(lines[0] + "\n" + json.dumps({"question": "q"}) + "\n")
    with pytest.raises(TaskError, match=r"bad.jsonl:2: give either parts or answer"):
        build_domain(section(source={"kind": "tasks", "path": str(tmp_path / "bad.jsonl")}), seed=0)


# --- expert-annotated tasks (practicum.domains.annotations) ------------------------------------------------------------

ANNOTATED = [
    {"format": "practicum-annotated/1", "id": "fin-1", "question": "Is the leverage covenant met, and at what ratio?",
     "context": "Total debt 420; EBITDA 120; maximum leverage 3.75x.", "answer_type": "finance",
     "gold": {"parts": [{"label": "a", "kind": "ratio", "value": 3.5, "decimals": 2, "weight": 0.6},
                        {"label": "b", "kind": "boolean", "value": True, "weight": 0.4}]},
     "annotations": [{"annotator": "cfa-1", "label": "3.50x; met", "rationale": "420/120"},
                     {"annotator": "cfa-2", "label": "3.5; yes"}]},
    {"id": "fin-2", "question": "Gross margin in percent?", "answer_type": "percent", "gold": 43.2, "tolerance": 0.05,
     "rubric": [{"id": "shows_formula", "weight": 1, "patterns": ["gross profit\\s*/\\s*revenue"]}]},
]


def test_annotated_tasks_score_through_the_annotations_module(tmp_path: Path) -> None:
    path = tmp_path / "annotated.json"
    path.write_text(json.dumps(ANNOTATED))
    d = build_domain(section(source={"kind": "annotated", "path": str(path), "eval_fraction": 0.5}), seed=0)
    (one,), (two,) = d.source.eval_tasks(), [d.source.train_task(0)]
    assert "(a) ..." in one.prompt[-1].content
    v = verify(one, one.metadata["reference"])
    assert v.score.value == 1 and v.score.components["correct"] == 1
    v = verify(one, "<answer>(a) 3.50\n(b) no</answer>")
    assert v.score.value == pytest.approx(0.6) and v.score.components["credit"] == pytest.approx(0.6)
    v = verify(two, "<answer>gross profit / revenue = 43.2%</answer>")  # rubric patterns read the answer
    assert v.score.value == 1 and v.score.components["rubric"] == 1
    v = verify(two, "<answer>0.432</answer>")
    assert v.score.value == 0 and "percent_vs_fraction" in v.flags


def test_a_bad_annotated_file_names_the_file_and_the_field(tmp_path: Path) -> None:
    path = tmp_path / "experts.json"
    bad = {**ANNOTATED[0], "gold": {"parts": [{"label": "a", "kind": "ratio", "value": "high"}]}}
    path.write_text(json.dumps(bad))
    with pytest.raises(TaskError, match=r"experts.json: task 'fin-1': gold\.parts\.0"):
        plugin.load_task(path)
    path.write_text(json.dumps({**ANNOTATED[1], "rubric": [{"id": "x", "weight": 0, "patterns": ["a"]}]}))
    with pytest.raises(TaskError, match=r"experts.json: rubric.0.weight"):
        plugin.load_task(path)


# --- the envs commands -----------------------------------------------------------------------------------------------------

def test_envs_show_scores_the_references() -> None:
    out = runner.invoke(app, ["envs", "show", "finance", "--n", "3", "--json"])
    assert out.exit_code == 0, out.output
    shown = json.loads(out.output)
    assert shown["components"] == ["correct", "credit"] and any("max_prompt_tokens" in o for o in shown["options"])
    assert [t["verdict"]["value"] for t in shown["tasks"]] == [1.0, 1.0, 1.0]


@pytest.mark.parametrize("reply, value, flag", [
    ("Yes", 1.0, None), ("Yes, it is met", 1.0, None), ("Yes, no breach occurred", 1.0, None),
    ("Not met", 0.0, None), ("yes or no", 0.0, "hedged"), ("Yes/No", 0.0, "hedged"),
    ("met, or not met", 0.0, "hedged"), ("no and yes", 0.0, "hedged"),
])
def test_a_yes_no_part_refuses_a_reply_that_offers_both_verdicts(reply, value, flag):
    key = AnswerKey(parts=[Part(label="a", kind="boolean", value=True)])
    verdict = check(key, f"<answer>{reply}</answer>")
    assert verdict.score.value == value, verdict.score.explanation
    assert (flag in verdict.flags) if flag else "hedged" not in verdict.flags
