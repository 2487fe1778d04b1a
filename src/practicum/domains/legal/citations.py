"""Citation questions: a generated passage of a judicial opinion that cites real reporters and
real courts, read back with eyecite.

A passage has three to five propositions, each supported by a full case citation
(``Name v. Name, 123 F.3d 456, 460 (9th Cir. 1999)``), plus a statute citation
(``42 U.S.C. § 1983``), an ``Id.`` and a short cite of an earlier case, which are not full case
citations. Reporters and their years come from ``reporters-db`` (an edition's years end where the
next edition starts); courts and their abbreviations from ``courts-db``. Every passage is read
back with eyecite before it is used: the full citations eyecite finds, and the court it resolves
each parenthetical to, must be exactly the planted ones, or the passage is drawn again.

* ``citation_find`` (tier 1-2): which case is cited for a proposition? (``citation``; the other
  cases and the pin cite given as the first page are distractors).
* ``citation_list`` (tier 2): every full case citation, none of the statute, ``Id.`` or short
  cites (``citation_set``, partial credit by overlap).
* ``citation_court`` (tier 2): which court decided a cited case? (``court``, by courts-db.)
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from functools import cache

from practicum.domains.annotations import AnswerKey
from practicum.domains.legal.checks import _eyecite, citation_text
from practicum.domains.legal.question import TextQuestion

CITATION_KINDS = ("citation_find", "citation_list", "citation_court")

# (edition, courts that publish in it); years come from reporters-db and courts-db
_REPORTERS = {
    "F.2d": ["ca1", "ca2", "ca3", "ca4", "ca5", "ca7", "ca8", "ca9", "ca10", "cadc"],
    "F.3d": ["ca1", "ca2", "ca3", "ca4", "ca5", "ca6", "ca7", "ca8", "ca9", "ca10", "ca11", "cadc", "cafc"],
    "F.4th": ["ca1", "ca2", "ca3", "ca5", "ca6", "ca7", "ca9", "ca11", "cadc"],
    "F. Supp. 2d": ["nysd", "cand", "ilnd", "txsd", "mad", "njd", "paed"],
    "F. Supp. 3d": ["nysd", "cand", "ilnd", "txsd", "mad", "njd", "paed"],
    "A.3d": ["pa", "nj", "conn", "md", "vt"],
    "P.3d": ["colo", "ariz", "wash", "utah", "nev"],
    "N.E.3d": ["mass", "ohio", "ind", "ill"],
    "N.W.2d": ["minn", "wis", "iowa", "neb", "nd"],
    "So. 3d": ["fla", "ala", "miss", "la"],
    "S.E.2d": ["ga", "nc", "va", "sc", "wva"],
    "U.S.": ["scotus"],
}
_NAMES = ["Abbott", "Barlow", "Carrington", "Delgado", "Ellison", "Fairbanks", "Gallagher", "Hollis", "Iverson",
          "Jaramillo", "Kessler", "Lindqvist", "Montoya", "Novak", "Okafor", "Prescott", "Quintero", "Rasmussen",
          "Sandoval", "Thibodeaux", "Underhill", "Valdez", "Whitaker", "Yamamoto", "Zielinski"]
_ENTITIES = ["Acme Freight Co.", "Harbor Mutual Insurance Co.", "City of Lakewood", "Northline Rail Corp.",
             "Summit Health Sys., Inc.", "Board of Education", "Granite State Bank", "Pioneer Builders, LLC"]
PROPOSITIONS = [
    "a contract term is ambiguous only if it is reasonably susceptible to more than one meaning",
    "a party who waives a condition cannot later insist on its performance",
    "an exclusion clause is construed narrowly against the party relying on it",
    "a notice that does not identify the breach does not start the cure period",
    "a liquidated damages clause is unenforceable where it bears no relation to anticipated loss",
    "the implied covenant of good faith cannot override an express term",
    "a forum-selection clause is presumptively valid",
    "an employer is vicariously liable only for torts committed within the scope of employment",
    "the statute of limitations begins to run when the plaintiff discovers the injury",
    "a landlord must mitigate damages after a tenant abandons the premises",
    "summary judgment is improper where a genuine dispute of material fact exists",
    "an arbitration clause survives the termination of the contract that contains it",
    "a guarantor is discharged by a material variation of the guaranteed obligation",
    "a confidentiality obligation does not extend to information already in the public domain",
    "specific performance is available only where damages would be an inadequate remedy",
]
_OPENERS = ["We agree with the district court that", "It is settled that", "The defendant does not dispute that",
            "Courts have long recognised that", "As the plaintiff correctly notes,"]


@cache
def edition_years() -> dict[str, tuple[int, int]]:
    """Each planted edition's first and last year, from reporters-db (an open end stops where the
    next edition of the series starts, or at 2024)."""
    import reporters_db

    out = {}
    for series in reporters_db.REPORTERS.values():
        for variant in series:
            eds = sorted(((ed, e["start"], e["end"]) for ed, e in variant["editions"].items() if e["start"]),
                         key=lambda x: x[1])
            for i, (ed, start, end) in enumerate(eds):
                if ed in _REPORTERS and ed not in out:
                    stop = end.year if end else (eds[i + 1][1].year if i + 1 < len(eds) else 2024)
                    out[ed] = (max(start.year, 1925), min(stop, 2024))
    return out


@cache
def court_abbreviation(court_id: str) -> str:
    import courts_db

    found = courts_db.find_court_by_id(court_id)
    if not found:
        raise ValueError(f"courts-db has no court {court_id!r}")
    return found[0].get("citation_string") or ""


@cache
def court_name(court_id: str) -> str:
    import courts_db

    return str(courts_db.find_court_by_id(court_id)[0]["name"])


@dataclass
class Cite:
    name: str
    short: str
    volume: int
    reporter: str
    page: int
    pin: int
    court: str
    year: int
    proposition: str

    @property
    def cite(self) -> str:
        return f"{self.volume} {self.reporter} {self.page}"

    def full(self) -> str:
        paren = str(self.year) if self.court == "scotus" else f"{court_abbreviation(self.court)} {self.year}"
        return f"{self.name}, {self.cite}, {self.pin} ({paren})"


@dataclass
class Passage:
    text: str
    cites: list[Cite]


def _party(rng: random.Random) -> str:
    return rng.choice(_NAMES) if rng.random() < 0.7 else rng.choice(_ENTITIES)


def make_passage(rng: random.Random) -> Passage:
    """A passage whose citations eyecite reads back exactly as planted."""
    for _ in range(20):
        p = _draw(rng)
        if _reads_back(p):
            return p
    raise RuntimeError("eyecite did not read back 20 generated passages in a row")  # a bug here, not bad input


def _draw(rng: random.Random) -> Passage:
    years = edition_years()
    n = rng.randint(3, 5)
    props = rng.sample(PROPOSITIONS, n)
    cites: list[Cite] = []
    used_names: set[str] = set()
    for prop in props:
        reporter = rng.choice(list(_REPORTERS))
        lo, hi = years[reporter]
        a = _party(rng)
        b = _party(rng)
        while b == a or a in used_names:
            a, b = _party(rng), _party(rng)
        used_names.add(a)
        page = rng.randint(1, 1400)
        cites.append(Cite(f"{a} v. {b}", a.split(",")[0].split()[0], rng.randint(1, 999 if reporter != "U.S." else 590),
                          reporter, page, page + rng.randint(1, 12), rng.choice(_REPORTERS[reporter]),
                          rng.randint(lo, hi), prop))
    sentences = []
    for i, c in enumerate(cites):
        opener = rng.choice(_OPENERS)
        sentences.append(f"{opener} {c.proposition}. See {c.full()}.")
        if i == 0:
            sentences.append(f"That rule applies with particular force here. Id. at {c.pin + 1}.")
    first = cites[0]
    sentences.insert(rng.randint(2, len(sentences)),
                     f"The claim under 42 U.S.C. § {rng.choice([1981, 1983, 1985, 2000])} fails for the same reason.")
    sentences.append(f"Nothing in {first.short}, {first.cite.rsplit(' ', 1)[0]} at {first.pin}, suggests otherwise.")
    return Passage(" ".join(sentences), cites)


def _reads_back(p: Passage) -> bool:
    from eyecite.models import FullCaseCitation

    found = [c for c in _eyecite().get_citations(p.text) if isinstance(c, FullCaseCitation)]
    got = [(c.groups["volume"], c.corrected_reporter(), c.groups["page"], c.metadata.court) for c in found]
    want = [(str(c.volume), c.reporter, str(c.page), c.court) for c in p.cites]
    return got == want



def ask(p: Passage, kind: str, rng: random.Random) -> TextQuestion:
    context = f"An extract from a judicial opinion:\n\n{p.text}"
    if kind == "citation_find":
        c = rng.choice(p.cites)
        ds = [{"value": f"{c.volume} {c.reporter} {c.pin}", "label": "pin_cite_as_page"}]
        ds += [{"value": o.cite, "label": "other_case"} for o in p.cites if o is not c]
        key = AnswerKey.model_validate(dict(answer_type="citation", gold=c.cite, distractors=ds))
        return TextQuestion(kind, 1, context, f"Which case does the extract cite for the proposition that "
                                f"{c.proposition}? Give its citation: volume, reporter and first page.",
                                "For example <answer>123 F.3d 456</answer>.", key, f"<answer>{c.cite}</answer>",
                                {"case": c.name})
    if kind == "citation_list":
        key = AnswerKey.model_validate(dict(answer_type="citation_set", gold=[c.cite for c in p.cites]))
        return TextQuestion(kind, 2, context, "List every case that the extract cites in full (volume, reporter, "
                                "first page), in the order they appear. Leave out statutes, Id. citations and short "
                                "citations of a case already cited.",
                                "One citation per line, for example <answer>\n123 F.3d 456\n45 A.3d 12\n</answer>.", key,
                                "<answer>\n" + "\n".join(c.cite for c in p.cites) + "\n</answer>",
                                {"count": len(p.cites)})
    c = rng.choice(p.cites)
    key = AnswerKey.model_validate(dict(answer_type="court", gold=c.court,
                    distractors=[{"value": o.court, "label": "other_case_court"} for o in p.cites if o.court != c.court]))
    return TextQuestion(kind, 2, context, f"Which court decided {c.name}, as cited in the extract?",
                            "Name the court, for example <answer>Court of Appeals for the Ninth Circuit</answer>.", key,
                            f"<answer>{court_name(c.court)}</answer>", {"case": c.name, "cite": citation_text(
                                (str(c.volume), c.reporter, str(c.page)))})
