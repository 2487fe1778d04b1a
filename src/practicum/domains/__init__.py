"""The domain registry: every ``env:`` kind is a plugin of the ``practicum.domains`` entry-point group.

Built-in plugins live in sub-packages (``math``, ``code``, ``terminal``, ``gym``...) and are
registered in Practicum's own ``pyproject.toml`` exactly as a third-party package registers its
own (docs/domains.md); the contract is :mod:`practicum.domains.plugin`. Plugins are found
through :mod:`importlib.metadata` and imported only when used, so naming them is cheap.

* :func:`plugin_names`: the registered names (no plugin imported);
* :func:`get_plugin`: one plugin, loaded; an unknown name or a plugin that fails to load raises
  :class:`~practicum.errors.PluginError` saying which are known, or what failed and what to do;
* :func:`validate_options`: a domain section's ``options`` (and ``source``) through the plugin's
  ``options_model``, errors located as ``options.<field>`` / ``source.<field>``;
* :func:`build_domain`: the :class:`~practicum.envs.base.Domain` of a config section.
"""

from __future__ import annotations

from functools import cache
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ValidationError

from practicum.domains.plugin import BuildContext, DomainPlugin, Verdict
from practicum.envs.base import Domain
from practicum.errors import ConfigError, PluginError

if TYPE_CHECKING:
    from practicum.config import DomainSection

ENTRY_POINT_GROUP = "practicum.domains"

__all__ = ["ENTRY_POINT_GROUP", "BuildContext", "DomainPlugin", "Verdict", "build_domain", "default_context",
           "get_plugin", "option_errors", "plugin_names", "validate_options"]


def _entry_points() -> dict[str, EntryPoint]:
    found: dict[str, EntryPoint] = {}
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        other = found.get(ep.name)
        if other is not None and other.value != ep.value:
            raise PluginError(f"two domain plugins are registered as {ep.name!r}: {_origin(other)} and {_origin(ep)}; "
                              f"uninstall one of them")
        found[ep.name] = ep
    return dict(sorted(found.items()))


def plugin_names() -> list[str]:
    """The registered domain names, sorted; no plugin is imported."""
    return list(_entry_points())


def plugin_origin(name: str) -> str:
    """Where a registered plugin comes from: its object path and distribution."""
    eps = _entry_points()
    if name not in eps:
        raise _unknown(name, eps)
    return _origin(eps[name])


def _origin(ep: EntryPoint) -> str:
    dist = ep.dist
    where = f"{dist.metadata['Name']} {dist.version}" if dist is not None else "an unknown distribution"
    return f"{ep.value} ({where})"


def _unknown(name: str, eps: dict[str, EntryPoint]) -> PluginError:
    known = ", ".join(eps) or "none"
    return PluginError(f"unknown env {name!r}; the installed domains are: {known} "
                       f"(`practicum envs list` describes them; a third-party domain registers an entry point "
                       f"in the {ENTRY_POINT_GROUP!r} group, see docs/domains.md)")


def get_plugin(name: str) -> DomainPlugin:
    """The plugin registered as ``name``, loaded (once per process)."""
    eps = _entry_points()
    if name not in eps:
        raise _unknown(name, eps)
    return _load(eps[name])


@cache
def _load(ep: EntryPoint) -> DomainPlugin:
    try:
        plugin = ep.load()
    except Exception as e:  # noqa: BLE001 - any import-time failure of a plugin is reported as its failure to load
        raise PluginError(f"domain plugin {ep.name!r} from {_origin(ep)} failed to load: {type(e).__name__}: {e}. "
                          f"Fix or reinstall that package, or uninstall it") from e
    missing = [a for a in ("name", "about", "options_model", "components", "tools", "build", "load_task", "verify")
               if not hasattr(plugin, a)]
    if missing:
        raise PluginError(f"domain plugin {ep.name!r} from {_origin(ep)} is not a DomainPlugin: it lacks "
                          f"{', '.join(missing)} (see practicum.domains.plugin)")
    if plugin.name != ep.name:
        raise PluginError(f"domain plugin {ep.name!r} from {_origin(ep)} calls itself {plugin.name!r}; "
                          f"the entry point's name and the plugin's name must agree")
    if not (isinstance(plugin.options_model, type) and issubclass(plugin.options_model, BaseModel)):
        raise PluginError(f"domain plugin {ep.name!r} from {_origin(ep)}: options_model must be a pydantic model class")
    return plugin


def _takes_source(model: type[BaseModel]) -> bool:
    return "source" in model.model_fields


def option_errors(plugin: DomainPlugin, section: DomainSection) -> list[tuple[str, str]]:
    """What is wrong with a section's ``options`` (and ``source``) for ``plugin``, as
    ``(location, message)`` pairs such as ``("options.mode", "Input should be 'single' or 'multi'")``."""
    try:
        validate_options(plugin, section)
    except _OptionsInvalid as e:
        return e.problems
    return []


class _OptionsInvalid(Exception):
    def __init__(self, problems: list[tuple[str, str]]) -> None:
        super().__init__("; ".join(f"{loc}: {msg}" for loc, msg in problems))
        self.problems = problems


def validate_options(plugin: DomainPlugin, section: DomainSection) -> Any:
    """The section's options as the plugin's ``options_model``. ``source:`` is handed over as
    ``options.source`` when the model has such a field."""
    model = plugin.options_model
    data: dict[str, Any] = dict(section.options)
    if section.source is not None:
        if not _takes_source(model):
            raise _OptionsInvalid([("source", f"env {plugin.name!r} takes no source: section; its settings go under options:")])
        if "source" in data:
            raise _OptionsInvalid([("source", "give the source once: as source: or as options.source, not both")])
        data["source"] = section.source
    try:
        return model.model_validate(data)
    except ValidationError as e:
        problems = []
        for err in e.errors():
            loc = [str(x) for x in err["loc"]]
            where = ".".join(loc if loc[:1] == ["source"] and "source" not in section.options else ["options", *loc])
            msg = err["msg"]
            if err["type"] == "extra_forbidden":
                msg = f"unknown field of env {plugin.name!r} (check the spelling; `practicum envs show {plugin.name}` lists its options)"
            problems.append((where, msg.removeprefix("Value error, ")))
        raise _OptionsInvalid(problems) from None


def default_context(seed: int = 0, base_dir: str | Path = ".", sandbox: str = "auto",
                    run_dir: str | Path | None = None) -> BuildContext:
    """The context training hands to plugins: the shared sandbox pool factory included."""
    return BuildContext(seed=seed, base_dir=Path(base_dir), sandbox=sandbox, sessions=_pool_factory(sandbox),
                        run_dir=Path(run_dir) if run_dir is not None else None)


def _pool_factory(default_backend: str) -> Any:
    def sessions(limits: Any = None, size: int = 4, backend: str | None = None) -> Any:
        from practicum.sandbox import LoopPool, SandboxPool, get_sandbox

        sandbox = get_sandbox(backend or default_backend)
        return LoopPool(lambda: SandboxPool(sandbox, size=size, limits=limits))

    return sessions


def build_domain(section: DomainSection, seed: int, base_dir: str | Path = ".",
                 ctx: BuildContext | None = None, run_dir: str | Path | None = None) -> Domain:
    """The domain a config section describes, built by its plugin (``run_dir``: the run's folder,
    for files a domain keeps per run, such as renders)."""
    plugin = get_plugin(section.env)
    try:
        options = validate_options(plugin, section)
    except _OptionsInvalid as e:
        raise ConfigError(f"domain {section.name!r} (env {section.env!r}): " + "; ".join(
            f"{loc}: {msg}" for loc, msg in e.problems)) from None
    return plugin.build(section, options, ctx or default_context(seed, base_dir, run_dir=run_dir))
