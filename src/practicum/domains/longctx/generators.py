"""Seeded task generators over a corpus, and the haystack recipe each task carries.

A generator draws a :class:`Problem` from ``random.Random(seed)``: the question, the answer key,
the documents that must be in the haystack and the lines planted into them. :func:`make` then
fills the haystack with other documents of the corpus, drawn by the same generator, up to the
target length (characters / 4 tokens), and returns a :class:`Recipe`: corpus, version, paths
and plants, small enough to keep in ``Task.metadata``, from which the text is rebuilt exactly
(:func:`render`). Four kinds:

* ``needle``: one planted fact ("The access code for vault Orion-7 is KX-4417.") among
  near-duplicates with other values: a similar name (Orion-71), another attribute of the same
  thing (its backup code), a revoked value of the same attribute.
* ``multihop``: two facts in two files that must be combined (a project's lead, in one file;
  that person's room, in another), with other projects' chains and a similarly named person as
  distractors; on the ``stdlib`` corpus, half the time a real one: a constant that one module
  imports from another, whose value is asked, with other modules that define a constant of the
  same name to another value as distractors (``wrong_file:<path>``).
* ``aggregation``: a count or a list computed exactly from the text of a named scope: stdlib
  files under a folder that define a top-level function of a given name (count, or the set of
  paths); KJV verses of a chapter range that name a person (count); a play's speeches by one
  character (count), or a scene's speakers in order of their first speech (ordered list).
* ``conflict``: statements about one quantity that disagree, spread over files, resolved by the
  rule the question states: the latest-dated amendment wins (dates written out, files in path
  order, not date order), or the file with the higher version wins (versions compare part by
  part: 2.10 is above 2.9). Superseded values are the distractors.

Every answer is checkable exactly (:mod:`.verifier`).
"""

from __future__ import annotations

import random
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict

from practicum.domains.longctx import corpus as corpora
from practicum.domains.longctx.corpus import CHARS_PER_TOKEN, SPEAKER, Corpus, CorpusName, Document
from practicum.domains.longctx.verifier import AnswerKey, Distractor
from practicum.errors import TaskError

KINDS = ("needle", "multihop", "aggregation", "conflict")

THINGS = ["Orion", "Vega", "Talon", "Ember", "Quarry", "Saffron", "Harrow", "Juniper", "Kestrel", "Lantern", "Marlow",
          "Nimbus", "Osprey", "Pilgrim", "Rook", "Sable", "Thistle", "Umber", "Vesper", "Wren", "Alder", "Bramble",
          "Cobalt", "Drover", "Falcon", "Gannet", "Heron", "Ivory", "Jasper", "Larch"]
FIRST = ["Amara", "Bennet", "Celia", "Dorian", "Elspeth", "Fergus", "Greta", "Hollis", "Imogen", "Jonas", "Katya",
         "Lionel", "Maren", "Nils", "Odette", "Percival", "Rosalind", "Silas", "Tamsin", "Ulric"]
LAST = ["Voss", "Harker", "Quill", "Marsh", "Thorne", "Abernathy", "Pryce", "Lindqvist", "Okafor", "Castellan",
        "Dunmore", "Fairweather", "Greaves", "Holloway", "Ives", "Kettering"]
MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September", "October",
          "November", "December"]
QUANTITIES = [("toll for the {x} ferry", "shillings"), ("retry limit of the {x} uploader", "attempts"),
              ("timeout of the {x} relay", "seconds"), ("weight limit of the {x} bridge", "tons")]


class Plant(BaseModel):
    model_config = ConfigDict(extra="forbid")
    path: str
    line: int  # inserted before this line (0: at the top)
    text: str


class Recipe(BaseModel):
    """How to rebuild a haystack exactly: the corpus, its version, the documents in order, the plants."""

    model_config = ConfigDict(extra="forbid")
    corpus: CorpusName
    version: str
    paths: list[str]
    plants: list[Plant]

    def documents(self) -> list[Document]:
        return render(self)


@dataclass
class Problem:
    kind: str
    question: str
    key: AnswerKey
    required: list[str]  # documents the haystack must hold
    plants: list[Plant] = field(default_factory=list)


@dataclass
class Made:
    problem: Problem
    recipe: Recipe
    chars: int

    @property
    def tokens(self) -> int:
        return self.chars // CHARS_PER_TOKEN


def make(corpus: Corpus, kind: str, seed: int, target_tokens: int, distractors: int, cache_dir: Path) -> Made:
    """One task: a problem of ``kind`` and a haystack of about ``target_tokens`` around it."""
    if kind not in KINDS:
        raise TaskError(f"unknown longctx kind {kind!r}; choose one of {', '.join(KINDS)}")
    rng = random.Random(f"longctx/{corpus.name}/{kind}/{seed}/{target_tokens}/{distractors}")
    budget = target_tokens * CHARS_PER_TOKEN
    problem = GENERATORS[kind](corpus, rng, distractors, budget, cache_dir)
    paths = _fill(corpus, rng, budget, problem.required)
    recipe = Recipe(corpus=corpus.name, version=corpus.version, paths=paths, plants=problem.plants)
    chars = sum(len(corpus.doc(p).text) for p in paths) + sum(len(p.text) + 3 for p in problem.plants)
    return Made(problem, recipe, chars)


def render(recipe: Recipe) -> list[Document]:
    """The haystack's documents with the plants in place (a comment line in code, a line in prose)."""
    corpus = corpora.load(recipe.corpus)
    if corpus.version != recipe.version:
        raise TaskError(f"the task was made from {recipe.version} but this machine has {corpus.version}; "
                        "its haystack cannot be rebuilt here")
    planted: dict[str, list[Plant]] = {}
    for p in recipe.plants:
        planted.setdefault(p.path, []).append(p)
    out = []
    for path in recipe.paths:
        text = corpus.doc(path).text
        if path in planted:
            lines = text.splitlines(keepends=True)
            for p in sorted(planted[path], key=lambda p: -p.line):
                lines.insert(min(p.line, len(lines)), ("# " if corpus.style == "code" else "") + p.text + "\n")
            text = "".join(lines)
        out.append(Document(path, text))
    return out


def _fill(corpus: Corpus, rng: random.Random, budget: int, required: list[str]) -> list[str]:
    chosen = dict.fromkeys(required)
    size = sum(len(corpus.doc(p).text) for p in chosen)
    cap = max(budget // 4, 4000)  # no filler document takes more than a quarter of the haystack
    order = list(range(len(corpus.docs)))
    rng.shuffle(order)
    for i in order:
        if size >= budget * 0.98:
            break
        d = corpus.docs[i]
        if d.path in chosen or len(d.text) > cap or size + len(d.text) > budget:
            continue
        chosen[d.path] = None
        size += len(d.text)
    return sorted(chosen)


def _hosts(corpus: Corpus, rng: random.Random, n: int, budget: int) -> list[str]:
    """``n`` distinct documents to plant facts in, each small enough for the haystack."""
    cap = max(budget // (4 * max(n, 1)), 3000)
    fits = [d.path for d in corpus.docs if 200 < len(d.text) <= cap]
    if len(fits) < n:
        raise TaskError(f"corpus {corpus.name}: too few documents under {cap} characters for {n} planted facts")
    return rng.sample(fits, n)


def _at(corpus: Corpus, rng: random.Random, path: str) -> int:
    return rng.randint(1, max(1, corpus.doc(path).text.count("\n") - 1))


def _code(rng: random.Random, avoid: set[str]) -> str:
    while True:
        c = f"{rng.choice('BCDFGHJKLMNPQRSTVWXZ')}{rng.choice('BCDFGHJKLMNPQRSTVWXZ')}-{rng.randint(1000, 9999)}"
        if c not in avoid:
            avoid.add(c)
            return c


def _person(rng: random.Random, avoid: set[str]) -> str:
    while True:
        p = f"{rng.choice(FIRST)} {rng.choice(LAST)}"
        if p not in avoid:
            avoid.add(p)
            return p


# --- needle ---------------------------------------------------------------------------------------

def needle(corpus: Corpus, rng: random.Random, distractors: int, budget: int, cache_dir: Path) -> Problem:
    thing, num = rng.choice(THINGS), rng.randint(2, 9)
    name, used = f"{thing}-{num}", set[str]()
    value = _code(rng, used)
    facts = [f"The access code for vault {name} is {value}."]
    ds = []
    similar = [f"{thing}-{num}{rng.randint(1, 9)}", f"{thing}-{num + 1}", f"{thing}-{num - 1}", f"{thing}s-{num}"]
    for i in range(distractors):
        v = _code(rng, used)
        match i % 3:
            case 0:
                other = similar[(i // 3) % len(similar)]
                facts.append(f"The access code for vault {other} is {v}.")
                ds.append(Distractor(value=v, label=f"similar_name:{other}"))
            case 1:
                facts.append(f"The backup code for vault {name} is {v}.")
                ds.append(Distractor(value=v, label="other_attribute:backup code"))
            case _:
                facts.append(f"The former access code for vault {name}, revoked long ago, was {v}.")
                ds.append(Distractor(value=v, label="revoked"))
    hosts = _hosts(corpus, rng, len(facts), budget)
    plants = [Plant(path=h, line=_at(corpus, rng, h), text=f) for h, f in zip(hosts, facts, strict=True)]
    q = f"What is the current access code for vault {name}? Give the code only."
    return Problem("needle", q, AnswerKey(answer=value, type="text", distractors=ds), hosts, plants)


# --- multi-hop ------------------------------------------------------------------------------------

def multihop(corpus: Corpus, rng: random.Random, distractors: int, budget: int, cache_dir: Path) -> Problem:
    if corpus.name == "stdlib" and rng.random() < 0.5:
        real = _stdlib_hop(corpus, rng, distractors, budget, cache_dir)
        if real is not None:
            return real
    people: set[str] = set()
    rooms = rng.sample(range(100, 999), distractors + 2)
    projects = rng.sample(THINGS, distractors + 1)
    lead = _person(rng, people)
    facts = [f"Project {projects[0]} is led by {lead}.", f"{lead} has a desk in room {rooms[0]}."]
    ds = []
    for i in range(distractors):
        if i % 2 == 0:  # another project's chain
            other = _person(rng, people)
            facts += [f"Project {projects[i + 1]} is led by {other}.", f"{other} has a desk in room {rooms[i + 1]}."]
            ds.append(Distractor(value=rooms[i + 1], label=f"other_project:{projects[i + 1]}"))
        else:  # someone whose name is close to the lead's
            first, last = lead.split()
            near = f"{first} {rng.choice([x for x in LAST if x != last])}"
            facts.append(f"{near} has a desk in room {rooms[i + 1]}.")
            ds.append(Distractor(value=rooms[i + 1], label=f"similar_name:{near}"))
    hosts = _hosts(corpus, rng, len(facts), budget)
    plants = [Plant(path=h, line=_at(corpus, rng, h), text=f) for h, f in zip(hosts, facts, strict=True)]
    q = f"In which room is the desk of the person who leads Project {projects[0]}? Give the room number only."
    return Problem("multihop", q, AnswerKey(answer=rooms[0], type="number", distractors=ds), hosts, plants)


def _stdlib_hop(corpus: Corpus, rng: random.Random, distractors: int, budget: int, cache_dir: Path) -> Problem | None:
    index = corpora.stdlib_index(cache_dir)
    pairs = sorted((user, definer, name) for user, f in index.items() for definer, name in f.imports
                   if name in index[definer].constants
                   and len(corpus.doc(user).text) + len(corpus.doc(definer).text) <= budget // 2)
    if not pairs:
        return None
    user, definer, name = rng.choice(pairs)
    value = index[definer].constants[name]
    others = sorted(p for p, f in index.items()
                    if p not in (user, definer) and name in f.constants and f.constants[name] != value
                    and len(corpus.doc(p).text) <= budget // (4 * max(distractors, 1)))
    others = rng.sample(others, min(distractors, len(others)))
    ds = [Distractor(value=index[p].constants[name], label=f"wrong_file:{p}") for p in others]
    kind: Literal["number", "text"] = "number" if isinstance(value, int) else "text"
    q = (f"The module `{user}` imports the constant `{name}` from another module of this repository. "
         f"What value is `{name}` given where it is defined? Give the value only "
         f"({'a number' if kind == 'number' else 'the string, without quotes'}).")
    return Problem("multihop", q, AnswerKey(answer=value, type=kind, distractors=ds), [user, definer, *others])


# --- aggregation ----------------------------------------------------------------------------------

def aggregation(corpus: Corpus, rng: random.Random, distractors: int, budget: int, cache_dir: Path) -> Problem:
    return {"stdlib": _agg_stdlib, "kjv": _agg_kjv, "plays": _agg_plays}[corpus.name](corpus, rng, budget, cache_dir)


def _agg_stdlib(corpus: Corpus, rng: random.Random, budget: int, cache_dir: Path) -> Problem:
    index = corpora.stdlib_index(cache_dir)
    folders: dict[str, list[str]] = {}
    for d in corpus.docs:
        parts = d.path.split("/")
        for depth in range(1, len(parts)):
            folders.setdefault("/".join(parts[:depth]) + "/", []).append(d.path)
    options = []
    for folder, paths in sorted(folders.items()):
        if len(paths) < 3 or sum(len(corpus.doc(p).text) for p in paths) > budget * 0.7:
            continue
        counts = Counter(n for p in paths for n in set(index[p].functions))
        options += [(folder, n) for n, c in sorted(counts.items()) if 2 <= c < len(paths)]
    options = _largest(options, lambda o: sum(len(corpus.doc(p).text) for p in folders[o[0]]), budget)
    if not options:
        raise TaskError(f"no stdlib folder fits an aggregation task in {budget // CHARS_PER_TOKEN} tokens")
    folder, name = rng.choice(options)
    scope = folders[folder]
    hits = sorted(p for p in scope if name in index[p].functions)
    if rng.random() < 0.5:
        q = (f"How many of the files under `{folder}` define a top-level function (a `def` at module level, "
             f"not a method) named `{name}`? Give the number only.")
        return Problem("aggregation", q, AnswerKey(answer=len(hits), type="number"), scope)
    q = (f"List every file under `{folder}` that defines a top-level function (a `def` at module level, not a "
         f"method) named `{name}`: their paths as the repository shows them, one per line.")
    return Problem("aggregation", q, AnswerKey(answer=hits, type="set"), scope)


def _agg_kjv(corpus: Corpus, rng: random.Random, budget: int, cache_dir: Path) -> Problem:
    books: dict[str, list[Document]] = {}
    for d in corpus.docs:
        books.setdefault(d.path.split("/")[0], []).append(d)
    for _ in range(50):
        book = rng.choice(sorted(books))
        chapters = books[book]
        start = rng.randrange(len(chapters))
        scope, size = [], 0
        for d in chapters[start:]:
            if size + len(d.text) > budget * 0.6:
                break
            scope.append(d)
            size += len(d.text)
        if not scope:
            continue
        verses = [v for d in scope for v in d.text.splitlines()]
        title = re.sub(r" \d+:\d+ .*$", "", verses[0])  # "1 Samuel 3:4 And the LORD..." -> "1 Samuel"
        words = Counter(w for v in verses for w in set(re.findall(r"\b[A-Z][a-z]{3,}\b", v.split(" ", 2)[-1])))
        names = sorted(w for w, c in words.items() if 3 <= c <= 40 and w not in _COMMON)
        if not names:
            continue
        word = rng.choice(names)
        n = sum(1 for v in verses if re.search(rf"\b{word}\b", _verse_text(v)))
        first, last = scope[0].path, scope[-1].path
        span = (f"chapter {_chapter(first)} (file {first})" if first == last
                else f"chapters {_chapter(first)} to {_chapter(last)} (files {first} to {last})")
        q = (f"In how many verses of {title} {span} does the word \"{word}\" occur, "
             f"capitalised as here and as a whole word (\"{word}'s\" counts)? Count each verse once. Give the number only.")
        return Problem("aggregation", q, AnswerKey(answer=n, type="number"), [d.path for d in scope])
    raise TaskError(f"no KJV passage fits an aggregation task in {budget // CHARS_PER_TOKEN} tokens")


_COMMON = {"Lord", "LORD", "Thou", "Then", "They", "There", "This", "That", "Which", "When", "Behold", "Wherefore",
           "Therefore", "What", "Thus", "Israel", "With", "Their", "These", "Also", "Because", "Now", "Father"}


def _verse_text(line: str) -> str:
    # "1 Samuel 3:4 And the LORD called..." -> the text after the citation
    return re.sub(r"^.*?\d+:\d+ ", "", line, count=1)


def _chapter(path: str) -> int:
    return int(path.rsplit("-", 1)[1].split(".")[0])


def _agg_plays(corpus: Corpus, rng: random.Random, budget: int, cache_dir: Path) -> Problem:
    by_play: dict[str, list[Document]] = {}
    for d in corpus.docs:
        by_play.setdefault(d.path.split("/")[0], []).append(d)
    scopes: list[tuple[str, list[Document]]] = []
    for play, scenes in sorted(by_play.items()):
        if sum(len(d.text) for d in scenes) <= budget * 0.7:
            scopes.append((f"the whole play (files `{play}/*`)", scenes))
        acts: dict[str, list[Document]] = {}
        for d in scenes:
            acts.setdefault(d.path.split("-scene")[0], []).append(d)
        for act, ds in sorted(acts.items()):
            if len(ds) > 1 and sum(len(d.text) for d in ds) <= budget * 0.7:
                scopes.append((f"the files `{act}-scene*.md`", ds))
        scopes += [(f"the file `{d.path}`", [d]) for d in scenes if len(d.text) <= budget * 0.7]
    scopes = [(w, ds) for w, ds in scopes if len(set(SPEAKER.findall("".join(d.text for d in ds)))) >= 2]
    scopes = _largest(scopes, lambda s: sum(len(d.text) for d in s[1]), budget)
    if not scopes:
        raise TaskError(f"no scene fits an aggregation task in {budget // CHARS_PER_TOKEN} tokens")
    where, scope = rng.choice(scopes)
    speakers = [s.strip() for d in scope for s in SPEAKER.findall(d.text)]
    if len(scope) == 1 and rng.random() < 0.5:
        order = list(dict.fromkeys(speakers))
        q = (f"List the characters who speak in {where}, in the order of their first speech, one per line, "
             f"each name written as in its speech headings (**NAME**).")
        return Problem("aggregation", q, AnswerKey(answer=order, type="list"), [scope[0].path])
    name = rng.choice(sorted(set(speakers)))
    q = (f"How many speeches does {name} make in {where}? A speech is one **{name}** heading line. "
         f"Give the number only.")
    return Problem("aggregation", q, AnswerKey(answer=speakers.count(name), type="number"), [d.path for d in scope])


def _largest(options: list, size, budget: int) -> list:  # type: ignore[no-untyped-def,type-arg]
    """The options whose scope takes at least a sixth of the haystack, where there are any: a longer
    task aggregates over more text."""
    big = [o for o in options if size(o) >= budget / 6]
    return big or options


# --- conflicts ------------------------------------------------------------------------------------

def conflict(corpus: Corpus, rng: random.Random, distractors: int, budget: int, cache_dir: Path) -> Problem:
    template, unit = rng.choice(QUANTITIES)
    what = template.format(x=rng.choice(THINGS))
    n = distractors + 1
    values = rng.sample(range(3, 99), n)
    if rng.random() < 0.5:
        years = sorted(rng.sample(range(1850, 1950), n))
        dates = [(y, rng.randrange(12), rng.randint(1, 28)) for y in years]
        hosts = _hosts(corpus, rng, n, budget)
        plants = [Plant(path=h, line=_at(corpus, rng, h), text=f"Amendment of {d} {MONTHS[m]} {y}: the {what} is set at {v} {unit}.")
                  for h, (y, m, d), v in zip(hosts, dates, values, strict=True)]
        ds = [Distractor(value=v, label=f"superseded:{y}-{m + 1:02d}-{d:02d}")
              for (y, m, d), v in zip(dates[:-1], values[:-1], strict=True)]
        q = (f"Several amendments in these files set the {what}, and they disagree. The amendment with the latest "
             f"date is in force. What is the {what}, in {unit}? Give the number only.")
        return Problem("conflict", q, AnswerKey(answer=values[-1], type="number", unit=unit, distractors=ds), hosts, plants)
    major = rng.randint(1, 4)
    minors = sorted(rng.sample(range(1, 16), n))
    versions = [f"{major}.{m}" for m in minors]  # 1.9 < 1.10: compared part by part, not as decimals
    hosts = _hosts(corpus, rng, n, budget)
    plants = []
    for h, ver, v in zip(hosts, versions, values, strict=True):
        plants.append(Plant(path=h, line=0, text=f"Policy file version {ver}."))
        plants.append(Plant(path=h, line=_at(corpus, rng, h), text=f"Under this file's policy, the {what} is {v} {unit}."))
    ds = [Distractor(value=v, label=f"lower_version:{ver}") for ver, v in zip(versions[:-1], values[:-1], strict=True)]
    q = (f"Several files state the {what}, and they disagree. Each such file states its policy version near its top; "
         f"the statement in the file with the highest version wins (versions compare part by part as numbers, so "
         f"2.10 is higher than 2.9). What is the {what}, in {unit}? Give the number only.")
    return Problem("conflict", q, AnswerKey(answer=values[-1], type="number", unit=unit, distractors=ds), hosts, plants)


GENERATORS = {"needle": needle, "multihop": multihop, "aggregation": aggregation, "conflict": conflict}
