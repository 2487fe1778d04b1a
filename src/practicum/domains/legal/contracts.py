"""Generated contracts (loan, service, lease, NDA) and questions of judgment about them.

Each contract is a pure function of a seed: two parties, an effective date, numbered clauses
with a definitions clause, an order-of-precedence clause, a term, money terms with a cap and an
exception, a breach-and-cure clause whose period counts Business Days or calendar days, a
permissions clause with conditions, governing law and a (sometimes different) forum, and two
schedules: the holidays that are not Business Days, and commercial terms, one of which
contradicts a clause. About 1,000-1,600 tokens.

Question kinds (each an :class:`~practicum.domains.annotations.AnswerKey`):

* ``precedence``: two provisions disagree; which governs? (``clause``; the overridden one is a
  distractor). Tier 3 when a specific "notwithstanding" override reverses the general order.
* ``definition``: which definition of "Business Day" applies to a clause? (``clause``; the
  general definition is the distractor when a clause-specific one applies, and vice versa).
* ``deadline``: the last day to cure a breach notified on a date (``date``): Business Days per
  the definition that applies, holidays from Schedule 1, or calendar days rolled to the next
  Business Day when the contract says so. Distractors: off by one, the wrong definition.
* ``amount``: the late-payment charge (``number``): rate, days, the cap and the disputed-amount
  exception; or an NDA's liquidated damages with their aggregate cap. Distractors: the uncapped
  amount, the amount with the disputed part included.
* ``extract``: parties, term in months, governing law, effective date (``fields``). The forum
  named beside the governing law is a distractor.
* ``condition``: may a party do X, on what condition, under which clause? (free text, a
  weighted rubric: the verdict 1, the condition 2, the clause 1; the condition and clause count
  only with the right verdict).
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass, field
from datetime import date, timedelta
from typing import Any

from practicum.domains.annotations import AnswerKey

CONTRACT_KINDS = ("precedence", "definition", "deadline", "amount", "extract", "condition")
TYPES = ("loan", "service", "lease", "nda")

_STEMS = ["Harrow", "Vale", "Northgate", "Ashby", "Kestrel", "Meridian", "Brightwater", "Calder", "Fenwick", "Larch",
          "Oakridge", "Pemberton", "Quarry", "Redfern", "Saltmarsh", "Thorne", "Umber", "Wexley", "Yarrow", "Zenith",
          "Albion", "Beacon", "Corvid", "Dunmore", "Everly", "Foxglove", "Granite", "Heron", "Ironside", "Juniper"]
_KINDS = ["Holdings", "Capital", "Systems", "Logistics", "Analytics", "Properties", "Foods", "Labs", "Partners", "Works"]
_SUFFIX = ["Ltd", "Limited", "LLC", "Inc.", "PLC", "GmbH", "Pte. Ltd.", "B.V."]
_PEOPLE = ["Amara Quill", "Jonah Pike", "Leena Rao", "Tomas Herrera", "Grace Whitlow", "Idris Bello", "Mei Tanaka",
           "Sofia Marek", "Daniel Osei", "Priya Nair", "Oliver Brandt", "Hannah Cole"]
LAWS = [("England and Wales", "London"), ("the State of New York", "New York County"), ("the State of Delaware", "Wilmington"),
        ("Scotland", "Edinburgh"), ("the Province of Ontario", "Toronto"), ("Singapore", "Singapore"),
        ("the State of California", "San Francisco"), ("Ireland", "Dublin")]
_ROLES = {"loan": ("Lender", "Borrower"), "service": ("Supplier", "Customer"), "lease": ("Landlord", "Tenant"),
          "nda": ("Discloser", "Recipient")}
_TITLES = {"loan": "LOAN AGREEMENT", "service": "SERVICES AGREEMENT", "lease": "LEASE OF COMMERCIAL PREMISES",
           "nda": "MUTUAL NON-DISCLOSURE AGREEMENT"}
_NUM_WORDS = {2: "two", 3: "three", 5: "five", 7: "seven", 10: "ten", 14: "fourteen", 15: "fifteen", 20: "twenty",
              21: "twenty-one", 28: "twenty-eight", 30: "thirty", 45: "forty-five", 60: "sixty", 90: "ninety"}


def _words(n: int) -> str:
    return f"{_NUM_WORDS[n]} ({n})" if n in _NUM_WORDS else str(n)


def _company(rng: random.Random, taken: set[str]) -> str:
    while True:
        name = f"{rng.choice(_STEMS)} {rng.choice(_KINDS)} {rng.choice(_SUFFIX)}"
        if name.split()[0] not in {t.split()[0] for t in taken}:
            taken.add(name)
            return name


def long_date(d: date) -> str:
    return f"{d.day} {d.strftime('%B')} {d.year}"


def _money(x: float) -> str:
    return f"${x:,.2f}" if x != int(x) else f"${int(x):,}"


@dataclass
class Permission:
    ask: str  # "May the Tenant sublet part of the Premises?"
    allowed: bool
    condition: str | None  # the condition, as the contract words it
    patterns: list[str]  # regexes a correct answer's condition matches
    clause: str = ""


@dataclass
class Contract:
    kind: str
    roles: tuple[str, str]
    parties: tuple[str, str]
    effective: date
    term_months: int
    law: str
    forum: str
    clauses: list[tuple[str, str, list[tuple[str, str]]]] = field(default_factory=list)  # (num, heading, [(sub, text)])
    schedules: list[tuple[str, str, list[tuple[str, str]]]] = field(default_factory=list)
    facts: dict[str, Any] = field(default_factory=dict)

    def text(self) -> str:
        a, b = self.roles
        lines = [_TITLES[self.kind], "",
                 f"This Agreement is dated {long_date(self.effective)} (the \"Effective Date\") and is made between "
                 f"{self.parties[0]} (the \"{a}\") and {self.parties[1]} (the \"{b}\").", ""]
        for num, heading, subs in self.clauses:
            lines.append(f"{num}. {heading.upper()}")
            lines += [f"{s} {t}" for s, t in subs]
            lines.append("")
        for name, heading, paras in self.schedules:
            lines.append(f"{name.upper()}: {heading.upper()}")
            lines += [f"{p}. {t}" for p, t in paras]
            lines.append("")
        return "\n".join(lines).strip() + "\n"


def _business_days_after(start: date, n: int, holidays: set[date], saturday_ok: bool = False) -> date:
    d, count = start, 0
    while count < n:
        d += timedelta(days=1)
        weekend = d.weekday() == 6 or (d.weekday() == 5 and not saturday_ok)
        if not weekend and d not in holidays:
            count += 1
    return d


def _next_business_day(d: date, holidays: set[date]) -> date:
    while d.weekday() >= 5 or d in holidays:
        d += timedelta(days=1)
    return d


def make_contract(rng: random.Random) -> Contract:
    """One contract, all of its facts recorded in ``facts`` for the questions."""
    kind = rng.choice(TYPES)
    roles = _ROLES[kind]
    taken: set[str] = set()
    p0 = _company(rng, taken)
    p1 = rng.choice(_PEOPLE) if kind == "lease" and rng.random() < 0.3 else _company(rng, taken)
    effective = date(rng.randint(2024, 2027), rng.randint(1, 12), rng.randint(1, 28))
    term = rng.choice([6, 12, 18, 24, 36, 48, 60])
    law, law_city = rng.choice(LAWS)
    forum = law_city if rng.random() < 0.5 else rng.choice([c for _, c in LAWS if c != law_city])
    c = Contract(kind, roles, (p0, p1), effective, term, law, forum)
    a, b = roles
    f = c.facts

    # clause numbering varies: an optional clause shifts everything after it
    extra_early = rng.random() < 0.5
    n_def, n_term = 1, 2
    n_pay = 4 if extra_early else 3
    n_breach, n_perm, n_law = n_pay + 1, n_pay + 2, n_pay + 3

    # 1. definitions, interpretation, precedence
    schedules_prevail = rng.random() < 0.5
    override = rng.random() < 0.35  # a specific clause reverses the general order (tier 3)
    roll_forward = rng.random() < 0.5
    defs = [("1.1", "\"Business Day\" means a day other than a Saturday, a Sunday or a day listed in Schedule 1."),
            ("1.2", "In this Agreement: " + " ".join(_type_definitions(kind)))]
    interp = ("1.3", "Where a period expressed in days (not Business Days) ends on a day that is not a Business Day, "
                     "the period ends on the next Business Day." if roll_forward else
                     "Periods expressed in days are calendar days and are not extended because they end on a day that "
                     "is not a Business Day.")
    first, second = ("the Schedules", "the clauses of this Agreement") if schedules_prevail else \
        ("the clauses of this Agreement", "the Schedules")
    prec = ("1.4", f"Order of precedence. If there is any conflict or inconsistency between the clauses of this "
                   f"Agreement and the Schedules, {first} prevail over {second}.")
    c.clauses.append((str(n_def), "Definitions and interpretation", [*defs, interp, prec]))
    f["general_def"] = "1.1"
    f["roll_forward"] = roll_forward

    # 2. term
    c.clauses.append((str(n_term), "Term", [
        ("2.1", f"This Agreement commences on the Effective Date and continues for {_words(term)} months, unless "
                f"terminated earlier under clause {n_breach}."),
        ("2.2", rng.choice(["Either party may give notice not to renew at least ninety (90) days before expiry.",
                            "The parties may extend the term only by a written agreement signed by both of them."]))]))
    if extra_early:
        c.clauses.append(("3", "Warranties and insurance", [
            ("3.1", "Each party warrants that it has full power and authority to enter into this Agreement."),
            ("3.2", f"The {b} shall maintain adequate insurance with a reputable insurer throughout the term.")]))

    # money terms, the conflict with Schedule 2, and the late charge
    pay = str(n_pay)
    period = rng.choice([14, 21, 30])
    sched_period = rng.choice([p for p in (15, 28, 45, 60) if p != period])
    rate = rng.choice([4, 5, 6, 8, 10, 12])
    cap_pct = rng.choice([5, 8, 10, 15])
    pay_subs, money = _money_clause(kind, rng, pay, a, b, period, rate, cap_pct)
    f.update(money)
    sched2_para = "2"
    conflict_clause = f"{pay}.2"
    pay_subs.append((f"{pay}.{len(pay_subs) + 1}", "Amounts disputed in good faith by written notice are not overdue "
                                                   "while the dispute continues, and no charge accrues on them."))
    if override:  # a specific provision reverses the general order of clause 1.4
        winner, loser = ((conflict_clause, f"paragraph {sched2_para} of Schedule 2") if schedules_prevail else
                         (f"paragraph {sched2_para} of Schedule 2", f"clause {conflict_clause}"))
        winner = f"clause {winner}" if winner == conflict_clause else winner
        pay_subs.append((f"{pay}.{len(pay_subs) + 1}", f"Notwithstanding clause 1.4, {winner} prevails over {loser}."))
    c.clauses.append((pay, money["heading"], pay_subs))
    sched_governs = (not schedules_prevail) if override else schedules_prevail
    f["conflict"] = {"clause": conflict_clause, "schedule": f"Schedule 2, paragraph {sched2_para}",
                     "clause_days": period, "schedule_days": sched_period, "schedule_governs": sched_governs,
                     "override": override, "subject": money["period_subject"]}
    f["period_days"] = sched_period if sched_governs else period

    # breach and cure, with an optional clause-specific Business Day definition
    br = str(n_breach)
    cure = rng.choice([5, 7, 10, 14, 15, 20, 30])
    cure_unit = rng.choice(["Business Days", "days"])
    local_def = cure_unit == "Business Days" and rng.random() < 0.5
    subs = [(f"{br}.1", f"Either party may terminate this Agreement by written notice if the other party commits a "
                        f"material breach and fails to remedy it within {_words(cure)} {cure_unit} after receiving "
                        f"written notice of the breach."),
            (f"{br}.2", f"The {a} may terminate immediately by written notice if the {b} becomes insolvent.")]
    if local_def:
        subs.append((f"{br}.3", f"For the purposes of this clause {br} only, \"Business Day\" means any day other than a "
                                f"Sunday or a day listed in Schedule 1."))
    c.clauses.append((br, "Breach and termination", subs))
    f["cure"] = {"clause": f"{br}.1", "days": cure, "unit": cure_unit, "local_def": f"{br}.3" if local_def else None}

    # permissions with conditions
    perms = _permissions(kind, rng, a, b)
    for i, p in enumerate(perms, 1):
        p.clause = f"{n_perm}.{i}"
    c.clauses.append((str(n_perm), "Permitted acts and restrictions",
                      [(p.clause, _permission_text(p)) for p in perms]))
    f["permissions"] = perms
    f["perm_clause"] = str(n_perm)

    # governing law and forum
    c.clauses.append((str(n_law), "Governing law and jurisdiction", [
        (f"{n_law}.1", f"This Agreement and any dispute arising out of it are governed by the laws of {law}."),
        (f"{n_law}.2", f"The courts sitting in {forum} have {rng.choice(['exclusive', 'non-exclusive'])} jurisdiction "
                       f"over any dispute arising out of this Agreement.")]))

    # Schedule 1: holidays around the period that questions ask about
    anchor = effective + timedelta(days=rng.randint(40, 300))
    holidays = sorted({anchor + timedelta(days=rng.randint(1, 25)) for _ in range(rng.randint(2, 4))})
    holidays = [h for h in holidays if h.weekday() < 5] or [_next_business_day(anchor + timedelta(days=3), set())]
    c.schedules.append(("Schedule 1", "Holidays", [(str(i), long_date(h)) for i, h in enumerate(holidays, 1)]))
    f["holidays"] = holidays
    f["anchor"] = anchor
    c.schedules.append(("Schedule 2", "Commercial terms", [
        ("1", money["schedule_line"]),
        (sched2_para, f"{money['period_subject'][0].upper()}{money['period_subject'][1:]} within "
                      f"{_words(sched_period)} days {money['period_from']}.")]))
    return c


def _type_definitions(kind: str) -> list[str]:
    table = {
        "loan": ["\"Loan\" means the principal amount advanced under clause 3 or 4, as applicable.",
                 "\"Interest Rate\" means the rate stated in Schedule 2."],
        "service": ["\"Services\" means the services described in the statement of work agreed by the parties.",
                    "\"Fees\" means the fees stated in Schedule 2."],
        "lease": ["\"Premises\" means the unit described in the particulars, excluding the common parts.",
                  "\"Rent\" means the annual rent stated in Schedule 2, payable monthly."],
        "nda": ["\"Confidential Information\" means information disclosed by one party to the other that is marked "
                "confidential or would reasonably be understood to be confidential.",
                "\"Purpose\" means evaluating a possible business relationship between the parties."],
    }
    return table[kind]


def _money_clause(kind: str, rng: random.Random, pay: str, a: str, b: str, period: int, rate: int,
                  cap_pct: int) -> tuple[list[tuple[str, str]], dict[str, Any]]:
    if kind == "nda":
        per = rng.choice([5000, 10000, 25000, 40000])
        cap = per * rng.choice([2, 3, 4])
        subs = [(f"{pay}.1", f"For each breach of clause {int(pay) + 2} the breaching party shall pay liquidated damages "
                             f"of {_money(per)}, which the parties agree is a genuine pre-estimate of loss."),
                (f"{pay}.2", f"Liquidated damages are payable within {_words(period)} days after a written demand."),
                (f"{pay}.3", f"The aggregate liability for liquidated damages under clause {pay}.1 shall not exceed "
                             f"{_money(cap)}.")]
        return subs, {"heading": "Liquidated damages", "nda_per": per, "nda_cap": cap, "cap_clause": f"{pay}.3",
                      "period_subject": "liquidated damages are payable", "period_from": "after a written demand",
                      "schedule_line": f"Liquidated damages per breach: {_money(per)}."}
    base = {"loan": rng.choice([50000, 120000, 250000, 400000]), "service": rng.choice([4000, 7500, 12000, 18000]),
            "lease": rng.choice([2500, 3800, 5200, 9000])}[kind]
    what = {"loan": ("each instalment", "Instalment"), "service": ("each invoice", "Fees"),
            "lease": ("each monthly payment of Rent", "Rent")}[kind]
    first = {"loan": f"The {a} shall advance {_money(base)} to the {b} on the Effective Date.",
             "service": f"The {b} shall pay the Fees of {_money(base)} per month, invoiced monthly in arrears.",
             "lease": f"The {b} shall pay Rent of {_money(base)} per month."}[kind]
    due = {"loan": f"The {b} shall pay {what[0]} within {_words(period)} days after its due date.",
           "service": f"The {b} shall pay {what[0]} within {_words(period)} days after the date of the invoice.",
           "lease": f"The {b} shall pay {what[0]} within {_words(period)} days after the first day of each month."}[kind]
    late = (f"If any amount is not paid when due, the {b} shall pay a late-payment charge on the overdue amount at "
            f"{rate}% per annum, calculated daily on the basis of a 365-day year from the due date until payment. "
            f"The late-payment charge on any overdue amount shall not exceed {cap_pct}% of that amount.")
    subs = [(f"{pay}.1", first), (f"{pay}.2", due), (f"{pay}.3", late)]
    subject = {"loan": "each instalment shall be paid", "service": "each invoice shall be paid",
               "lease": "each monthly payment of Rent shall be paid"}[kind]
    frm = {"loan": "after its due date", "service": "after the date of the invoice",
           "lease": "after the first day of each month"}[kind]
    return subs, {"heading": {"loan": "The loan and repayment", "service": "Fees and payment",
                              "lease": "Rent and payment"}[kind],
                  "base": base, "rate": rate, "cap_pct": cap_pct, "late_clause": f"{pay}.3",
                  "period_subject": subject, "period_from": frm,
                  "schedule_line": {"loan": f"Interest Rate: {rng.choice([4, 5, 6, 7])}% per annum.",
                                    "service": f"Fees: {_money(base)} per month.",
                                    "lease": f"Rent: {_money(base * 12)} per year."}[kind]}


def _permissions(kind: str, rng: random.Random, a: str, b: str) -> list[Permission]:
    pool = {
        "nda": [
            Permission(f"May the {b} disclose Confidential Information to its professional advisers?", True,
                       "provided that they are bound by duties of confidentiality no less protective than this Agreement",
                       [r"(bound|subject) (by|to) .*confidential", r"duties? of confidential", r"confidentiality (obligation|dut)"]),
            Permission(f"May the {b} disclose Confidential Information when a court orders it to?", True,
                       f"provided that, where the law allows, it gives the {a} prompt written notice before disclosing",
                       [r"(prompt|prior|advance)?\s*(written )?notice", r"notif(y|ies|ication)"]),
            Permission(f"May the {b} share Confidential Information with its affiliates?", True,
                       f"only with the {a}'s prior written consent",
                       [r"(prior |advance )?(written )?consent", r"permission"]),
            Permission(f"May the {b} use Confidential Information to develop a competing product?", False, None, []),
        ],
        "lease": [
            Permission(f"May the {b} sublet part of the Premises?", True,
                       f"with the {a}'s prior written consent, which shall not be unreasonably withheld",
                       [r"consent", r"permission|approv"]),
            Permission(f"May the {b} make alterations to the Premises?", True,
                       "provided that they are non-structural and the Tenant reinstates the Premises at the end of the term",
                       [r"non-?structural", r"reinstat|restor"]),
            Permission(f"May the {b} assign this lease?", False, None, []),
            Permission(f"May the {b} use the Premises for residential purposes?", False, None, []),
        ],
        "loan": [
            Permission(f"May the {b} prepay the Loan early?", True,
                       f"on giving the {a} not less than ten (10) Business Days' written notice",
                       [r"notice", r"\b10\b|\bten\b"]),
            Permission(f"May the {b} grant security over its assets to another lender?", True,
                       f"only with the {a}'s prior written consent", [r"consent", r"permission|approv"]),
            Permission(f"May the {b} use the Loan to pay dividends to its shareholders?", False, None, []),
            Permission(f"May the {a} transfer its rights under this Agreement?", True,
                       f"provided that it gives the {b} written notice of the transfer",
                       [r"notice|notif"]),
        ],
        "service": [
            Permission(f"May the {a} subcontract the Services?", True,
                       f"with the {b}'s prior written consent, and the {a} remains responsible for its subcontractors",
                       [r"consent", r"permission|approv"]),
            Permission(f"May the {a} name the {b} as a reference customer?", True,
                       f"only with the {b}'s prior written approval of the wording",
                       [r"approv|consent"]),
            Permission(f"May the {b} solicit the {a}'s staff for employment during the term?", False, None, []),
            Permission(f"May the {a} suspend the Services for non-payment?", True,
                       f"after giving the {b} at least seven (7) days' written notice that an undisputed invoice is overdue",
                       [r"notice", r"\b7\b|\bseven\b"]),
        ],
    }[kind]
    chosen = pool[:]
    rng.shuffle(chosen)
    return chosen[:3]


def _permission_text(p: Permission) -> str:
    body = p.ask.removeprefix("May ").rstrip("?")
    subject, _, rest = body.partition(" ")
    subject = "The " + body.split(" ", 2)[1] if body.startswith("the ") else subject
    verb_phrase = body.split(" ", 2)[2] if body.startswith("the ") else rest
    if p.allowed:
        return f"{subject} may {verb_phrase}, {p.condition}."
    return f"{subject} shall not {verb_phrase} in any circumstances."


# --- questions ------------------------------------------------------------------------------------

@dataclass
class Question:
    kind: str
    tier: int
    question: str
    instruction: str
    key: AnswerKey
    reference: str


CLAUSE_FORMAT = "Answer with the provision's number only, for example <answer>7.2</answer> or <answer>Schedule 2, paragraph 1</answer>."


def ask(c: Contract, kind: str, rng: random.Random) -> Question:
    return {"precedence": _q_precedence, "definition": _q_definition, "deadline": _q_deadline, "amount": _q_amount,
            "extract": _q_extract, "condition": _q_condition}[kind](c, rng)


def _q_precedence(c: Contract, rng: random.Random) -> Question:
    k = c.facts["conflict"]
    gold, other = (k["schedule"], k["clause"]) if k["schedule_governs"] else (k["clause"], k["schedule"])
    q = (f"Clause {k['clause']} and {k['schedule']} state different periods for the same payment. "
         f"Which of the two provisions governs?")
    key = AnswerKey.model_validate(dict(answer_type="clause", gold=gold, distractors=[{"value": other, "label": "overridden_clause"}]))
    return Question("precedence", 3 if k["override"] else 2, q, CLAUSE_FORMAT, key, f"<answer>{gold}</answer>")


def _q_definition(c: Contract, rng: random.Random) -> Question:
    cure = c.facts["cure"]
    gold = cure["local_def"] or c.facts["general_def"]
    other = c.facts["general_def"] if cure["local_def"] else None
    q = (f"Clause {cure['clause']} sets a period for remedying a breach. Which clause contains the definition of "
         f"\"Business Day\" that applies when that period is counted?" if cure["unit"] == "Business Days" else
         f"Clause {cure['clause']} sets a period in days. Which clause defines \"Business Day\", the term that decides "
         f"when such a period may be extended?")
    key = AnswerKey.model_validate(dict(answer_type="clause", gold=gold,
                    distractors=[{"value": other, "label": "wrong_section_definition"}] if other else []))
    return Question("definition", 2 if cure["local_def"] else 1, q, CLAUSE_FORMAT, key, f"<answer>{gold}</answer>")


def cure_deadline(c: Contract, notice: date, local: bool | None = None) -> date:
    cure = c.facts["cure"]
    holidays = set(c.facts["holidays"])
    use_local = cure["local_def"] is not None if local is None else local
    if cure["unit"] == "Business Days":
        return _business_days_after(notice, cure["days"], holidays, saturday_ok=use_local)
    end = notice + timedelta(days=cure["days"])
    return _next_business_day(end, holidays) if c.facts["roll_forward"] else end


def _q_deadline(c: Contract, rng: random.Random) -> Question:
    cure = c.facts["cure"]
    notice = c.facts["anchor"] + timedelta(days=rng.randint(-3, 3))
    gold = cure_deadline(c, notice)
    distractors = [{"value": (gold - timedelta(days=1)).isoformat(), "label": "off_by_one"},
                   {"value": (gold + timedelta(days=1)).isoformat(), "label": "off_by_one"}]
    if cure["local_def"]:
        wrong = cure_deadline(c, notice, local=False)
        if wrong != gold:
            distractors.insert(0, {"value": wrong.isoformat(), "label": "wrong_definition"})
    elif cure["unit"] == "days":
        plain = notice + timedelta(days=cure["days"])
        if plain != gold:
            distractors.insert(0, {"value": plain.isoformat(), "label": "not_rolled_forward"})
    q = (f"The party in breach received written notice of a material breach on {notice.strftime('%A')} "
         f"{long_date(notice)}. Under clause {cure['clause']}, what is the last day on which it can remedy the breach "
         f"so that the Agreement cannot be terminated for it?")
    tier = 3 if cure["local_def"] or (cure["unit"] == "days" and c.facts["roll_forward"]) else 2
    key = AnswerKey.model_validate(dict(answer_type="date", gold=gold.isoformat(), distractors=distractors))
    return Question("deadline", tier, q, "Give the date as YYYY-MM-DD, for example <answer>2025-03-14</answer>.", key,
                    f"<answer>{gold.isoformat()}</answer>")


def _q_amount(c: Contract, rng: random.Random) -> Question:
    f = c.facts
    fmt = "Give the amount in dollars as a number, for example <answer>1234.56</answer>."
    if c.kind == "nda":
        n = rng.randint(2, 6)
        gold = min(n * f["nda_per"], f["nda_cap"])
        q = (f"The {c.roles[1]} commits {n} separate breaches of clause {f['perm_clause']}. What is the total of "
             f"liquidated damages payable under the Agreement?")
        ds = [{"value": n * f["nda_per"], "label": "cap_ignored"}] if n * f["nda_per"] != gold else []
        key = AnswerKey.model_validate(dict(answer_type="number", gold=gold, tolerance=0.01, unit="dollars", distractors=ds))
        return Question("amount", 2 if ds else 1, q, fmt, key, f"<answer>{gold}</answer>")
    amount = f["base"] * rng.choice([1, 1, 2, 3])
    disputed = rng.choice([0, 0, round(amount * rng.choice([0.1, 0.25, 0.4]))])
    days = rng.randint(10, 400)
    overdue = amount - disputed
    raw = round(overdue * f["rate"] / 100 * days / 365, 2)
    cap = round(overdue * f["cap_pct"] / 100, 2)
    gold = min(raw, cap)
    dispute_txt = (f" Before the due date the {c.roles[1]} had disputed {_money(disputed)} of it in good faith by "
                   f"written notice, and the dispute continued until the payment." if disputed else "")
    q = (f"A payment of {_money(amount)} was due on {long_date(f['anchor'])}. It was paid in full {days} days after "
         f"the due date."
         f"{dispute_txt} What late-payment charge is payable on the overdue amount under the Agreement "
         f"(rounded to the cent)?")
    ds = []
    uncapped = round(overdue * f["rate"] / 100 * days / 365, 2)
    if abs(uncapped - gold) > 0.01:
        ds.append({"value": uncapped, "label": "cap_ignored"})
    if disputed:
        with_disputed = min(round(amount * f["rate"] / 100 * days / 365, 2), round(amount * f["cap_pct"] / 100, 2))
        ds.append({"value": with_disputed, "label": "disputed_amount_included"})
    tier = 1 + bool(disputed) + (raw > cap)
    key = AnswerKey.model_validate(dict(answer_type="number", gold=gold, tolerance=0.01, unit="dollars", distractors=ds))
    return Question("amount", tier, q, fmt, key, f"<answer>{gold:.2f}</answer>")


def _q_extract(c: Contract, rng: random.Random) -> Question:
    gold = {"parties": list(c.parties), "term_months": c.term_months,
            "governing_law": c.law.removeprefix("the "), "effective_date": c.effective.isoformat()}
    bases = {c.law, c.law.removeprefix("the "), c.law.removeprefix("the State of ").removeprefix("the Province of ")}
    law_aliases = sorted({f"{pre}{b}" for b in bases for pre in ("", "the laws of ", "laws of ", "the law of ")})
    q = "Extract the parties, the initial term in months, the governing law and the effective date of this Agreement."
    instr = ("Write one field per line inside the tags, exactly as: <answer>\nparties: NAME; NAME\nterm_months: 12\n"
             "governing_law: JURISDICTION\neffective_date: YYYY-MM-DD\n</answer>")
    key = AnswerKey.model_validate(dict(answer_type="fields", gold=gold, field_types={"governing_law": "label", "term_months": "number",
                                                                 "effective_date": "date", "parties": "set"},
                    aliases=law_aliases, unit="months"))
    ref = (f"<answer>\nparties: {c.parties[0]}; {c.parties[1]}\nterm_months: {c.term_months}\n"
           f"governing_law: {gold['governing_law']}\neffective_date: {c.effective.isoformat()}\n</answer>")
    return Question("extract", 1, q, instr, key, ref)


def _q_condition(c: Contract, rng: random.Random) -> Question:
    p = rng.choice(c.facts["permissions"])
    # a verdict at the start, not hedged with the other one ("Yes or no", "Yes/No", "No and yes")
    hedge = r"(?!\W*(or|and|/)\W*(yes|no|not|permitted|allowed|prohibited)\b)"
    yes, no = rf"^\W*(yes|permitted|allowed)\b{hedge}", rf"^\W*(no|not permitted|prohibited)\b{hedge}"
    clause_re = r"(?<![\d.])" + re.escape(p.clause) + r"(?![\d])"
    if p.allowed:
        rubric = [{"id": "verdict", "weight": 1, "description": "Says it is permitted", "patterns": [yes]},
                  {"id": "condition", "weight": 2, "description": f"States the condition: {p.condition}",
                   "patterns": [yes, "|".join(p.patterns)], "match": "all"},
                  {"id": "clause", "weight": 1, "description": f"Names clause {p.clause}",
                   "patterns": [yes, clause_re], "match": "all"}]
        ref = f"<answer>Yes, under clause {p.clause}, {p.condition}.</answer>"
    else:
        rubric = [{"id": "verdict", "weight": 2, "description": "Says it is not permitted", "patterns": [no]},
                  {"id": "clause", "weight": 1, "description": f"Names clause {p.clause}",
                   "patterns": [no, clause_re], "match": "all"}]
        ref = f"<answer>No. Clause {p.clause} prohibits it in all circumstances.</answer>"
    instr = ("Begin the answer with Yes or No, then name the clause and state any condition, for example "
             "<answer>Yes, under clause 4.2, provided that ...</answer>.")
    key = AnswerKey.model_validate(dict(answer_type="label", gold=None, rubric=rubric))
    return Question("condition", 2 if p.allowed else 1, p.ask + " If so, on what condition? Name the clause.", instr,
                    key, ref)
