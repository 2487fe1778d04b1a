"""Verifier helpers: answer extraction and reward shaping shared by the domains.

The answer format Practicum asks for by default is ``<answer>...</answer>``. Extraction is
deliberately plain: the *strict* answer is the content of the single answer tag pair (no tag,
or several, means no strict answer); the *lenient* answer falls back to the last number in the
reply. Both are scored so that a run can report whether the model learned the format, not only
whether its last number happened to be right.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

ANSWER_TAG = re.compile(r"<answer>(.*?)</answer>", re.DOTALL)
NUMBER = re.compile(r"-?\d+(?:[.,]\d+)*")


@dataclass(frozen=True)
class Extracted:
    strict: str | None  # content of exactly one <answer> pair, stripped
    lenient: str | None  # the strict answer, else the last number in the reply
    formatted: bool  # exactly one non-empty <answer> pair


def extract_answer(reply: str) -> Extracted:
    tags = ANSWER_TAG.findall(reply)
    strict = tags[0].strip() if len(tags) == 1 and tags[0].strip() else None
    if strict is not None:
        lenient: str | None = strict
    else:
        numbers = NUMBER.findall(reply)
        lenient = numbers[-1] if numbers else None
    return Extracted(strict=strict, lenient=lenient, formatted=strict is not None)


@dataclass(frozen=True)
class RewardWeights:
    """How the named components combine into the score value (weights are normalised)."""

    strict: float = 0.7  # the answer, in the requested format, is right
    lenient: float = 0.3  # the answer is right when read leniently
    # The requested format was used, right answer or not. Off by default: with weight 0.2 the
    # embedded model learned within 10 steps to echo the system prompt (which shows the tag
    # format) for a sure 0.2, and its accuracy collapsed to 0.
    format: float = 0.0

    def combine(self, components: dict[str, float]) -> float:
        total = self.strict + self.lenient + self.format
        if total <= 0:
            raise ValueError("reward weights must not all be zero")
        value = (
            self.strict * components["strict"]
            + self.lenient * components["lenient"]
            + self.format * components["format"]
        ) / total
        return min(1.0, max(0.0, value))
