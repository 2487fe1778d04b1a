"""The one way Practicum code enters a sandbox: standard-library-only modules, shipped as a
file (bound read-only, like the fork server) or as source (run by ``run_python``, like the
code verifier's worker and harness).

A sandbox has the machine's interpreter but not necessarily Practicum (container mode runs
``/usr/bin/python3``; the code verifier must not let a solution import the host's helpers), so
what is shipped must import nothing but the standard library. :func:`path` and :func:`script`
check that (once per module, from its source): an import of anything else, other than on a line
marked ``# host-only`` (dropped by :func:`script`; for the host's own type-checked use of the
module), raises :class:`~practicum.errors.SandboxError`.
"""

from __future__ import annotations

import ast
import functools
import importlib.util
import sys

from practicum.errors import SandboxError

HOST_ONLY = "# host-only"


@functools.cache
def _file(module: str) -> str:
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None or not spec.origin.endswith(".py"):
        raise SandboxError(f"cannot ship {module}: not a Python source module")
    return spec.origin


@functools.cache
def _checked_source(module: str) -> str:
    """The module's source without its host-only lines, after checking its imports."""
    with open(_file(module), encoding="utf-8") as f:
        text = f.read()
    kept = "\n".join(line for line in text.splitlines() if not line.rstrip().endswith(HOST_ONLY))
    for node in ast.walk(ast.parse(kept)):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            names = [node.module or ""] if node.level == 0 else ["."]
        for name in names:
            top = name.split(".")[0]
            if top != "__future__" and top not in sys.stdlib_module_names:
                raise SandboxError(f"{module} imports {name!r} at line {node.lineno}: code shipped into a sandbox "
                                   f"may import only the standard library (or mark the line {HOST_ONLY!r})")
    return kept


def path(module: str) -> str:
    """The host file of a stdlib-only module, to bind read-only into a sandbox."""
    _checked_source(module)
    if any(line.rstrip().endswith(HOST_ONLY) for line in open(_file(module), encoding="utf-8")):
        raise SandboxError(f"{module} has host-only lines: ship it with script(), not as a file")
    return _file(module)


@functools.cache
def script(*modules: str, main: str = "main()") -> str:
    """The modules' sources (host-only lines dropped) as one program that ends by calling ``main``."""
    return "\n\n".join(_checked_source(m) for m in modules) + f"\n\n{main}\n"
