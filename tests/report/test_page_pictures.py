"""Pictures redrawn from pages' own tables, the Results index's picture, Getting started's picture
and the reward matrices' readability (issue 56.1): every checked-in picture plots what its page
holds now (its data read back from the PNG against the page read again), the readers' numbers
are checked against hand-written tables, and every number in a matrix cell shows at least as
large as body text at the page's width (the size computed here by hand, not by the plotting code)."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

import numpy as np
import pytest

from robustvlm.analysis.reward_matrix import MatrixResults, cell_key
from robustvlm.errors import DataError
from robustvlm.report import page_pictures
from robustvlm.report.page_tables import markdown_tables, numbers
from robustvlm.report.plots import new_figure, plotted_data, save_figure
from robustvlm.report.reward_report import matrix_figure
from robustvlm.report.tour_picture import tour_data, tour_picture

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("name", list(page_pictures.PICTURES))
def test_each_checked_in_picture_plots_what_its_page_holds_now(name):
    read, _ = page_pictures.PICTURES[name]
    drawn = plotted_data(ROOT / "docs" / "images" / name)
    assert drawn == json.loads(json.dumps(read(ROOT))), (
        f"docs/images/{name} is not current with its pages: run `make figures-pages`")


def test_the_tables_are_read_as_the_page_shows_them():
    text = ("intro\n\n| method | a, x | b |\n|---|---|---|\n| ERM | 50.5 ± 1.4 | −2 |\n| IRM | 8 | 1,088 |\n\n"
            "prose | with a bar\n\n| k |\n|:-:|\n| v |\n")
    assert markdown_tables(text) == [[{"method": "ERM", "a, x": "50.5 ± 1.4", "b": "−2"},
                                      {"method": "IRM", "a, x": "8", "b": "1,088"}], [{"k": "v"}]]
    assert numbers("50.5 ± 1.4", "here") == [50.5, 1.4]
    assert numbers("−2", "here") == [-2.0] and numbers("1,088 tokens", "here") == [1088.0]
    with pytest.raises(DataError, match="here: no number in the cell '—'"):
        numbers("—", "here")


def _page(tmp_path: Path, page: Path, text: str) -> Path:
    (tmp_path / page).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / page).write_text(text, encoding="utf-8")
    return tmp_path


SWEEP = ("| method | colour-free, training-domain val. | colour-free, ORACLE | reversed, training-domain val. |\n"
         "|---|---|---|---|\n| ERM | 50.5 ± 0.0 | 50.5 ± 0.0 | 8.2 ± 0.0 |\n| IRMv1 | 52.0 ± 1.5 | 40 ± 1 | 9.5 ± 0.5 |\n")


def test_the_sweeps_picture_plots_each_method_of_both_tables(tmp_path):
    root = _page(tmp_path, page_pictures.SPURIOUS_PAGE, f"# S\n\n{SWEEP}\nText.\n\n{SWEEP.replace('ERM', 'ERM2')}")
    data = page_pictures.spurious_data(root)
    shapes, digits = page_pictures.SPURIOUS_BENCHMARKS
    assert data[shapes] == {"colour-free, training-domain val.": [["ERM", 50.5, 0.0], ["IRMv1", 52.0, 1.5]],
                            "reversed, training-domain val.": [["ERM", 8.2, 0.0], ["IRMv1", 9.5, 0.5]]}
    assert data[digits]["reversed, training-domain val."][0] == ["ERM2", 8.2, 0.0]
    path = page_pictures.spurious_picture(data, tmp_path / "s.png")
    assert plotted_data(path) == data
    _page(tmp_path, page_pictures.SPURIOUS_PAGE, f"# S\n\n{SWEEP}")
    with pytest.raises(DataError, match="1 sweep tables, expected 2"):
        page_pictures.spurious_data(root)


REAL = ("| figure | measured | target |\n|---|---|---|\n"
        "| A / B, step time | 1.061x (one step, noise +-25%) | <= 1.10x: met |\n"
        "| scoring K = 5 | 4.15x CPU time (2 threads), 4.35x | >= 3x: met |\n"
        "| C / D, time, memory | 0.924x, 1.037x (CPU time) | <= 1.10x, <= 1.05x: met |\n"
        "| E / F, time, memory | 1.2x, 1.0x | none (within the bounds) |\n")


def test_the_benchmarks_picture_plots_each_ratio_that_has_a_target(tmp_path):
    root = _page(tmp_path, page_pictures.REAL_SIZE_PAGE, f"# R\n\n{REAL}")
    data = page_pictures.real_size_data(root)
    assert data == [["A / B, step time", "", 1.061, "<=", 1.10], ["scoring K = 5", "", 4.15, ">=", 3.0],
                    ["C / D", "time", 0.924, "<=", 1.10], ["C / D", "memory", 1.037, "<=", 1.05]]
    assert plotted_data(page_pictures.real_size_picture(data, tmp_path / "r.png")) == data
    _page(tmp_path, page_pictures.REAL_SIZE_PAGE, f"# R\n\n{REAL.replace('<= 1.10x, <= 1.05x', '<= 1.10x')}")
    with pytest.raises(DataError, match="C / D, time, memory: 1 targets for 2 measured ratios"):
        page_pictures.real_size_data(root)


def test_the_index_picture_takes_each_linked_pages_first_picture(tmp_path):
    results = tmp_path / page_pictures.RESULTS
    _page(tmp_path, page_pictures.RESULTS / "index.md", "# Results\n\n- [A](a.md): a.\n- [B](b.md): b.\n- [A](a.md)\n")
    _page(tmp_path, page_pictures.RESULTS / "a.md", "# Page A\n\n![x](../images/one.png)\n\n![y](../images/two.png)\n")
    _page(tmp_path, page_pictures.RESULTS / "b.md", "# Page B\n\nno picture\n")
    fig, _ = new_figure()
    save_figure(fig, tmp_path / page_pictures.IMAGES / "one.png")
    digest = hashlib.sha256((tmp_path / page_pictures.IMAGES / "one.png").read_bytes()).hexdigest()
    assert page_pictures.headline_data(tmp_path) == [
        {"page": "a.md", "title": "Page A", "image": "docs/images/one.png", "sha256": digest}]
    assert plotted_data(page_pictures.draw("results-headlines.png", tmp_path))[0]["sha256"] == digest
    (results / "a.md").write_text("# Page A\n\n![x](../images/gone.png)\n", encoding="utf-8")
    with pytest.raises(DataError, match="a.md shows docs/images/gone.png, which does not exist"):
        page_pictures.headline_data(tmp_path)


def test_the_command_redraws_and_refuses_an_unknown_picture(tmp_path, capsys):
    with pytest.raises(SystemExit):
        page_pictures.main(["nope.png"])
    assert "unknown picture(s) nope.png; known: spurious-study.png" in capsys.readouterr().err
    assert page_pictures.main(["real-size.png", "--root", str(tmp_path)]) == 2
    assert capsys.readouterr().err.strip() == f"error: real-size.png: {tmp_path / page_pictures.REAL_SIZE_PAGE} not found"


def test_the_tour_picture_plots_the_runs_loss_and_chrf(tmp_path):
    run = tmp_path / "run"
    (run / "eval").mkdir(parents=True)
    rows = [{"step": s, "loss": 5.0 - s, "lr": 0.1} for s in (1, 2, 3)] + [{"eval": 1}]
    (run / "train_log.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    metrics = {"per_env": {"a": {"n": 4, "ood": False, "chrf": 0.5}, "ocr": {"n": 4, "ood": True, "chrf": 0.0}},
               "id": {"chrf": 0.5}, "ood": {"chrf": 0.0}}
    (run / "eval" / "metrics.json").write_text(json.dumps(metrics), encoding="utf-8")
    data = tour_data(run, run / "eval")
    assert data == {"loss": [[1, 4.0], [2, 3.0], [3, 2.0]], "chrf": {"a": [0.5, False], "ocr": [0.0, True]},
                    "id": 0.5, "ood": 0.0}
    assert plotted_data(tour_picture(data, tmp_path / "t.png")) == data
    (run / "eval" / "metrics.json").write_text("{}", encoding="utf-8")
    with pytest.raises(DataError, match=r"metrics.json: no chrF per environment"):
        tour_data(run, run / "eval")


def test_getting_started_states_the_figures_its_picture_plots():
    drawn = plotted_data(ROOT / "docs" / "images" / "tour.png")
    page = (ROOT / "docs" / "getting-started.md").read_text(encoding="utf-8")
    stated = re.search(r"formats \(chrF (\d\.\d\d)\) but not the held-out OCR tasks \((\d\.\d\d)\)", page)
    assert stated, "Getting started's finding no longer states the in-domain and held-out chrF"
    assert (f"{drawn['id']:.2f}", f"{drawn['ood']:.2f}") == stated.groups()
    assert [step for step, _ in drawn["loss"]] == list(range(1, 201))  # the tour's 200 steps


def test_a_picture_without_data_reads_none(tmp_path):
    fig, _ = new_figure()
    assert plotted_data(save_figure(fig, tmp_path / "p.png")) is None


@pytest.mark.parametrize("n_envs", [4, 8])
def test_every_number_of_the_reward_matrices_shows_as_large_as_body_text(n_envs):
    envs = [f"env{i}" for i in range(n_envs)]
    cells = {lb: {cell_key(a, b): {"mean": 0.5, "std": 0.1} for a in envs for b in envs}
             for lb in ("standard", "shortcut_aware")}
    averages = {lb: {"iid": {"mean": 0.9, "std": 0.01}, "ood": {"mean": 0.5, "std": 0.02}} for lb in cells}
    fig = matrix_figure(MatrixResults(list(cells), None, envs, envs, [0, 1, 2], cells=cells, averages=averages))
    width_in = fig.get_size_inches()[0]
    shown_px_per_in = min(690, width_in * 150) / width_in  # the docs' 690-px column, 150 dpi
    texts = [t for ax in fig.axes for t in ax.texts]
    assert len(texts) == 2 * n_envs ** 2 and texts[0].get_text() == "50 ±10"
    for text in [*texts, *(label for ax in fig.axes for label in ax.get_xticklabels())]:
        assert text.get_fontsize() / 72 * shown_px_per_in >= 16 - 1e-9, text.get_text()  # body text: 16 px
    assert np.isclose(width_in, 6.0)
