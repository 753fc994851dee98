"""The shared plot helpers: percentage axes on transformed scales, series and bar plots."""

from __future__ import annotations

import numpy as np
import pytest
from matplotlib.figure import Figure
from scipy import stats as sps

from robustvlm.analysis.accuracy_on_the_line import transform
from robustvlm.errors import DataError
from robustvlm.report.plots import bar_with_ci, percent_axis, plot_series

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def test_percent_axis_places_ticks_at_transformed_percentages():
    fig = Figure()
    ax = fig.subplots()
    percent_axis(ax, "x", lambda a: transform(a, "probit"), (0.6, 0.96), label="ref")
    np.testing.assert_allclose(ax.get_xticks(), sps.norm.ppf([0.6, 0.7, 0.8, 0.9, 0.95]))
    assert [t.get_text() for t in ax.get_xticklabels()] == ["60%", "70%", "80%", "90%", "95%"]
    np.testing.assert_allclose(ax.get_xlim(), sps.norm.ppf([0.6, 0.96]))
    percent_axis(ax, "y", lambda a: transform(a, "probit"), (0.84, 0.86))  # narrow: 3 even ticks
    assert [t.get_text() for t in ax.get_yticklabels()] == ["84.5%", "85%", "85.5%"]


def test_plot_series_and_bar_with_ci_write_pngs(tmp_path):
    rows = [{"step": s, "loss": 1 / (s + 1), "lambda": 10.0 ** (s / 10)} for s in range(50)]
    rows.insert(10, {"step": 10, "eval_acc": 0.6})  # rows without a key are not on its curve
    path = plot_series(
        rows, ["loss", "lambda"], tmp_path / "curves.png", "training", log_keys=["lambda"]
    )
    assert path.read_bytes()[:8] == PNG_MAGIC
    with pytest.raises(DataError, match="penalty"):
        plot_series(rows, ["penalty"], tmp_path / "none.png", "x")
    bars = bar_with_ci(
        ["erm", "birm"], [0.5, 0.6], [0.45, 0.52], [0.55, 0.7], tmp_path / "bars.png", "acc"
    )
    assert bars.read_bytes()[:8] == PNG_MAGIC
    with pytest.raises(DataError, match="contain its mean"):
        bar_with_ci(["erm"], [0.5], [0.55], [0.6], tmp_path / "bad.png", "acc")
