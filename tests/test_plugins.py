"""A package of the user's registers an objective, a metric and a model backend through the
`robustvlm.plugins` entry-point group, and robustvlm uses them (`robustvlm.plugins`)."""

from __future__ import annotations

import textwrap

import pytest

from robustvlm import plugins
from robustvlm.errors import ConfigError
from robustvlm.evaluation.metrics.registry import METRICS
from robustvlm.model_ref import ModelRef
from robustvlm.models.backends import BACKENDS
from robustvlm.objectives import REGISTRY

PLUGIN = '''
from robustvlm.evaluation.metrics.exact import exact_match
from robustvlm.evaluation.metrics.registry import METRICS, PER_BATCH, Metric
from robustvlm.models.backends import BACKENDS, BackendSpec, DualEncoderBackend
from robustvlm.objectives import REGISTRY
from robustvlm.objectives.erm import ERM


class PluginERM(ERM):
    name = "plugin_erm"
    label = "Plugin ERM"


def register():
    REGISTRY[PluginERM.name] = PluginERM
    METRICS["plugin_exact"] = Metric("plugin_exact", "plugin exact", PER_BATCH, exact_match)
    BACKENDS["plugin-dual"] = BackendSpec(DualEncoderBackend, frozenset({"image_embed", "text_embed"}))
'''


def install(root, name, module_source, entry):
    """A distribution `name` as pip leaves one on sys.path: its module and a dist-info folder whose
    entry_points.txt declares `entry` in the robustvlm.plugins group."""
    (root / f"{name}.py").write_text(textwrap.dedent(module_source), encoding="utf-8")
    info = root / f"{name}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n", encoding="utf-8")
    (info / "entry_points.txt").write_text(f"[robustvlm.plugins]\n{name} = {entry}\n", encoding="utf-8")


@pytest.fixture
def registries():
    """The three registries as they were, restored after the test (a plugin adds to them)."""
    saved = [(registry, dict(registry)) for registry in (REGISTRY, METRICS, BACKENDS)]
    plugins.reset_plugins()
    yield
    for registry, content in saved:
        registry.clear()
        registry.update(content)
    plugins.reset_plugins()


def test_a_plugin_registers_an_objective_a_metric_and_a_backend(tmp_path, monkeypatch, registries):
    from robustvlm.evaluation.metrics.registry import check_metric_names
    from robustvlm.models.backends import load_backend
    from robustvlm.objectives import build_objective

    install(tmp_path, "myplugin", PLUGIN, "myplugin:register")
    monkeypatch.syspath_prepend(str(tmp_path))
    assert "plugin_erm" not in REGISTRY
    objective = build_objective("plugin_erm", ["a", "b"])  # an unknown name loads the plugins first
    assert type(objective).label == "Plugin ERM" and plugins.load_plugins() == ["myplugin"]
    check_metric_names(["exact", "plugin_exact"])
    backend = load_backend(ModelRef.parse("tiny:clip"), "plugin-dual", corpus=["a photo of a cat", "a dog"])
    embeddings = backend.embed_texts(["a cat", "a dog"])
    assert embeddings.shape[0] == 2 and backend.family == "plugin-dual"


def test_a_broken_plugin_is_named_and_stops_the_cli(tmp_path, monkeypatch, registries, capsys):
    from robustvlm.cli import main

    install(tmp_path, "myplugin", PLUGIN, "myplugin:register")
    install(tmp_path, "broken", "def register():\n    raise RuntimeError('no such thing')\n", "broken:register")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ConfigError, match=r"plugin 'broken' \(broken:register\) failed: RuntimeError: no such thing"):
        plugins.load_plugins()
    plugins.reset_plugins()
    assert main(["train", "--help"]) == 2  # the CLI stops on it, before any work, exit 2
    assert "plugin 'broken'" in capsys.readouterr().err
