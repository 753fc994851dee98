"""Plugins: a package of the user's adds an objective, a metric or a model backend to robustvlm
without editing it, as lmms-eval loads its plugins.

A plugin declares an entry point in the group `robustvlm.plugins` (in its pyproject.toml:
`[project.entry-points."robustvlm.plugins"]` then `mine = "my_package.plugin:register"`). The entry
point names a function taking no arguments that registers what the package adds, each into the
one registry robustvlm reads for its kind (docs/architecture.md, "Where each kind of extension goes"):

- an objective: `objectives.REGISTRY[cls.name] = cls` (a subclass of `objectives.Objective`);
- a metric: `evaluation.metrics.registry.METRICS[metric.name] = metric` (a `Metric`);
- a model backend: `models.backends.BACKENDS[family] = BackendSpec(...)`.

`load_plugins` calls every such function once per process; the CLI calls it before it builds its
parser (so help texts and choices list what plugins add), and the registries' lookups
(`objectives.build_objective`, `models.backends.load_backend`, the metric checks) call it before
they refuse a name, so library code sees plugins too. Entry points are read with
`importlib.metadata` (standard library); a plugin that fails to load or register is a
`PluginError` naming it, never skipped in silence.
"""

from __future__ import annotations

from importlib.metadata import entry_points

from robustvlm.errors import ConfigError

GROUP = "robustvlm.plugins"
_loaded: list[str] | None = None


class PluginError(ConfigError):
    """A plugin of the `robustvlm.plugins` group failed to load or to register."""


def load_plugins() -> list[str]:
    """Load and call every entry point of GROUP (once per process); returns their names."""
    global _loaded
    if _loaded is not None:
        return _loaded
    _loaded = []
    for entry in sorted(entry_points(group=GROUP), key=lambda e: e.name):
        try:
            register = entry.load()
            register()
        except Exception as err:  # any failure of foreign code: named, and the run stops
            raise PluginError(f"plugin {entry.name!r} ({entry.value}) failed: {type(err).__name__}: {err}") from err
        _loaded.append(entry.name)
    return _loaded


def reset_plugins() -> None:
    """Forget which plugins were loaded, so the next `load_plugins` reads the entry points again
    (tests install a plugin after robustvlm was imported)."""
    global _loaded
    _loaded = None
