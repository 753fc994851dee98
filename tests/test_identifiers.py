"""Identifiers parsed in one place: a figure's name (`report.figure_name.FigureName`) and a hub
dataset's data path (`hub_dataset.HubDataset`) read back to the value they name, and no module
but each one's own reads them by their text.

Model names (tests/test_model_ref.py), ladder rungs (tests/analysis/test_ladder_rung.py) and
corruption domains (tests/experiments/demos/test_robustness_zoo_corruptions.py) have their own
greps beside their types' tests.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import robustvlm
from robustvlm.errors import ConfigError
from robustvlm.figures.images import image_name
from robustvlm.figures.write import load_results
from robustvlm.hub_dataset import HubDataset
from robustvlm.report.figure_name import FigureName
from robustvlm.report.figure_sources import experiment_of

PACKAGE = Path(robustvlm.__file__).parent

#: reading a figure name by its text: a split or partition at ':' of a name, or one built by hand
FIGURE_PARSING = re.compile(r"""\b\w*(name|figure|pair)\w*\.r?(split|partition)\(\s*["']:["']"""
                            r"""|\b\w*figure\w*\.replace\(\s*["']:["']|\{\w+\}:\{tag\}""")
#: reading a hub data path by its text: a test of its prefix, a slice past it, one built by hand
HUB_PARSING = re.compile(r"""(startswith|removeprefix)\([^)]*["']hf:|\[\s*len\(\s*["']hf:"""
                         r"""|["']hf:["']\s*(in|==|!=)\s|["']hf:\{""")


def test_a_figure_name_reads_back_to_its_kind_and_tag():
    for text, kind, tag in (("ladder", "ladder", None), ("rm-seeds:cue70", "rm-seeds", "cue70"),
                            ("icl-defined-labels:llava-clip-m-lmfirst-4-shots", "icl-defined-labels",
                             "llava-clip-m-lmfirst-4-shots"), ("a:b:c", "a", "b:c")):
        name = FigureName.parse(text)
        assert (name.kind, name.tag) == (kind, tag) and str(name) == text and FigureName.parse(str(name)) == name
    assert FigureName.parse("rm-seeds:cue70").file_stem == "rm-seeds-cue70"
    assert image_name("rm-seeds:cue70") == "rm-seeds-cue70.png" and image_name("ladder") == "ladder.png"


@pytest.mark.parametrize("bad", ["", ":tag", "ladder:"])
def test_a_bad_figure_name_is_refused_naming_it(bad):
    with pytest.raises(ConfigError, match=re.escape(repr(bad))):
        FigureName.parse(bad)


def test_a_figure_is_looked_up_by_its_kind_and_an_unknown_one_named(tmp_path):
    assert experiment_of("icl-gain:llava-clip-m-icl") == experiment_of("icl-gain") == "icl"
    assert experiment_of("icl-gain:llava-clip-m-lmfirst") == "zoo-iii"  # a tagged figure of its own
    assert experiment_of("icl-gain:llava-clip-m-curriculum-4-shots") == "zoo-ii"
    with pytest.raises(ConfigError, match=r"'no-such' \(in 'no-such:tag'\) declares no source modules"):
        experiment_of("no-such:tag")
    with pytest.raises(ConfigError, match=r"unknown figure 'no-such' \(in 'no-such:tag'\)"):
        load_results("no-such:tag", tmp_path)


def test_a_hub_path_reads_back_to_its_dataset_and_a_local_one_to_none():
    assert HubDataset.parse("hf:MMInstruction/VL-RewardBench") == HubDataset("MMInstruction/VL-RewardBench")
    assert HubDataset.parse("hf:sdfss1/RMHackBench:jailbreak") == HubDataset("sdfss1/RMHackBench", "jailbreak")
    for text in ("hf:org/name", "hf:org/name:cfg"):
        assert str(HubDataset.parse(text)) == text
    assert HubDataset("org/name").with_config("cfg") == HubDataset("org/name", "cfg")
    for local in ("data/train.jsonl", "./hf:odd", "org/name", Path("hf:org/name")):
        assert HubDataset.parse(local) is None, local


def test_the_checks_find_the_old_parsing():
    """The lines these identifiers were read by before their types (issue 50), and look-alikes
    that are not reading one."""
    for line in ('name = name.split(":", 1)[0]', 'table = FIGURES[name.split(":", 1)[0]][1](results)',
                 'if name.split(":", 1)[0] in GRIDS:', 'name = figure.split(":", 1)[0]',
                 'draw = IMAGES.get(figure.split(":", 1)[0])', 'kind, _, tag = name.partition(":")',
                 'return figure.replace(":", "-") + ".png"', '**{f"{name}:{tag}": "zoo-ii" for name in NAMES}'):
        assert FIGURE_PARSING.search(line), line
    for line in ('name, results_dir = pair.split("=", 1)', 'module, _, attribute = path.partition(":")',
                 'targets = row["target"].split(":", 1)[0].split(",")', 'kind = FigureName.parse(name).kind',
                 "f\"zero_shot__{source}__{model.name.replace(':', '_')}.json\""):
        assert not FIGURE_PARSING.search(line), line
    for line in ('return self.path is not None and self.path.startswith("hf:")',
                 'if not (isinstance(path, str) and path.startswith("hf:")) and not Path(path).exists():',
                 'if isinstance(path, str) and path.startswith("hf:"):',
                 'name, _, config = spec[len("hf:"):].partition(":")', 'source = f"hf:{name}:{subset}" if subset else spec',
                 'if "hf:" in path:', 'spec = path.removeprefix("hf:")'):
        assert HUB_PARSING.search(line), line
    for line in ('refuse_key_like(dataset.name, "dataset name", "hf:ORG/NAME or a local file")',
                 'raise ConfigError(f"{path}: hub subsets and row sampling apply only to hf:NAME datasets")',
                 'if HubDataset.parse(path) is None and Path(path).is_dir():'):
        assert not HUB_PARSING.search(line), line


def _outside(own: Path, pattern: re.Pattern[str]) -> list[str]:
    """`file:line: text` of each line of src/robustvlm (but `own`) that `pattern` finds."""
    return [f"{path.relative_to(PACKAGE)}:{number}: {line.strip()}"
            for path in sorted(PACKAGE.rglob("*.py")) if path != own
            for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
            if pattern.search(line)]


def test_no_module_but_the_figure_names_own_reads_a_figure_name():
    found = _outside(PACKAGE / "report" / "figure_name.py", FIGURE_PARSING)
    assert found == [], "figure names read outside report/figure_name.py (use FigureName):\n" + "\n".join(found)


def test_no_module_but_the_hub_datasets_own_reads_a_hub_path():
    found = _outside(PACKAGE / "hub_dataset.py", HUB_PARSING)
    assert found == [], "hub data paths read outside hub_dataset.py (use HubDataset):\n" + "\n".join(found)
