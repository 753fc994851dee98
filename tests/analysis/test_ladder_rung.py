"""The ladder's rungs as typed values (`experiments.ladder.rung`): an id names one rung and reads
back to it, a bad id is refused naming it, and no module but the rung's own reads an id by its
prefix."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import robustvlm
from robustvlm.experiments.ladder.plan import DEMO, DEMO_QUICK, PRESETS
from robustvlm.experiments.ladder.rung import MODES, PIXELS, TOWER, VLM, Rung, cell_id, parse_cell
from robustvlm.model_ref import ModelRef

PACKAGE = Path(robustvlm.__file__).parent
OWN = PACKAGE / "experiments" / "ladder" / "rung.py"
#: reading a rung id (or a "source/rung" cell) by its text: a prefix test, a slice past a prefix,
#: a split of an id, a prefix literal
PREFIX_PARSING = re.compile(
    r"""startswith\(\s*(\w+\.)?(VLM|TOWER|PIXELS)\b"""
    r"""|["'](/)?(vlm|tower):["']"""
    r"""|\brung\w*\s*(\[\s*len\(|\.(startswith|partition|split|removeprefix)\()"""
    r"""|\bcell\w*\s*\.(partition|split)\(\s*["']/["']""")


def test_an_id_is_the_rung_it_names():
    tiny, zoo = ModelRef.tiny("idefics3"), ModelRef.zoo("quick-idefics3")
    assert Rung.pixels().id == "pixels" and Rung.tower(ModelRef.tiny("clip")).id == "tower:tiny:clip"
    assert Rung.vlm("head", tiny).id == "vlm:head:tiny:idefics3" and Rung.vlm("full", zoo).id == "vlm:full:zoo:quick-idefics3"
    for rung in (Rung.pixels(), Rung.tower(tiny), *(Rung.vlm(mode, m) for mode in MODES for m in (tiny, zoo))):
        assert Rung.parse(rung.id) == rung and str(rung) == rung.id
    assert Rung.parse("vlm:lora:zoo:quick-idefics3") == Rung(VLM, zoo, "lora")
    assert parse_cell(cell_id("fashion", Rung.tower(tiny))) == ("fashion", Rung(TOWER, tiny))
    for plan in (*PRESETS.values(), DEMO, DEMO_QUICK):
        assert all(parse_cell(cell_id(s, r)) == (s, r) and r.kind in (PIXELS, TOWER, VLM) for s, r in plan.cells)


@pytest.mark.parametrize("bad", ["", "pixel", "pixels:tiny:clip", "tower", "tower:", "vlm:tiny:idefics3",
                                 "vlm:frozen:tiny:idefics3", "vlm:head", "vlm:head:"])
def test_a_bad_id_is_refused_naming_it(bad):
    with pytest.raises(ValueError, match=re.escape(repr(bad))):
        Rung.parse(bad)


def test_a_bad_cell_or_rung_is_refused():
    with pytest.raises(ValueError, match="not a ladder cell"):
        parse_cell("pixels")
    with pytest.raises(ValueError, match="not a ladder rung"):
        Rung(VLM, ModelRef.tiny("idefics3"))  # a VLM rung without its mode
    with pytest.raises(ValueError, match="not a ladder rung"):
        Rung(PIXELS, ModelRef.tiny("clip"))


def test_the_check_finds_prefix_parsing():
    for line in ('if rung.startswith(VLM):', 'backend = load_backend(rung[len(TOWER):])',
                 'mode, _, model = rung[len(VLM):].partition(":")', 'VLM = "vlm:"', 'TOWER = "tower:"',
                 'cells = [c for c in summary if "/vlm:" in c]', 'models = {cell.partition("/")[2].split(":", 2)[2]}',
                 'p["rung"].startswith(ladder.VLM)', 'return rung_id.removeprefix("vlm:")'):
        assert PREFIX_PARSING.search(line), line
    for line in ('if rung.kind == VLM:', 'rung = Rung.parse(record["rung"])', 'cell_id(source, rung)',
                 'f"{run[\'source\']}/{run[\'rung\']}"', 'rung.id.replace(":", "_")', 'rungs=FULL.rungs[:2]'):
        assert not PREFIX_PARSING.search(line), line


def test_no_module_but_the_rungs_own_reads_a_rung_id_by_its_prefix():
    found = [f"{path.relative_to(PACKAGE)}:{n}: {line.strip()}"
             for path in sorted(PACKAGE.rglob("*.py")) if path != OWN
             for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
             if PREFIX_PARSING.search(line)]
    assert found == [], "rung ids read by prefix outside experiments/ladder/rung.py (use Rung / parse_cell):\n" + "\n".join(found)
