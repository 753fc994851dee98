"""The vision-gain chart's axis names the gain by the table's own column names (issue 46.7: the
axis said "normal - blind" where the table says "with image")."""

from __future__ import annotations

from robustvlm.report import vision_gain
from robustvlm.report.page import Table
from robustvlm.report.vision_gain import GainSection, vision_gain_blocks

ROW = {"env": "clean", "n": 10, "normal": 0.8, "blind": 0.5, "gain": 0.3, "ci_lo": 0.1, "ci_hi": 0.5,
       "mcnemar_p": 0.03}


def test_the_axis_label_names_two_columns_of_the_table(tmp_path, monkeypatch):
    drawn = {}
    monkeypatch.setattr(vision_gain, "bar_with_ci", lambda *args, ylabel, **kw: drawn.update(ylabel=ylabel))
    blocks = vision_gain_blocks([GainSection({"model": "tiny"}, "no image", [ROW])], tmp_path)
    table = next(b for b in blocks if isinstance(b, Table))
    header = table.header
    with_image, blind = header[2], header[3]
    assert drawn["ylabel"].endswith(f"{with_image} - {blind}"), (drawn["ylabel"], header)
    assert table.rows[0][2:4] == ["0.800", "0.500"]
