"""Exact checking of long-context answers, with partial credit for lists only.

An :class:`AnswerKey` holds the reference answer, its type and the values of the task's
distractors. The submitted answer is the text inside ``<answer>...</answer>`` when the reply has
exactly one such pair, else the whole reply; it is then normalised by type:

* ``text``: case-folded, surrounding quotes, backticks and a final full stop removed, runs of
  whitespace made one space; equal or not.
* ``number``: one number (``65536``, ``65,536``, ``65_536``, ``0x10000``, ``-3``, ``2.5``),
  optionally followed by the key's unit (singular, plural or as written in the key). Any other
  trailing word is a wrong unit: ``14 pence`` for 14 shillings scores 0 and is flagged
  ``wrong_unit``; ``14`` alone passes. Off by one is simply wrong.
* ``set``: a JSON list, or items one per line or separated by commas; each item normalised as
  text (and a leading ``./`` dropped). Partial credit: the Jaccard overlap |A∩B| / |A∪B|, so
  extra items cost as missing ones do; components ``precision`` and ``recall``.
* ``list``: as ``set``, but order matters: the fraction of positions that hold the right item
  (over the longer of the two lists).

A wrong answer that equals a distractor's value is flagged ``distractor:<label>`` (the label says
which: ``similar_name``, ``superseded``, ``wrong_file:json/decoder.py``...), the diagnostic that
tells a model that found *a* needle from one that found *the* needle. Flags never raise a score.
"""

from __future__ import annotations

import json
import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from practicum.domains.plugin import Verdict
from practicum.records import Score

AnswerType = Literal["text", "number", "set", "list"]
ANSWER_TAG = re.compile(r"<answer>(.*?)</answer>", re.DOTALL | re.IGNORECASE)
NUMBER = re.compile(r"^\s*([-+]?(?:0[xX][0-9a-fA-F_]+|0[oO][0-7_]+|0[bB][01_]+|\d[\d,_]*(?:\.\d+)?|\.\d+))\s*(.*?)\s*\.?\s*$", re.DOTALL)


class Distractor(BaseModel):
    model_config = ConfigDict(extra="forbid")
    value: Any
    label: str  # which distractor: the flag is "distractor:<label>"


class AnswerKey(BaseModel):
    """What the verifier compares against (``Task.target``); never shown to the model."""

    model_config = ConfigDict(extra="forbid")
    answer: str | int | float | list[str]
    type: AnswerType
    unit: str | None = None  # number answers: the unit the question asks for
    distractors: list[Distractor] = Field(default_factory=list)

    @model_validator(mode="after")
    def _consistent(self) -> AnswerKey:
        if self.type in ("set", "list") and not isinstance(self.answer, list):
            raise ValueError(f"a {self.type} answer must be a list")
        if self.type == "number" and parse_number(str(self.answer), self.unit)[0] is None:
            raise ValueError(f"answer {self.answer!r} is not a number")
        if self.type == "text" and not isinstance(self.answer, str):
            raise ValueError("a text answer must be a string")
        return self


def extract(reply: str) -> str:
    tags = ANSWER_TAG.findall(reply)
    return tags[0].strip() if len(tags) == 1 else reply.strip()


def norm_text(s: str) -> str:
    s = " ".join(str(s).split()).strip()
    s = s.strip("`'\" ").rstrip(".").strip("`'\" ")
    return s.casefold()


def _units(unit: str) -> set[str]:
    u = norm_text(unit)
    return {u, u + "s", u.removesuffix("s"), u + "es"}


def parse_number(s: str, unit: str | None) -> tuple[float | None, str]:
    """The number in ``s`` and what followed it ("" when nothing, or the expected unit)."""
    m = NUMBER.match(norm_text(s))
    if not m:
        return None, ""
    raw, rest = m.group(1).replace(",", "").replace("_", ""), m.group(2).strip()
    try:
        value = float(int(raw, 0)) if re.match(r"^[-+]?0[xob]", raw, re.IGNORECASE) else float(raw)
    except ValueError:
        return None, ""
    if rest and unit is not None and rest in _units(unit):
        rest = ""
    return value, rest


def _items(s: str | list[str]) -> list[str]:
    if isinstance(s, list):
        raw = [str(x) for x in s]
    else:
        try:
            loaded = json.loads(s)
            raw = [str(x) for x in loaded] if isinstance(loaded, list) else [s]
        except json.JSONDecodeError:
            raw = [p for line in s.splitlines() for p in line.split(",")]
    out = []
    for x in raw:
        item = norm_text(re.sub(r"^\s*(?:[-*]|\d+[.)])\s+", "", x)).removeprefix("./")
        if item:
            out.append(item)
    return out


def _same(key: AnswerKey, value: Any, given: str) -> bool:
    if key.type == "number":
        got, rest = parse_number(given, key.unit)
        want, _ = parse_number(str(value), key.unit)
        return got is not None and not rest and got == want
    if key.type == "text":
        return norm_text(given) == norm_text(str(value))
    if key.type == "set":
        return set(_items(given)) == set(_items(value))
    return _items(given) == _items(value)


def check(key: AnswerKey, reply: str) -> Verdict:
    """Score one reply (or a bare answer) against the key."""
    given = extract(reply)
    if not given:
        return Verdict(Score(value=0.0, components={"correct": 0.0}, explanation="no answer"), ["no_answer"])
    flags: list[str] = []
    if key.type in ("set", "list"):
        got, want = _items(given), _items(key.answer)  # type: ignore[arg-type]
        inter = len(set(got) & set(want))
        precision = inter / len(set(got)) if got else 0.0
        recall = inter / len(set(want)) if want else 1.0
        if key.type == "set":
            union = len(set(got) | set(want))
            value = inter / union if union else 1.0
        else:
            value = sum(a == b for a, b in zip(got, want, strict=False)) / max(len(got), len(want), 1)
        comps = {"correct": value, "precision": precision, "recall": recall}
        why = f"{inter} of {len(set(want))} expected items, {len(set(got)) - inter} extra"
        if key.type == "list" and value < 1 and set(got) == set(want):
            why += "; right items in the wrong order"
            flags.append("wrong_order")
    else:
        ok = _same(key, key.answer, given)
        value = 1.0 if ok else 0.0
        comps = {"correct": value}
        why = "right" if ok else f"wrong: got {given[:80]!r}"
        if not ok and key.type == "number":
            got_n, rest = parse_number(given, key.unit)
            want_n, _ = parse_number(str(key.answer), key.unit)
            if got_n is None:
                why = f"not a number: {given[:80]!r}"
            elif rest:
                flags.append("wrong_unit")
                why = f"wrong unit {rest!r} (the question asks for {key.unit or 'a bare number'})"
            elif want_n is not None and abs(got_n - want_n) == 1:
                why += " (off by one)"
    if value < 1:
        for d in key.distractors:
            if _same(key, d.value, given):
                flags.append(f"distractor:{d.label}")
                why += f"; matches distractor {d.label}"
                break
    return Verdict(Score(value=value, components=comps, explanation=why), flags)
