"""The legal domain's own answer types, added to the generic ones of
:mod:`practicum.domains.annotations` (``label``, ``number``, ``date``, ``set``, ``fields``):

* ``clause``: a provision reference. ``Clause 4.2``, ``cl. 4.2``, ``section 4.2``, ``§ 4.2`` and
  ``4.2`` are the same; so are ``Article 21A`` and ``21A``; ``Schedule 2, paragraph 3``,
  ``paragraph 3 of Schedule 2`` and ``Sched. 2 para. 3`` are the same. The first reference in
  the answer counts.
* ``clause_set``: several such references (``set`` semantics: partial credit by overlap).
* ``citation``: a case citation, parsed with eyecite: the same volume, reporter (eyecite's
  corrected abbreviation, so ``F. 3d`` is ``F.3d``) and first page. A pin cite given as the first
  page is wrong. The first full or short case citation in the answer counts.
* ``citation_set``: every full case citation eyecite finds in the answer against the gold list
  (partial credit by overlap).
* ``court``: a court, as its courts-db id (``ca9``), its name, its citation abbreviation
  (``9th Cir.``), or any string courts-db's ``find_court`` resolves to that id.
* ``license_conditions``: choosealicense condition labels (``License and copyright notice``) or
  tags (``include-copyright``), compared as sets; ``none`` is the empty set.
"""

from __future__ import annotations

import logging
import re
from functools import cache
from typing import Any

from practicum.domains.annotations import AnswerKey, Comparator, Match, _items, norm_label

_SCHED = re.compile(r"sched(?:ule|\.)?\s*([0-9]+|[a-z])\b.*?para(?:graph|\.)?\s*([0-9]+[a-z]?)", re.IGNORECASE)
_PARA_OF = re.compile(r"para(?:graph|\.)?\s*([0-9]+[a-z]?)\s*(?:of|,|in)?\s*(?:the\s+)?sched(?:ule|\.)?\s*([0-9]+|[a-z])\b",
                      re.IGNORECASE)
_NUM = re.compile(r"(?<![\w.])(\d+[A-Z]{0,2}(?:\.\d+)*(?:\([a-z0-9]+\))*)(?![\w])", re.IGNORECASE)


def clause_ref(text: str) -> str | None:
    """The canonical form of the first provision reference in ``text``: ``4.2``, ``21a``,
    ``schedule 2 paragraph 3``; None when there is none."""
    t = " ".join(str(text).split())
    m = _SCHED.search(t)
    p = _PARA_OF.search(t)
    if m and (not p or m.start() <= p.start()):
        return f"schedule {m.group(1).casefold()} paragraph {m.group(2).casefold()}"
    if p:
        return f"schedule {p.group(2).casefold()} paragraph {p.group(1).casefold()}"
    n = _NUM.search(t)
    return n.group(1).casefold().rstrip(".") if n else None


def _cmp_clause(given: str, gold: Any, key: AnswerKey) -> Match:
    got, want = clause_ref(given), clause_ref(str(gold))
    if got is None:
        return Match(0.0, f"no clause reference in {given[:80]!r}")
    ok = got == want
    return Match(float(ok), "right" if ok else f"got {got!r}, expected {want!r}")


def clause_refs(text: str) -> list[str]:
    """Every provision reference in ``text``, canonical, in order: "Articles 5, 6 and 8" gives 5, 6, 8."""
    t = " ".join(str(text).split())
    out = [f"schedule {m.group(1).casefold()} paragraph {m.group(2).casefold()}" for m in _SCHED.finditer(t)]
    out += [f"schedule {m.group(2).casefold()} paragraph {m.group(1).casefold()}" for m in _PARA_OF.finditer(t)]
    t = _PARA_OF.sub(" ", _SCHED.sub(" ", t))
    out += [m.group(1).casefold().rstrip(".") for m in _NUM.finditer(t)]
    return list(dict.fromkeys(out))


def _cmp_clause_set(given: str, gold: Any, key: AnswerKey) -> Match:
    got = set(clause_refs(given))
    want = {r for g in (gold if isinstance(gold, list) else [gold]) for r in clause_refs(str(g))}
    inter, union = len(got & want), len(got | want)
    return Match(inter / union if union else 1.0, f"{inter} of {len(want)} references, {len(got) - inter} extra")


@cache
def _eyecite() -> Any:
    import eyecite

    # eyecite logs "Unknown overlap case" at warning level for ordinary text: not our business
    logging.getLogger("eyecite").setLevel(logging.ERROR)
    return eyecite


def case_citations(text: str, full_only: bool = False) -> list[tuple[str, str, str]]:
    """(volume, reporter, page) of each case citation eyecite finds in ``text``, in order."""
    from eyecite.models import FullCaseCitation, ShortCaseCitation

    out = []
    for c in _eyecite().get_citations(text):
        kinds = (FullCaseCitation,) if full_only else (FullCaseCitation, ShortCaseCitation)
        if isinstance(c, kinds) and c.groups.get("volume") and c.groups.get("page"):
            if isinstance(c, ShortCaseCitation):
                continue  # its page is a pin cite, not the first page
            out.append((c.groups["volume"], c.corrected_reporter(), c.groups["page"]))
    return out


def citation_text(c: tuple[str, str, str]) -> str:
    return " ".join(c)


def _cmp_citation(given: str, gold: Any, key: AnswerKey) -> Match:
    got, want = case_citations(given), case_citations(str(gold))
    if not want:
        raise ValueError(f"gold {gold!r} is not a case citation eyecite can read")
    if not got:
        return Match(0.0, f"no case citation in {given[:80]!r}")
    ok = got[0] == want[0]
    return Match(float(ok), "right" if ok else f"got {citation_text(got[0])!r}, expected {citation_text(want[0])!r}")


def _each_line(text: str) -> list[tuple[str, str, str]]:
    # one line (or ;-separated part) at a time: bare citations one per line run together otherwise
    # ("903 F.2d 10\n985 F.2d 206" reads as a pin cite "10, 985")
    parts = [p for line in text.splitlines() for p in line.split(";") if p.strip()]
    return [c for p in parts for c in case_citations(p, full_only=True)]


def _cmp_citation_set(given: str, gold: Any, key: AnswerKey) -> Match:
    got = set(_each_line(given))
    want = {c for g in (gold if isinstance(gold, list) else [gold]) for c in case_citations(str(g), full_only=True)}
    inter, union = len(got & want), len(got | want)
    return Match(inter / union if union else 1.0, f"{inter} of {len(want)} citations, {len(got) - inter} extra")


@cache
def court_names(court_id: str) -> frozenset[str]:
    import courts_db

    names = set()
    for c in courts_db.find_court_by_id(court_id):
        names |= {norm_label(c["name"]), norm_label(c.get("citation_string") or "")}
        names |= {norm_label(n) for n in c.get("examples", [])}
    return frozenset(n for n in names if n)


def _cmp_court(given: str, gold: Any, key: AnswerKey) -> Match:
    import courts_db

    want = str(gold)
    g = norm_label(given)
    ok = g == want.casefold() or g in court_names(want) or want in courts_db.find_court(given.strip())
    return Match(float(ok), "right" if ok else f"{given[:80]!r} is not the court {want!r}")


def _cmp_conditions(given: str, gold: Any, key: AnswerKey) -> Match:
    from practicum.domains.legal.licences import condition_tag

    got = {condition_tag(x) or x for x in _items(given)}
    want = set(gold)
    inter, union = len(got & want), len(got | want)
    value = inter / union if union else 1.0
    return Match(value, "right" if value == 1 else f"conditions {sorted(got) or 'none'}, expected {sorted(want) or 'none'}")


COMPARATORS: dict[str, Comparator] = {"clause": _cmp_clause, "clause_set": _cmp_clause_set, "citation": _cmp_citation,
                                      "citation_set": _cmp_citation_set, "court": _cmp_court,
                                      "license_conditions": _cmp_conditions}
