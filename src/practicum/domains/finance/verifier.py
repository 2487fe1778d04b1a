"""Scoring finance answers: numbers with units, scale words, percent signs, signs and rounding rules.

An :class:`AnswerKey` is a list of :class:`Part`\\ s, each with a weight (the rubric). The reply's
answer is the text inside its last ``<answer>...</answer>`` pair (else the whole reply); a
multi-part answer gives one part per line, labelled ``(a)``, ``a)``, ``a:`` or ``a.`` (unlabelled
lines are taken in order when there are exactly as many as parts). The score is the weighted
mean of the parts' credits; components ``correct`` (1 only if every part earns full credit) and
``credit`` (the score).

How one part is read, by its ``kind``:

* ``amount``: money in the unit the task asks for (``scale``: units, thousands, millions,
  billions). A bare number is taken to be in that unit; a number with a scale word (``1.2
  billion``, ``$950k``, ``1,234 thousand``, ``3.4 mn``) is converted, so a correctly labelled
  figure in another unit is right. ``$``, ``US$``, ``USD`` and ``dollars`` are allowed; another
  currency is a wrong unit.
* ``percent``: a percentage (``12.5`` or ``12.5%`` for 12.5 %). A bare ``0.125`` is the fraction
  where a percentage was asked: wrong, flagged ``percent_vs_fraction``.
* ``fraction``: a decimal fraction (``0.125``); ``12.5%`` is converted, a bare ``12.5`` is wrong
  (``percent_vs_fraction``).
* ``ratio``: a multiple: ``2.35``, ``2.35x``, ``2.35 times``, ``2.35:1``, ``2.35 to 1.00`` (a
  percentage is converted).
* ``number``: a plain number, optionally followed by the part's ``unit`` (``days``, ``years``).
* ``boolean``: yes/no; ``met``, ``in compliance``, ``true`` and ``pass`` read as yes; ``not met``,
  ``breach``, ``false``, ``fail`` as no.
* ``text``: one of ``value`` and its ``aliases``, compared case- and punctuation-insensitively.
* ``year``: a fiscal year, ``2024`` or ``FY2024`` or ``fiscal 2024``.

Accounting negatives ``(1,234)`` and the Unicode minus read as negative; ``approximately``,
``about`` and ``~`` are ignored. A numeric part is right when it lies within ``tolerance`` of the
exact value (default: half a unit in the last decimal place that ``decimals``, the task's stated
rounding, keeps; so the correctly rounded figure passes, and both neighbours of an exact tie).

Partial credit and flags (a flag names the kind of mistake; it never raises a score):

* right within the tolerance but written with more decimals than the rule: half credit, flag
  ``rounding``. Right only to a coarser rounding than the rule (``1.5`` for ``1.46``): no credit,
  flag ``rounding``; a coarse answer gets nothing, else rounding everything to integers would
  earn a reliable reward for no information;
* off by a factor of 1,000 or 1,000,000 (thousands read as millions): 0, flag ``scale``;
* the right magnitude with the wrong sign: 0, flag ``sign``;
* off by a factor of 100 (a fraction where a percentage was asked, or the reverse): 0, flag
  ``percent_vs_fraction``;
* a unit word that is not the one asked (``days`` for years, ``EUR``): 0, flag ``wrong_unit``;
* no answer, or not a number: 0, flags ``no_answer`` / ``unparsed``.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from decimal import Decimal
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from practicum.domains.plugin import Verdict
from practicum.records import Score

Kind = Literal["amount", "percent", "fraction", "ratio", "number", "boolean", "text", "year"]
ScaleName = Literal["units", "thousands", "millions", "billions"]
SCALES = {"units": 1.0, "thousands": 1e3, "millions": 1e6, "billions": 1e9}
ROUNDING_CREDIT = 0.5  # an over-precise answer that is right
NUMERIC = ("amount", "percent", "fraction", "ratio", "number")
POINTS = {"pp", "pps", "ppt", "ppts", "pts", "points", "percentage point", "percentage points", "percent points"}

ANSWER_TAG = re.compile(r"<answer>(.*?)</answer>", re.DOTALL | re.IGNORECASE)
LABEL = re.compile(r"^\s*(?:part\s+)?\(?([a-h])\s*[).:]\s*(.*)$", re.IGNORECASE | re.DOTALL)
SCALE_WORDS = {"k": 1e3, "thousand": 1e3, "thousands": 1e3, "000s": 1e3, "m": 1e6, "mm": 1e6, "mn": 1e6, "mil": 1e6,
               "million": 1e6, "millions": 1e6, "b": 1e9, "bn": 1e9, "billion": 1e9, "billions": 1e9}
CURRENCY_OK = {"$", "us$", "usd", "dollar", "dollars", "us dollars", "u.s. dollars"}
NUMBER = re.compile(
    r"""^(?P<neg1>[-+\u2212])?\s*(?P<open>\()?\s*(?P<cur1>us\$|\$|usd|€|eur|£|gbp|¥|jpy)?\s*(?P<neg2>[-\u2212])?\s*
    (?P<num>\d[\d,]*(?:\.\d+)?|\.\d+)\s*(?P<pct>%)?\s*(?P<close>\))?\s*(?P<rest>.*)$""", re.IGNORECASE | re.VERBOSE | re.DOTALL)
YES_FIRST = re.compile(r"^(yes|y|true|met|pass|passes|passed|compliant|complies|satisfied)\b")
NO_FIRST = re.compile(r"^(no|n|false|not|fail|fails|failed|breach|breached|violated|non compliant|noncompliant)\b")
NO_ANY = re.compile(r"\b(not met|not in compliance|not satisfied|not compliant|breach\w*|violat\w*|fail\w*|non compliant)\b")
YES_ANY = re.compile(r"\b(met|in compliance|complies|satisfied|passes)\b")
# both verdicts offered ("yes or no", "yes/no", "met, or not met"): a hedge, never right
_Y, _N = r"(yes|true|met|pass(?:es)?)", r"(no|false|not(?: met)?|fail(?:s)?)"
HEDGE = re.compile(rf"\b{_Y}\s*(\bor\b|\band\b)\s*{_N}\b|\b{_N}\s*(\bor\b|\band\b)\s*{_Y}\b"
                   r"|^(yes|true)\s+(no|false)$|^(no|false)\s+(yes|true)$")  # normalised, "yes/no" reads "yes no"


class Part(BaseModel):
    """One part of an answer: what is right and how it is read (module docstring)."""

    model_config = ConfigDict(extra="forbid")
    label: str = Field(default="a", pattern=r"^[a-h]$", description="The part's letter, a-h.")
    kind: Kind
    value: float | bool | str = Field(..., description="The exact (unrounded) value, in the unit asked.")
    scale: ScaleName = Field(default="units", description="amount: the unit the task asks for.")
    decimals: int | None = Field(default=None, ge=0, le=8, description="numeric: decimal places the task asks to round to.")
    tolerance: float | None = Field(default=None, ge=0, description="numeric: accepted distance from value (default: half a unit in the last kept place).")
    unit: str | None = Field(default=None, description="number: the unit word the task asks for (days, years).")
    aliases: list[str] = Field(default_factory=list, description="text: other accepted spellings.")
    weight: float = Field(default=1.0, gt=0, description="The part's weight in the rubric.")

    @model_validator(mode="after")
    def _consistent(self) -> Part:
        if self.kind in NUMERIC or self.kind == "year":
            if isinstance(self.value, bool) or not isinstance(self.value, int | float) or not math.isfinite(self.value):
                raise ValueError(f"a {self.kind} part needs a finite number as value, not {self.value!r}")
        elif self.kind == "boolean" and not isinstance(self.value, bool):
            raise ValueError(f"a boolean part needs true or false as value, not {self.value!r}")
        elif self.kind == "text" and not (isinstance(self.value, str) and self.value.strip()):
            raise ValueError("a text part needs a non-empty string as value")
        return self

    @property
    def tol(self) -> float:
        if self.tolerance is not None:
            return self.tolerance
        return 0.5 * 10.0 ** -(self.decimals or 0)

    def reference(self) -> str:
        """The answer written as the task asks for it."""
        if self.kind == "boolean":
            return "yes" if self.value else "no"
        if self.kind in ("text", "year"):
            return str(int(self.value)) if self.kind == "year" else str(self.value)
        v = float(self.value)  # type: ignore[arg-type]
        text = f"{v:,.{self.decimals}f}" if self.decimals is not None else f"{v:,.10g}"
        if self.kind == "percent":
            return text + "%"
        return text


class AnswerKey(BaseModel):
    """What the verifier compares against (``Task.target``); never shown to the model."""

    model_config = ConfigDict(extra="forbid")
    parts: list[Part] = Field(..., min_length=1)

    @model_validator(mode="after")
    def _labels(self) -> AnswerKey:
        labels = [p.label for p in self.parts]
        if len(set(labels)) != len(labels):
            raise ValueError(f"part labels repeat: {labels}")
        return self

    def reference(self) -> str:
        if len(self.parts) == 1:
            return f"<answer>{self.parts[0].reference()}</answer>"
        return "<answer>\n" + "\n".join(f"({p.label}) {p.reference()}" for p in self.parts) + "\n</answer>"


# --- reading answers ----------------------------------------------------------------------------------

@dataclass
class Parsed:
    value: float
    decimals: int  # decimal places as written (trailing zeros dropped)
    percent: bool = False
    scale: float | None = None  # a scale word's multiplier
    currency: str | None = None
    rest: str = ""  # unexplained trailing text


def extract(reply: str) -> str:
    tags = ANSWER_TAG.findall(reply)
    return tags[-1].strip() if tags else reply.strip()


def _clean(s: str) -> str:
    s = s.strip().strip("*`'\"").strip()
    s = re.sub(r"^(approximately|approx\.?|about|around|roughly|~|≈)\s*", "", s, flags=re.IGNORECASE)
    s = re.sub(r"^[a-z][a-z ,'()/-]{0,60}?(?:=|:|\bis\b|\bwas\b)\s*(?=[-+\u2212($€£¥\d.])", "", s, flags=re.IGNORECASE)
    return s.rstrip(".").strip()


def parse_number(text: str) -> Parsed | None:
    m = NUMBER.match(_clean(text))
    if not m:
        return None
    num = m.group("num")
    if "," in num and not re.fullmatch(r"\d{1,3}(,\d{3})+(\.\d+)?", num):
        return None  # "1,2" is not a thousands separator
    raw = num.replace(",", "")
    value = float(raw)
    frac = raw.split(".")[1].rstrip("0") if "." in raw else ""
    neg = bool(m.group("neg1") and m.group("neg1") != "+") or bool(m.group("neg2"))
    if m.group("open") and m.group("close"):
        neg = True
    elif m.group("open") or m.group("close"):
        return None
    rest = m.group("rest").strip().lower()
    currency = (m.group("cur1") or "").lower() or None
    percent, scale = bool(m.group("pct")), None
    words = re.sub(r"\([^()]*\)", "", rest).strip()  # a remark in parentheses: "(rounded)"
    if words.startswith("%") or re.match(r"^(percent|per cent|pct)\b", words):
        percent = True
        words = re.sub(r"^(%|percent|per cent|pct)", "", words).strip()
    sm = re.match(r"^(thousands|thousand|000s|millions|million|billions|billion|mil|mm|mn|bn|k|m|b)\b\.?", words)
    if sm:
        scale = SCALE_WORDS[sm.group(1)]
        words = words[sm.end():].strip()
    if words.startswith("of "):
        words = words[3:].strip()
    for cur in sorted(CURRENCY_OK | {"eur", "euro", "euros", "gbp", "pounds", "jpy", "yen"}, key=len, reverse=True):
        if words.startswith(cur):
            currency = currency or cur
            words = words[len(cur):].strip()
            break
    return Parsed(value=-value if neg else value, decimals=len(frac), percent=percent, scale=scale, currency=currency,
                  rest=words.strip(" .;,"))


def split_parts(answer: str, key: AnswerKey) -> dict[str, str]:
    """The text given for each part label."""
    if len(key.parts) == 1:
        m = LABEL.match(answer)
        return {key.parts[0].label: m.group(2).strip() if m and m.group(1).lower() == key.parts[0].label else answer}
    lines = [ln.strip() for ln in answer.splitlines() if ln.strip()]
    if len(lines) == 1 and ";" in lines[0]:
        lines = [p.strip() for p in lines[0].split(";") if p.strip()]
    labelled: dict[str, str] = {}
    for ln in lines:
        m = LABEL.match(ln)
        if m:
            labelled[m.group(1).lower()] = m.group(2).strip()  # a label given twice: the last one counts
    if labelled:
        return labelled
    if len(lines) == len(key.parts):
        return {p.label: ln for p, ln in zip(key.parts, lines)}
    return {}


# --- scoring one part -----------------------------------------------------------------------------------

class PartResult(BaseModel):
    credit: float
    flags: list[str] = Field(default_factory=list)
    why: str


def _norm_text(s: str) -> str:
    s = re.sub(r"^(the\s+)?(consolidated\s+)?(income statement|statement of operations|balance sheet|cash[- ]flow statement|"
               r"statement of cash flows)\s*[:,-]\s*", "", s.strip().lower())
    return re.sub(r"[^a-z0-9]+", " ", s).strip()


def score_part(part: Part, given: str | None) -> PartResult:
    if given is None or not given.strip():
        return PartResult(credit=0.0, flags=["no_answer"], why="no answer")
    given = given.strip()
    if part.kind == "boolean":
        g = _norm_text(given)
        if HEDGE.search(g):
            return PartResult(credit=0.0, flags=["hedged"], why=f"both answers given: {given[:40]!r}")
        said = (False if NO_FIRST.match(g) else True if YES_FIRST.match(g)
                else False if NO_ANY.search(g) else True if YES_ANY.search(g) else None)
        if said is None:
            return PartResult(credit=0.0, flags=["unparsed"], why=f"not yes/no: {given[:40]!r}")
        ok = said == part.value
        return PartResult(credit=float(ok), why="right" if ok else f"said {'yes' if said else 'no'}")
    if part.kind == "text":
        ok = _norm_text(given) in {_norm_text(str(part.value)), *(_norm_text(a) for a in part.aliases)}
        return PartResult(credit=float(ok), why="right" if ok else f"got {given[:60]!r}")
    if part.kind == "year":
        years = re.findall(r"(?<!\d)(?:fy\s*|fiscal\s+(?:year\s+)?)?((?:19|20)\d\d)(?!\d)", given.lower())
        if len(set(years)) != 1:
            return PartResult(credit=0.0, flags=["unparsed"], why=f"not one year: {given[:40]!r}")
        ok = int(years[0]) == int(part.value)  # type: ignore[arg-type]
        return PartResult(credit=float(ok), why="right" if ok else f"year {years[0]}")
    p = parse_number(given)
    if p is None:
        return PartResult(credit=0.0, flags=["unparsed"], why=f"not a number: {given[:40]!r}")
    return _score_number(part, p)


def _score_number(part: Part, p: Parsed) -> PartResult:
    want = float(part.value)  # type: ignore[arg-type]
    got, decimals = p.value, p.decimals
    unit_ok = True
    if p.currency and (part.kind != "amount" or p.currency not in CURRENCY_OK):
        unit_ok = False
    if part.kind == "amount":
        if p.percent:
            unit_ok = False
        elif p.scale is not None and p.scale != SCALES[part.scale]:
            exact = Decimal(repr(got)) * Decimal(int(p.scale)) / Decimal(int(SCALES[part.scale]))
            got, decimals = float(exact), _decimals(exact)
    elif part.kind == "percent":
        if p.scale is not None:
            unit_ok = False
    elif part.kind in ("fraction", "ratio"):
        if p.percent:
            got, decimals = got / 100, decimals + 2
        if p.scale is not None:
            unit_ok = False
    elif part.kind == "number" and (p.percent or p.scale is not None):
        unit_ok = False
    rest = p.rest
    if part.kind == "ratio":
        rest = re.sub(r"^(x|times|:\s*1(\.0+)?|to\s+1(\.0+)?|-to-1|to one)", "", rest).strip()
    if part.kind == "percent" and rest in POINTS:  # a change in percentage points
        rest = ""
    if part.kind == "number" and part.unit and rest:
        if rest in _unit_forms(part.unit):
            rest = ""
    if rest or not unit_ok:
        return PartResult(credit=0.0, flags=["wrong_unit"], why=f"unit {(rest or p.currency or '%')!r} is not what was asked")
    eps = 1e-9 * max(1.0, abs(want))
    if abs(got - want) <= part.tol + eps:
        if part.decimals is not None and decimals > part.decimals:
            return PartResult(credit=ROUNDING_CREDIT, flags=["rounding"],
                              why=f"{got:,.{decimals}f} is right but not rounded to {part.decimals} decimal places as asked")
        return PartResult(credit=1.0, why="right")
    return PartResult(credit=0.0, flags=_diagnose(part, got, decimals, want), why=f"got {got:,.6g}, expected {want:,.6g}")


def _decimals(d: Decimal) -> int:
    """Decimal places of a number as written, trailing zeros dropped."""
    return max(0, -d.normalize().as_tuple().exponent)  # type: ignore[operator]


def _unit_forms(unit: str) -> set[str]:
    u = unit.lower().strip()
    return {u, u + "s", u.removesuffix("s")}


def _diagnose(part: Part, got: float, decimals: int, want: float) -> list[str]:
    tol = max(part.tol, 0.005 * abs(want)) + 1e-9  # diagnostics only: a little looser than scoring

    def near(x: float) -> bool:
        return abs(x - want) <= tol

    if want != 0 and near(-got):
        return ["sign"]
    if any(near(got * f) or near(-got * f) for f in (1e3, 1e6, 1e-3, 1e-6)):
        return ["scale"]
    if part.kind in ("percent", "fraction", "ratio") and any(near(got * f) for f in (100, 0.01)):
        return ["percent_vs_fraction"]
    if part.decimals is not None and decimals < part.decimals and abs(got - want) <= 0.5 * 10.0 ** -decimals + 1e-9:
        return ["rounding"]
    return []


# --- the whole answer ---------------------------------------------------------------------------------------

def check(key: AnswerKey, reply: str) -> Verdict:
    """Score one reply (or a bare answer) against the key."""
    answer = extract(reply)
    if not answer:
        return Verdict(Score(value=0.0, components={"correct": 0.0, "credit": 0.0}, explanation="no answer"),
                       ["no_answer"])
    given = split_parts(answer, key)
    results = {p.label: score_part(p, given.get(p.label)) for p in key.parts}
    total = sum(p.weight for p in key.parts)
    credit = sum(p.weight * results[p.label].credit for p in key.parts) / total
    correct = float(all(r.credit == 1.0 for r in results.values()))
    flags = sorted({f for r in results.values() for f in r.flags})
    if len(key.parts) == 1:
        why = results[key.parts[0].label].why
    else:
        why = "; ".join(f"({p.label}) {results[p.label].why} [{results[p.label].credit:g} x {p.weight:g}]"
                        for p in key.parts)
    return Verdict(Score(value=round(credit, 6), components={"correct": correct, "credit": round(credit, 6)},
                         explanation=why), flags)
