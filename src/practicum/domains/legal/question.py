"""The one shape of a generated legal question over a real text (licences, the constitution,
citations): its kind and tier, the quoted text, the question and answer instruction, the key
the verifier reads, and a reply that scores 1."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from practicum.domains.annotations import AnswerKey


@dataclass
class TextQuestion:
    kind: str
    tier: int
    context: str
    question: str
    instruction: str
    key: AnswerKey
    reference: str
    meta: dict[str, Any]
