"""Expert-annotated tasks: the file format, the rule-based scorer, agreement statistics and an
optional model-as-judge, shared by every domain whose answers are judgments (``legal``,
``finance``).

File format (``practicum-annotated/1``)
---------------------------------------

A file holds one task (a JSON object), a JSON list of tasks, or one task per line (``.jsonl``).
A task::

    {
      "id": "lease-7/precedence",                  # required, unique in the file
      "question": "Which clause governs the notice period?",   # required: what the model is asked
      "context": "1.1 ... 4.2 ... Schedule B ...", # optional: the document excerpt, shown before the question
      "answer_type": "label",                      # label | number | date | set | fields (+ a domain's own)
      "gold": "Schedule B, paragraph 2",           # the adjudicated answer (optional: see below)
      "aliases": ["Schedule B"],                   # other spellings accepted for a label
      "gold_weight": 1.0,                          # weight of the gold answer among the criteria
      "tolerance": 0,                              # number: absolute tolerance
      "unit": "USD",                               # number: the unit the answer may carry
      "distractors": [{"value": "4.2", "label": "overridden_clause"}],
      "rubric": [                                  # weighted criteria for free-text answers
        {"id": "names_clause", "weight": 2, "description": "Names Schedule B as governing",
         "patterns": ["schedule\\\\s*b"], "match": "any", "forbid": ["\\\\b4\\\\.2\\\\b"], "scope": "answer"},
        {"id": "explains", "weight": 1, "description": "Says the schedule overrides by express words",
         "check": "judge"}
      ],
      "reference": "<answer>Schedule B, paragraph 2</answer>",   # optional reply that scores 1
      "response": "Clause 4.2 governs ...",        # optional sample reply the annotators graded
      "annotations": [                             # optional: one entry per annotator
        {"annotator": "ann-1", "label": "Schedule B, paragraph 2",
         "rubric": {"names_clause": true, "explains": false}, "rationale": "Schedule B says ..."}
      ],
      "tier": 2, "kind": "precedence", "meta": {}  # optional, free
    }

* ``gold`` is compared with the text inside the reply's last ``<answer>...</answer>`` pair (the
  whole reply when it has none, flagged ``no_answer_tags``) by ``answer_type``:

  - ``label``: equal after case folding, whitespace runs made one space, and surrounding quotes,
    brackets and a final full stop dropped; any of ``aliases`` counts.
  - ``number``: one number (``12,500``, ``$12,500.00``, ``12500 USD``, ``-3.5``, ``7%``),
    equal within ``tolerance``; a word after it other than ``unit`` makes it wrong.
  - ``date``: ``2025-03-14``, ``14 March 2025`` or ``March 14, 2025``; the same day. A day off
    either way is flagged ``off_by_one_day``.
  - ``set``: items one per line or separated by ``;`` (by ``,`` when there is neither), each
    compared as a label; partial credit |A∩B| / |A∪B| (extra items cost as missing ones do).
  - ``fields``: ``gold`` is an object ``{field: value}``; the answer is ``field: value`` lines
    (or ``;``-separated). Each field is compared as ``field_types[field]`` (default: ``set`` for
    a list value, ``number`` for a number, else ``label``); the score is the mean over fields.

  A domain may add its own types (:class:`Comparator`; ``legal`` adds ``clause``, ``citation``
  and ``court``). Without ``gold`` the annotators' majority label is the gold; a tie is an error.
* ``rubric`` items are criteria with weights. ``check: "rule"`` (the default when ``patterns``
  is given) passes when ``any`` (or, with ``match: "all"``, every) pattern of ``patterns``
  (Python regular expressions, case-insensitive) occurs in the answer and none of ``forbid``
  does; the patterns read the answer inside the tags, or with ``scope: "reply"`` the whole reply
  (reasoning included). ``check: "judge"`` (the default without patterns) is for criteria that rules cannot
  check: the judge model grades the whole reply against its ``description``, when a judge is
  configured; otherwise the item is left out (flagged ``unjudged``).
* The score's value is the weighted mean of the criteria checked: the gold answer
  (``gold_weight``), each rule item and each judged item. Its components: ``answer`` (the gold
  comparison, partial for ``set``/``fields``), ``rubric`` (the weighted fraction of rule items
  passed) and ``judge`` (the weighted fraction of judged items passed), each present only when
  the task has such criteria. A wrong answer equal to a distractor's ``value`` is flagged
  ``distractor:<label>``; flags never change the value.
* ``annotations`` record the experts: each annotator's own answer (``label``), their pass/fail on
  each rubric item for the task's sample ``response`` (``rubric``), and a ``rationale``.

Errors name the file and the field: ``tasks.jsonl:3: rubric.0.weight: Input should be greater
than 0`` (:class:`~practicum.errors.TaskError`).

Agreement
---------

:func:`agreement` over a file's annotated tasks reports, for the annotators' labels, the percent
agreement (two labels agree when the task's answer type calls them equal; the answer types of
the ``domain`` a task names are used, from its plugin's ``comparators``), **Fleiss' kappa** (when every task has the same number of labels, at least two),
**Cohen's kappa** (when exactly two annotators labelled every task) and **Krippendorff's alpha**
(nominal; missing annotators allowed); for the rubric items, Krippendorff's alpha (nominal, over
every (task, item) unit with two or more judgments; per item id too) and how often the rule
checker agrees with the annotators' majority on the sample responses. Kappa and alpha are 1 for
perfect agreement, 0 for chance, below 0 for systematic disagreement; alpha ≥ 0.8 is Krippendorff's
bar for relying on the data, ≥ 0.667 for tentative conclusions. From the command line::

    python -m practicum.domains.annotations agreement FILE [--json]

The judge
---------

:class:`JudgeOptions` (embed it in a domain's options as ``judge:``; off by default) names any
OpenAI-compatible chat-completions endpoint: ``base_url`` (``.../v1``; ``/chat/completions`` is
appended), ``model``, ``api_key_env`` (the *name* of the environment variable holding the key;
none for a local server), ``timeout_s``, ``cache_dir``. :class:`Judge` asks it, per ``judge``
rubric item, for ``{"verdict": "pass" | "fail", "reason": ...}`` at temperature 0. Verdicts are
cached on disk, one JSON file per sha256 of (judge model, prompt messages), so a rerun costs
nothing. A timeout, an HTTP error or a reply that is not that JSON is recorded (flag
``judge_error:<kind>``, the explanation) and leaves that item out of the score; it never raises.
``practicum verify`` reads the judge from ``PRACTICUM_JUDGE_BASE_URL``, ``PRACTICUM_JUDGE_MODEL``
and ``PRACTICUM_JUDGE_API_KEY_ENV`` (:func:`judge_from_env`).

API
---

* :func:`load_annotated` ``(path) -> list[AnnotatedTask]``: read and validate a file.
* :class:`AnswerKey`: the scoring part of a task (``AnnotatedTask.key()``); domains that
  generate tasks build keys directly and keep ``key.model_dump()`` as ``Task.target``.
* :func:`score_rules` ``(key, reply, comparators=None) -> Verdict``: gold and rule items only.
* :func:`grade` ``(key, reply, question, judge=None, comparators=None) -> Verdict`` (async):
  the full score, the judge included when given.
* :func:`cohen_kappa`, :func:`fleiss_kappa`, :func:`krippendorff_alpha`, :func:`agreement`.
* :class:`Judge` ``(options, cache_dir)``: build it in a plugin's ``build`` when
  ``options.judge.enabled`` (``cache_dir=ctx.data_dir("judge")``) and hand it to :func:`grade`;
  in ``verify``, :func:`judge_from_env`.

A domain that adds answer types passes them as ``comparators`` and exposes them as its
plugin's ``comparators`` attribute (the agreement command uses them). The ``legal`` plugin is a
worked example: ``legal/plugin.py`` (a task source over an annotated file, ``load_task`` of
one annotated task, an environment that awaits :func:`grade`).

Import it as ``import practicum.domains.annotations as ann`` or ``from
practicum.domains.annotations import ...``: ``from practicum.domains import annotations`` gets the
package's own ``from __future__ import annotations`` feature object instead of this module.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
import os
import re
import sys
import urllib.error
import urllib.request
from collections import Counter
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import date, datetime
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from practicum.domains.plugin import Verdict
from practicum.errors import ConfigError, TaskError
from practicum.records import Score

__all__ = ["AnnotatedTask", "Annotation", "AnswerKey", "Comparator", "Distractor", "Judge", "JudgeOptions",
           "JudgeResult", "Match", "RubricItem", "agreement", "cohen_kappa", "extract", "fleiss_kappa", "grade",
           "judge_from_env", "krippendorff_alpha", "load_annotated", "norm_label", "score_rules"]

FORMAT = "practicum-annotated/1"
ANSWER_TAG = re.compile(r"<answer>(.*?)</answer>", re.DOTALL | re.IGNORECASE)
BUILTIN_TYPES = ("label", "number", "date", "set", "fields")


# --- the file format ------------------------------------------------------------------------------

class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class RubricItem(_Strict):
    """One weighted criterion (module docstring)."""

    id: str = Field(..., min_length=1)
    weight: float = Field(default=1.0, gt=0)
    description: str = ""
    check: Literal["rule", "judge"] | None = None  # default: rule with patterns, judge without
    patterns: list[str] = Field(default_factory=list)
    match: Literal["any", "all"] = "any"
    forbid: list[str] = Field(default_factory=list)
    scope: Literal["answer", "reply"] = "answer"  # what the patterns read: the tagged answer, or the whole reply

    @field_validator("patterns", "forbid")
    @classmethod
    def _compiles(cls, v: list[str]) -> list[str]:
        for p in v:
            try:
                re.compile(p)
            except re.error as e:
                raise ValueError(f"pattern {p!r} is not a regular expression: {e}") from None
        return v

    @model_validator(mode="after")
    def _how(self) -> RubricItem:
        if self.check is None:
            self.check = "rule" if self.patterns else "judge"
        if self.check == "rule" and not self.patterns:
            raise ValueError(f"rubric item {self.id!r}: a rule item needs patterns")
        return self


class Distractor(_Strict):
    value: Any
    label: str


class _KeyFields(_Strict):
    """The fields of an answer key, shared by :class:`AnswerKey` and :class:`AnnotatedTask`."""

    answer_type: str = "label"
    gold: Any = None
    aliases: list[str] = Field(default_factory=list)
    gold_weight: float = Field(default=1.0, ge=0)
    tolerance: float = Field(default=0.0, ge=0)
    unit: str | None = None
    field_types: dict[str, str] = Field(default_factory=dict)
    distractors: list[Distractor] = Field(default_factory=list)
    rubric: list[RubricItem] = Field(default_factory=list)


class AnswerKey(_KeyFields):
    """What a reply is scored against (``Task.target`` of annotated and generated tasks)."""

    @model_validator(mode="after")
    def _something_to_check(self) -> AnswerKey:
        if self.gold is None and not self.rubric:
            raise ValueError("a task needs a gold answer, rubric items, or annotators' labels")
        ids = [r.id for r in self.rubric]
        if len(ids) != len(set(ids)):
            raise ValueError(f"rubric: duplicate item ids {sorted(i for i in set(ids) if ids.count(i) > 1)}")
        if self.answer_type == "fields" and self.gold is not None and not isinstance(self.gold, dict):
            raise ValueError("gold: a fields answer must be an object {field: value}")
        if self.answer_type == "set" and self.gold is not None and not isinstance(self.gold, list):
            raise ValueError("gold: a set answer must be a list")
        if self.answer_type == "number" and self.gold is not None and _number(str(self.gold), self.unit)[0] is None:
            raise ValueError(f"gold: {self.gold!r} is not a number")
        if self.answer_type == "date" and self.gold is not None and _date(str(self.gold)) is None:
            raise ValueError(f"gold: {self.gold!r} is not a date (write 2025-03-14)")
        return self


class Annotation(_Strict):
    """One annotator's work on one task."""

    annotator: str = Field(..., min_length=1)
    label: Any = None  # their own answer to the question
    rubric: dict[str, bool] = Field(default_factory=dict)  # item id -> pass, for the task's sample response
    rationale: str = ""


class AnnotatedTask(_KeyFields):
    """One task of a ``practicum-annotated/1`` file (module docstring): the answer key's fields
    and these."""

    format: Literal["practicum-annotated/1"] | None = None
    id: str = Field(..., min_length=1)
    domain: str | None = None
    question: str = Field(..., min_length=1)
    context: str | None = None
    reference: str | None = None
    response: str | None = None
    annotations: list[Annotation] = Field(default_factory=list)
    tier: int | None = None
    kind: str | None = None
    meta: dict[str, Any] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _consistent(self) -> AnnotatedTask:
        names = [a.annotator for a in self.annotations]
        if len(names) != len(set(names)):
            raise ValueError("annotations: an annotator appears twice")
        known = {r.id for r in self.rubric}
        for i, a in enumerate(self.annotations):
            unknown = set(a.rubric) - known
            if unknown:
                raise ValueError(f"annotations.{i}.rubric: no rubric item {sorted(unknown)[0]!r}")
        if self.gold is None and self.annotations:
            self.gold = self.majority_label()
        return self

    def majority_label(self) -> Any:
        labels = [a.label for a in self.annotations if a.label is not None]
        if not labels:
            return None
        counts = Counter(norm_label(str(x)) for x in labels)
        (top, n), *rest = counts.most_common()
        if rest and rest[0][1] == n:
            raise ValueError("gold: absent, and the annotators' labels tie; adjudicate and write gold")
        return next(x for x in labels if norm_label(str(x)) == top)

    def key(self) -> AnswerKey:
        return AnswerKey.model_validate(self.model_dump(include=set(AnswerKey.model_fields)))

    def prompt_text(self, instruction: str) -> str:
        return (f"{self.context}\n\n" if self.context else "") + f"Question: {self.question}\n{instruction}"


def load_annotated(path: Path | str, comparators: Mapping[str, Comparator] | None = None,
                   check_types: bool = True) -> list[AnnotatedTask]:
    """Every task of an annotated file; a bad file raises TaskError naming the file and field.
    ``comparators`` are the reader's own answer types; ``check_types=False`` accepts any type
    name (agreement statistics need no comparison)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise TaskError(f"cannot read annotated task file {path}: {e}") from None
    items: list[tuple[str, Any]] = []
    try:
        whole = json.loads(text)
        items = ([(f"[{i}]", x) for i, x in enumerate(whole)] if isinstance(whole, list) else [("", whole)])
    except RecursionError:
        raise TaskError(f"{path}: not valid JSON (nested too deeply)") from None
    except json.JSONDecodeError as e:
        lines = [(n, ln) for n, ln in enumerate(text.splitlines(), 1) if ln.strip()]
        if len(lines) < 2:
            raise TaskError(f"{path}: not valid JSON ({e.msg} at line {e.lineno})") from None
        for n, ln in lines:
            try:
                items.append((f":{n}", json.loads(ln)))
            except json.JSONDecodeError as e2:
                raise TaskError(f"{path}:{n}: not valid JSON ({e2.msg})") from None
            except RecursionError:
                raise TaskError(f"{path}:{n}: not valid JSON (nested too deeply)") from None
    if not items:
        raise TaskError(f"{path}: no tasks")
    known = set(BUILTIN_TYPES) | set(comparators or {})
    out, seen = [], set()
    for where, raw in items:
        if not isinstance(raw, dict):
            raise TaskError(f"{path}{where}: a task must be a JSON object")
        try:
            task = AnnotatedTask.model_validate(raw)
            task.key()
        except ValidationError as e:
            err = e.errors()[0]
            loc = ".".join(str(x) for x in err["loc"]) or "task"
            raise TaskError(f"{path}{where}: {loc}: {err['msg'].removeprefix('Value error, ')}") from None
        types = {task.answer_type, *task.field_types.values()}
        if check_types and types - known:
            field_name = "answer_type" if task.answer_type not in known else "field_types"
            raise TaskError(f"{path}{where}: {field_name}: unknown answer type {sorted(types - known)[0]!r}; "
                            f"known: {', '.join(sorted(known))}")
        if task.id in seen:
            raise TaskError(f"{path}{where}: id: {task.id!r} appears twice in the file")
        seen.add(task.id)
        out.append(task)
    return out


# --- comparing answers --------------------------------------------------------------------------

@dataclass
class Match:
    """How well one answer matches one gold value: ``score`` in [0, 1], and a note for the
    explanation (and a flag, such as ``off_by_one_day``)."""

    score: float
    note: str = ""
    flag: str | None = None


Comparator = Callable[[str, Any, AnswerKey], Match]
"""``(given, gold, key) -> Match``: a domain's own answer type."""


def extract(reply: str) -> tuple[str, bool]:
    """The answer in a reply (its last ``<answer>`` pair, else all of it) and whether it was tagged."""
    tags = ANSWER_TAG.findall(reply)
    return (tags[-1].strip(), True) if tags else (reply.strip(), False)


def norm_label(s: str) -> str:
    s = " ".join(str(s).split())
    prev = None
    while s != prev:
        prev = s
        s = s.strip(" `'\"“”‘’*").removesuffix(".").strip()
        if len(s) > 1 and s[0] + s[-1] in ("()", "[]", "{}"):
            s = s[1:-1]
    return s.casefold()


NUMBER = re.compile(r"^(?:usd|us\$|\$|€|£|eur|gbp|inr|₹|rs\.?)?\s*([-+]?\d[\d,_]*(?:\.\d+)?|[-+]?\.\d+)\s*(.*?)$")


def _number(s: str, unit: str | None) -> tuple[float | None, str]:
    t = norm_label(s).replace("\u2212", "-")
    m = NUMBER.match(t)
    if not m:
        return None, ""
    try:
        value = float(m.group(1).replace(",", "").replace("_", ""))
    except ValueError:
        return None, ""
    rest = m.group(2).strip()
    units = {"%", "percent", "per cent"} | ({norm_label(unit), norm_label(unit) + "s"} if unit else set())
    if rest in units or (unit and rest.removesuffix("s") == norm_label(unit).removesuffix("s")):
        rest = ""
    return value, rest


_MONTHS = {m: i for i, m in enumerate(["january", "february", "march", "april", "may", "june", "july", "august",
                                       "september", "october", "november", "december"], 1)}


def _date(s: str) -> date | None:
    t = norm_label(s).replace(",", " ")
    t = re.sub(r"(\d)(st|nd|rd|th)\b", r"\1", t)
    t = re.sub(r"^(mon|tues|wednes|thurs|fri|satur|sun)day\s+", "", t.strip())
    t = " ".join(t.split())
    try:
        return datetime.strptime(t, "%Y-%m-%d").date()
    except ValueError:
        pass
    m = re.fullmatch(r"(\d{1,2}) ([a-z]+) (\d{4})", t) or re.fullmatch(r"([a-z]+) (\d{1,2}) (\d{4})", t)
    if not m:
        return None
    a, b, y = m.groups()
    day, month = (a, b) if a.isdigit() else (b, a)
    mon = _MONTHS.get(month) or next((v for k, v in _MONTHS.items() if len(month) >= 3 and k.startswith(month)), None)
    try:
        return date(int(y), mon, int(day)) if mon else None
    except ValueError:
        return None


def _items(s: str | list[Any]) -> list[str]:
    if isinstance(s, list):
        raw = [str(x) for x in s]
    else:
        lines = [ln for ln in s.splitlines() if ln.strip()]
        raw = ([p for ln in lines for p in ln.split(";")] if len(lines) > 1 or ";" in s else s.split(","))
    out = []
    for x in raw:
        item = norm_label(re.sub(r"^\s*(?:[-*•]|\d+[.)])\s+", "", x))
        if item and item not in ("none", "nothing", "n/a"):
            out.append(item)
    return out


def _cmp_label(given: str, gold: Any, key: AnswerKey) -> Match:
    ok = norm_label(given) in {norm_label(str(gold)), *map(norm_label, key.aliases)}
    return Match(float(ok), "right" if ok else f"got {given[:80]!r}, expected {str(gold)[:80]!r}")


def _cmp_number(given: str, gold: Any, key: AnswerKey) -> Match:
    got, rest = _number(given, key.unit)
    want, _ = _number(str(gold), key.unit)
    if got is None:
        return Match(0.0, f"not a number: {given[:80]!r}")
    if rest:
        return Match(0.0, f"unexpected words after the number: {rest[:40]!r}", "wrong_unit")
    assert want is not None
    ok = abs(got - want) <= key.tolerance + 1e-9 * max(1.0, abs(want))
    return Match(float(ok), "right" if ok else f"got {got:g}, expected {want:g}",
                 None if ok else ("off_by_one" if abs(got - want) == 1 else None))


def _cmp_date(given: str, gold: Any, key: AnswerKey) -> Match:
    got, want = _date(given), _date(str(gold))
    if got is None:
        return Match(0.0, f"not a date: {given[:80]!r} (write 2025-03-14)")
    assert want is not None
    if got == want:
        return Match(1.0, "right")
    off = (got - want).days
    return Match(0.0, f"got {got.isoformat()}, expected {want.isoformat()} ({off:+d} days)",
                 "off_by_one_day" if abs(off) == 1 else None)


def _cmp_set(given: str, gold: Any, key: AnswerKey, item: Callable[[str], Hashable] = norm_label) -> Match:
    got = {item(x) for x in _items(given)}
    want = {item(x) for x in _items(gold if isinstance(gold, list) else str(gold))}
    inter, union = len(got & want), len(got | want)
    value = inter / union if union else 1.0
    return Match(value, f"{inter} of {len(want)} expected items, {len(got) - inter} extra")


def _cmp_fields(given: str, gold: Any, key: AnswerKey, comparators: Mapping[str, Comparator]) -> Match:
    got: dict[str, str] = {}
    parts = given.splitlines() if "\n" in given.strip() else given.split(";")
    for part in parts:
        if ":" in part:
            name, value = part.split(":", 1)
            got[_field_name(name)] = value.strip()
    scores, notes = [], []
    for name, want in gold.items():
        kind = key.field_types.get(name) or ("set" if isinstance(want, list) else
                                             "number" if isinstance(want, int | float) else "label")
        have = got.get(_field_name(name))
        if have is None:
            scores.append(0.0)
            notes.append(f"{name}: missing")
            continue
        m = comparators[kind](have, want, key)
        scores.append(m.score)
        notes.append(f"{name}: {m.note}" if m.score < 1 else f"{name}: right")
    return Match(sum(scores) / len(scores) if scores else 1.0, "; ".join(notes))


def _field_name(s: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", s.strip().strip("-*• ").casefold()).strip("_")


def _comparators(extra: Mapping[str, Comparator] | None) -> dict[str, Comparator]:
    table: dict[str, Comparator] = {"label": _cmp_label, "number": _cmp_number, "date": _cmp_date, "set": _cmp_set}
    table.update(extra or {})
    table["fields"] = lambda g, w, k: _cmp_fields(g, w, k, table)
    return table


# --- scoring ------------------------------------------------------------------------------------

def _rule_passes(item: RubricItem, text: str) -> bool:
    hits = [re.search(p, text, re.IGNORECASE) is not None for p in item.patterns]
    ok = all(hits) if item.match == "all" else any(hits)
    return ok and not any(re.search(p, text, re.IGNORECASE) for p in item.forbid)


@dataclass
class _Parts:
    answer: float | None = None
    rule: list[tuple[RubricItem, bool]] = field(default_factory=list)
    judged: list[tuple[RubricItem, bool]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    flags: list[str] = field(default_factory=list)


def _rules(key: AnswerKey, reply: str, comparators: Mapping[str, Comparator] | None) -> tuple[_Parts, str]:
    reply = reply if isinstance(reply, str) else str(reply)
    given, tagged = extract(reply)
    parts = _Parts()
    if not tagged:
        parts.flags.append("no_answer_tags")
    if key.gold is not None:
        table = _comparators(comparators)
        if key.answer_type not in table:
            raise TaskError(f"answer_type {key.answer_type!r} is not known here; known: {', '.join(sorted(table))}")
        m = table[key.answer_type](given, key.gold, key) if given else Match(0.0, "no answer")
        parts.answer = m.score
        parts.notes.append(f"answer: {m.note}")
        if m.flag:
            parts.flags.append(m.flag)
        if m.score < 1 and given:
            for d in key.distractors:
                if table[key.answer_type](given, d.value, key).score >= 1:
                    parts.flags.append(f"distractor:{d.label}")
                    parts.notes.append(f"matches distractor {d.label}")
                    break
    for item in key.rubric:
        if item.check == "rule":
            ok = _rule_passes(item, given if item.scope == "answer" else reply)
            parts.rule.append((item, ok))
            if not ok:
                parts.notes.append(f"rubric {item.id}: not met")
    return parts, given


def _combine(key: AnswerKey, parts: _Parts) -> Verdict:
    comps: dict[str, float] = {}
    num = den = 0.0
    if parts.answer is not None:
        comps["answer"] = parts.answer
        num += key.gold_weight * parts.answer
        den += key.gold_weight
    for name, got in (("rubric", parts.rule), ("judge", parts.judged)):
        if got:
            w = sum(i.weight for i, _ in got)
            passed = sum(i.weight for i, ok in got if ok)
            comps[name] = passed / w
            num += passed
            den += w
    value = num / den if den else 0.0
    explanation = "; ".join(parts.notes) or "all criteria met"
    return Verdict(Score(value=min(1.0, max(0.0, value)), components=comps, explanation=explanation), parts.flags)


def score_rules(key: AnswerKey, reply: str, comparators: Mapping[str, Comparator] | None = None) -> Verdict:
    """The score from the gold answer and the rule items; judge items are left out (``unjudged``)."""
    parts, _ = _rules(key, reply, comparators)
    if any(i.check == "judge" for i in key.rubric):
        parts.flags.append("unjudged")
    return _combine(key, parts)


async def grade(key: AnswerKey, reply: str, question: str, judge: Judge | None = None,
                comparators: Mapping[str, Comparator] | None = None) -> Verdict:
    """The full score of one reply: gold, rule items, and judge items when ``judge`` is given."""
    parts, _ = _rules(key, reply, comparators)
    items = [i for i in key.rubric if i.check == "judge"]
    if items and judge is None:
        parts.flags.append("unjudged")
    for item in items if judge is not None else []:
        assert judge is not None
        r = await judge.verdict(question, item, reply)  # the whole reply: explanations sit outside the tags
        if r.error is not None:
            parts.flags.append(f"judge_error:{r.error}")
            parts.notes.append(f"judge {item.id}: {r.error} ({r.detail[:120]}); left out")
        else:
            parts.judged.append((item, bool(r.passed)))
            parts.notes.append(f"judge {item.id}: {'pass' if r.passed else 'fail'}{' (cached)' if r.cached else ''}")
    return _combine(key, parts)


# --- the judge ----------------------------------------------------------------------------------

class JudgeOptions(_Strict):
    """A model-as-judge for rubric items rules cannot check (``judge:`` of a domain's options)."""

    enabled: bool = Field(default=False, description="Grade `check: judge` rubric items with the model below (off: they are left out).")
    base_url: str = Field(default="http://127.0.0.1:8000/v1", description="An OpenAI-compatible API root; /chat/completions is appended.")
    model: str = Field(default="judge", description="The judge model's name at that endpoint.")
    api_key_env: str | None = Field(default=None, description="Name of the environment variable holding the API key (none: no key).")
    timeout_s: float = Field(default=30.0, gt=0, le=600, description="Wall-clock limit of one judge request.")
    max_tokens: int = Field(default=256, ge=16, description="Most tokens of one judge reply.")
    cache_dir: str | None = Field(default=None, description="Where verdicts are cached (default: PRACTICUM_HOME/data/judge).")


@dataclass
class JudgeResult:
    passed: bool | None
    reason: str = ""
    error: str | None = None  # timeout, http_<code>, connection, bad_json, bad_verdict
    detail: str = ""
    cached: bool = False


JUDGE_SYSTEM = ("You grade one answer against one criterion. Reply with a JSON object only: "
                '{"verdict": "pass" or "fail", "reason": "<one sentence>"}.')


class Judge:
    """Asks an OpenAI-compatible chat-completions endpoint whether an answer meets a criterion;
    verdicts are cached on disk by (model, prompt). Failures are returned, never raised."""

    def __init__(self, options: JudgeOptions, cache_dir: Path) -> None:
        self.options = options
        self.cache_dir = Path(options.cache_dir) if options.cache_dir else cache_dir
        self.api_key: str | None = None
        if options.api_key_env:
            self.api_key = os.environ.get(options.api_key_env)
            if not self.api_key:
                raise ConfigError(f"judge.api_key_env: the environment variable {options.api_key_env} is not set "
                                  "(export it, or leave api_key_env out for a server that needs no key)")
        self.requests = 0  # requests sent (cache misses)

    def messages(self, question: str, item: RubricItem, answer: str) -> list[dict[str, str]]:
        user = (f"Question:\n{question}\n\nCriterion ({item.id}): {item.description or item.id}\n\n"
                f"Answer to grade:\n{answer}\n\nDoes the answer meet the criterion?")
        return [{"role": "system", "content": JUDGE_SYSTEM}, {"role": "user", "content": user}]

    def cache_key(self, messages: list[dict[str, str]]) -> str:
        blob = json.dumps({"model": self.options.model, "messages": messages}, sort_keys=True)
        return hashlib.sha256(blob.encode()).hexdigest()

    async def verdict(self, question: str, item: RubricItem, answer: str) -> JudgeResult:
        messages = self.messages(question, item, answer)
        path = self.cache_dir / f"{self.cache_key(messages)}.json"
        try:
            cached = json.loads(path.read_text())
            return JudgeResult(passed=bool(cached["passed"]), reason=str(cached.get("reason", "")), cached=True)
        except (OSError, ValueError, KeyError, TypeError):
            pass
        result = await asyncio.to_thread(self._ask, messages)
        if result.error is None:
            self.cache_dir.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".{os.getpid()}.tmp")
            tmp.write_text(json.dumps({"model": self.options.model, "passed": result.passed, "reason": result.reason}))
            tmp.replace(path)
        return result

    def _ask(self, messages: list[dict[str, str]]) -> JudgeResult:
        self.requests += 1
        body = json.dumps({"model": self.options.model, "messages": messages, "temperature": 0,
                           "max_tokens": self.options.max_tokens}).encode()
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        url = self.options.base_url.rstrip("/") + "/chat/completions"
        req = urllib.request.Request(url, data=body, headers=headers, method="POST")
        try:
            with urllib.request.urlopen(req, timeout=self.options.timeout_s) as resp:  # noqa: S310 - the configured endpoint
                raw = resp.read(1_000_000)
        except urllib.error.HTTPError as e:
            return JudgeResult(None, error=f"http_{e.code}", detail=str(e.reason))
        except TimeoutError:
            return JudgeResult(None, error="timeout", detail=f"no reply within {self.options.timeout_s:g} s")
        except urllib.error.URLError as e:
            if isinstance(e.reason, TimeoutError):
                return JudgeResult(None, error="timeout", detail=f"no reply within {self.options.timeout_s:g} s")
            return JudgeResult(None, error="connection", detail=str(e.reason))
        except OSError as e:
            return JudgeResult(None, error="connection", detail=str(e))
        try:
            content = json.loads(raw)["choices"][0]["message"]["content"]
        except (ValueError, KeyError, IndexError, TypeError):
            return JudgeResult(None, error="bad_json", detail=f"not a chat completion: {raw[:120]!r}")
        return _parse_verdict(str(content))


def _parse_verdict(content: str) -> JudgeResult:
    m = re.search(r"\{.*\}", content, re.DOTALL)
    try:
        obj = json.loads(m.group(0) if m else content)
    except ValueError:
        return JudgeResult(None, error="bad_json", detail=f"the judge's reply is not JSON: {content[:120]!r}")
    verdict = str(obj.get("verdict", "")).strip().casefold() if isinstance(obj, dict) else ""
    if verdict not in ("pass", "fail"):
        return JudgeResult(None, error="bad_verdict", detail=f"verdict must be pass or fail: {content[:120]!r}")
    return JudgeResult(verdict == "pass", reason=str(obj.get("reason", ""))[:500])


def judge_from_env(cache_dir: Path) -> Judge | None:
    """The judge ``practicum verify`` uses: set by PRACTICUM_JUDGE_BASE_URL and PRACTICUM_JUDGE_MODEL
    (and PRACTICUM_JUDGE_API_KEY_ENV, the name of the key's variable); None when they are unset."""
    url, model = os.environ.get("PRACTICUM_JUDGE_BASE_URL"), os.environ.get("PRACTICUM_JUDGE_MODEL")
    if not url or not model:
        return None
    opts = JudgeOptions(enabled=True, base_url=url, model=model,
                        api_key_env=os.environ.get("PRACTICUM_JUDGE_API_KEY_ENV") or None)
    return Judge(opts, cache_dir)


# --- agreement ----------------------------------------------------------------------------------

def cohen_kappa(a: Sequence[Hashable], b: Sequence[Hashable]) -> float:
    """Cohen's kappa of two raters' labels of the same items: (p_o - p_e) / (1 - p_e)."""
    if len(a) != len(b) or not a:
        raise ValueError("cohen_kappa needs two equally long, non-empty label lists")
    n = len(a)
    p_o = sum(x == y for x, y in zip(a, b)) / n
    ca, cb = Counter(a), Counter(b)
    p_e = sum(ca[k] * cb[k] for k in ca) / (n * n)
    return 1.0 if p_e == 1 else (p_o - p_e) / (1 - p_e)


def fleiss_kappa(counts: Sequence[Sequence[int]]) -> float:
    """Fleiss' kappa from a table: one row per item, one column per category, each cell the
    number of raters who chose that category; every row must sum to the same n >= 2."""
    if not counts:
        raise ValueError("fleiss_kappa needs at least one item")
    n = sum(counts[0])
    if n < 2 or any(sum(r) != n for r in counts):
        raise ValueError("fleiss_kappa needs the same number (>= 2) of ratings for every item")
    big_n = len(counts)
    p_i = [(sum(c * c for c in r) - n) / (n * (n - 1)) for r in counts]
    p_bar = sum(p_i) / big_n
    p_j = [sum(r[j] for r in counts) / (big_n * n) for j in range(len(counts[0]))]
    p_e = sum(p * p for p in p_j)
    return 1.0 if p_e == 1 else (p_bar - p_e) / (1 - p_e)


def krippendorff_alpha(units: Sequence[Sequence[Any]], level: Literal["nominal", "interval"] = "nominal") -> float:
    """Krippendorff's alpha: ``units`` holds each unit's values (one per coder who coded it;
    coders who did not are simply absent). Units with fewer than two values are not pairable and
    are dropped. ``1 - D_o / D_e`` from the coincidence matrix."""
    pairable = [list(u) for u in units if len(u) >= 2]
    if not pairable:
        raise ValueError("krippendorff_alpha needs a unit with at least two values")
    values = sorted({v for u in pairable for v in u}, key=str)
    index = {v: i for i, v in enumerate(values)}
    k = len(values)
    o = [[0.0] * k for _ in range(k)]
    for u in pairable:
        m = len(u)
        for i, x in enumerate(u):
            for j, y in enumerate(u):
                if i != j:
                    o[index[x]][index[y]] += 1.0 / (m - 1)
    n_c = [sum(row) for row in o]
    n = sum(n_c)

    def delta(a: Any, b: Any) -> float:
        return (float(a) - float(b)) ** 2 if level == "interval" else float(a != b)

    d_o = sum(o[i][j] * delta(values[i], values[j]) for i in range(k) for j in range(k))
    d_e = sum(n_c[i] * n_c[j] * delta(values[i], values[j]) for i in range(k) for j in range(k)) / (n - 1)
    return 1.0 if d_e == 0 else 1.0 - d_o / d_e


class AgreementReport(BaseModel):
    tasks: int
    annotated: int  # tasks with two or more annotations
    annotators: list[str]
    label_units: int
    label_percent: float | None = None  # pairs of annotators that agree, over all pairs
    label_fleiss_kappa: float | None = None
    label_cohen_kappa: float | None = None
    label_alpha: float | None = None
    rubric_units: int = 0
    rubric_alpha: float | None = None
    rubric_alpha_by_item: dict[str, float] = Field(default_factory=dict)
    rule_vs_experts: float | None = None  # fraction of (task, rule item) with a response where the rule agrees with the majority
    notes: list[str] = Field(default_factory=list)


def _canonical(t: AnnotatedTask, table: Mapping[str, Comparator]) -> dict[str, str]:
    """Each annotator's label as a category: labels that the task's answer type calls equal
    (``Schedule 2, paragraph 2`` and ``Sched. 2 para 2`` for a ``clause``) share one."""
    cmp = table.get(t.answer_type)
    key = t.key() if cmp is not None else None
    cats: list[str] = []
    out = {}
    for a in t.annotations:
        if a.label is None:
            continue
        label = str(a.label)
        same = None
        if cmp is not None and key is not None:
            same = next((c for c in cats if _safe_match(cmp, label, c, key)), None)
        if same is None:
            same = next((c for c in cats if norm_label(c) == norm_label(label)), None)
        if same is None:
            cats.append(label)
            same = label
        out[a.annotator] = norm_label(same)
    return out


def _safe_match(cmp: Comparator, a: str, b: str, key: AnswerKey) -> bool:
    try:
        return cmp(a, b, key).score >= 1
    except (ValueError, TypeError, KeyError, AttributeError):  # a label the type cannot read: compare as text
        return False


def domain_comparators(tasks: Sequence[AnnotatedTask]) -> dict[str, Comparator]:
    """The answer types of the domains ``tasks`` name (a plugin's ``comparators`` attribute)."""
    from practicum.domains import get_plugin
    from practicum.errors import PluginError

    out: dict[str, Comparator] = {}
    for name in sorted({t.domain for t in tasks if t.domain}):
        try:
            out.update(getattr(get_plugin(name), "comparators", {}) or {})
        except PluginError:
            continue
    return out


def agreement(tasks: Sequence[AnnotatedTask], comparators: Mapping[str, Comparator] | None = None) -> AgreementReport:
    """Agreement among the annotators of ``tasks`` (module docstring). ``comparators``: the
    domain's own answer types, so that equal answers written differently agree."""
    table = _comparators(comparators)
    annotators = sorted({a.annotator for t in tasks for a in t.annotations})
    label_units: list[list[str]] = []
    by_task: list[dict[str, str]] = []
    for t in tasks:
        labels = _canonical(t, table)
        if len(labels) >= 2:
            label_units.append(list(labels.values()))
            by_task.append(labels)
    r = AgreementReport(tasks=len(tasks), annotated=sum(len(t.annotations) >= 2 for t in tasks),
                        annotators=annotators, label_units=len(label_units))
    if label_units:
        pairs = [(x == y) for u in label_units for i, x in enumerate(u) for y in u[i + 1:]]
        r.label_percent = sum(pairs) / len(pairs)
        r.label_alpha = krippendorff_alpha(label_units)
        if len({len(u) for u in label_units}) == 1:
            cats = sorted({v for u in label_units for v in u})
            r.label_fleiss_kappa = fleiss_kappa([[u.count(c) for c in cats] for u in label_units])
        else:
            r.notes.append("Fleiss' kappa not computed: tasks have different numbers of labels (see alpha)")
        pair = {frozenset(d) for d in by_task}
        if len(pair) == 1 and len(next(iter(pair))) == 2:
            a, b = sorted(next(iter(pair)))
            r.label_cohen_kappa = cohen_kappa([d[a] for d in by_task], [d[b] for d in by_task])
    rubric_units: list[list[bool]] = []
    per_item: dict[str, list[list[bool]]] = {}
    agree = total = 0
    for t in tasks:
        for item in t.rubric:
            votes = [a.rubric[item.id] for a in t.annotations if item.id in a.rubric]
            if len(votes) >= 2:
                rubric_units.append(votes)
                per_item.setdefault(item.id, []).append(votes)
            if votes and item.check == "rule" and t.response is not None:
                c = Counter(votes).most_common()
                if len(c) == 1 or c[0][1] > c[1][1]:
                    total += 1
                    agree += _rule_passes(item, extract(t.response)[0]) == c[0][0]
    r.rubric_units = len(rubric_units)
    if rubric_units:
        r.rubric_alpha = krippendorff_alpha(rubric_units)
        for item_id, units in sorted(per_item.items()):
            if len(units) >= 2:
                r.rubric_alpha_by_item[item_id] = krippendorff_alpha(units)
    if total:
        r.rule_vs_experts = agree / total
    for name in ("label_alpha", "rubric_alpha", "label_fleiss_kappa", "label_cohen_kappa"):
        v = getattr(r, name)
        if v is not None and math.isnan(v):
            setattr(r, name, None)
    return r


def main(argv: list[str]) -> int:
    usage = "usage: practicum annotations agreement FILE [--json]"
    args = [a for a in argv if a != "--json"]
    if len(args) != 2 or args[0] != "agreement":
        print(usage, file=sys.stderr)
        return 2
    try:
        tasks = load_annotated(args[1], check_types=False)
    except TaskError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    report = agreement(tasks, domain_comparators(tasks))
    if "--json" in argv:
        print(report.model_dump_json(indent=2))
        return 0

    def f(v: float | None) -> str:
        return "-" if v is None else f"{v:.3f}"

    print(f"{report.tasks} tasks, {report.annotated} with two or more annotations; "
          f"annotators: {', '.join(report.annotators) or 'none'}")
    print(f"labels ({report.label_units} units): agreement {f(report.label_percent)}, Fleiss' kappa "
          f"{f(report.label_fleiss_kappa)}, Cohen's kappa {f(report.label_cohen_kappa)}, Krippendorff's alpha "
          f"{f(report.label_alpha)}")
    print(f"rubric items ({report.rubric_units} units): Krippendorff's alpha {f(report.rubric_alpha)}"
          + "".join(f"\n  {k}: alpha {f(v)}" for k, v in report.rubric_alpha_by_item.items()))
    print(f"rule checker vs the experts' majority: {f(report.rule_vs_experts)}")
    for n in report.notes:
        print(f"note: {n}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
