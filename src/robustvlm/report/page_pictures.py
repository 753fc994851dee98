"""Pictures redrawn from a docs page's own tables, and the Results index's picture.

The spurious-feature study's sweeps and the real-size benchmark were typed into their pages from
their runs' output (the run folders are not kept), so their pictures are drawn from the page's
table: the same measurement, redrawn. The Results index's picture puts every Results page's
headline picture (its first) side by side. Each picture keeps the data it plots in its PNG
(`plots.save_figure`), so a test reads the pages again and checks that every picture is current
(tests/report/test_page_pictures.py); `make figures-pages` redraws them.

    python -m robustvlm.report.page_pictures [--root DIR] [NAME ...]
"""

from __future__ import annotations

import argparse
import hashlib
import re
import sys
import textwrap
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.figure import Figure
from matplotlib.image import imread

from robustvlm.errors import DataError, RobustVLMError
from robustvlm.report.page_tables import numbers, tables_with
from robustvlm.report.plots import new_figure, readable_points, save_figure

RESULTS = Path("docs") / "results"
IMAGES = Path("docs") / "images"
#: the size (inches) of the pictures drawn here: at the page's width their text is body-sized, and
#: a picture, its caption and the page's finding fit a first screen (1280 x 900)
WIDTH_IN, HEIGHT_IN = 6.4, 4.0

SPURIOUS_PAGE = RESULTS / "spurious-study.md"
#: the sweep tables' headline columns (training-domain validation), in the order drawn
SPURIOUS_COLUMNS = ("colour-free, training-domain val.", "reversed, training-domain val.")
#: the sweeps' benchmarks, in the order of their tables on the page
SPURIOUS_BENCHMARKS = ("spurious (shapes, configs/sweep_spurious.yaml)", "digits (configs/sweep_digits.yaml)")
REAL_SIZE_PAGE = RESULTS / "real-size.md"


def _page(root: Path, page: Path) -> str:
    path = root / page
    if not path.is_file():
        raise DataError(f"{path} not found")
    return path.read_text(encoding="utf-8")


def spurious_data(root: Path) -> dict[str, Any]:
    """{benchmark: {column: [[method, mean %, standard error], ...]}} of the sweep tables of
    the spurious-study page (`SPURIOUS_COLUMNS`, training-domain validation)."""
    tables = tables_with(_page(root, SPURIOUS_PAGE), SPURIOUS_COLUMNS[0], str(SPURIOUS_PAGE))
    if len(tables) != len(SPURIOUS_BENCHMARKS):
        raise DataError(f"{SPURIOUS_PAGE}: {len(tables)} sweep tables, expected {len(SPURIOUS_BENCHMARKS)}")
    data: dict[str, Any] = {}
    for benchmark, table in zip(SPURIOUS_BENCHMARKS, tables):
        data[benchmark] = {column: [[row["method"], *numbers(row[column], f"{SPURIOUS_PAGE}, {row['method']}")[:2]]
                                    for row in table] for column in SPURIOUS_COLUMNS}
    return data


def spurious_picture(data: dict[str, Any], path: Path) -> Path:
    """One panel: per method, its colour-free and reversed accuracy (%, ± standard error over
    trial seeds) on each benchmark side by side (colour-free in blues, reversed in oranges);
    chance (50%) and the shape rule's ceiling (75%) marked."""
    size = readable_points(WIDTH_IN)
    fig, ax = new_figure(size=(WIDTH_IN, HEIGHT_IN))
    series = [(benchmark, column, rows) for column in SPURIOUS_COLUMNS for benchmark, columns in data.items()
              for rows in [columns[column]]]
    colours = ["#1f5fa0", "#7fb2e0", "#d9661a", "#f5b27a"]
    width = 0.8 / len(series)
    for k, (benchmark, column, rows) in enumerate(series):
        x = np.arange(len(rows)) + (k - (len(series) - 1) / 2) * width
        ax.bar(x, [r[1] for r in rows], width, yerr=[r[2] for r in rows], capsize=2, color=colours[k % len(colours)],
               label=f"{column.split(',')[0]}, {benchmark.split(' ')[0]}")
    methods = [r[0] for r in series[0][2]]
    ax.set_xticks(range(len(methods)), [m.replace(" ", "\n") for m in methods], fontsize=size)
    ax.axhline(50, color="k", linestyle=":", linewidth=1, label="chance")
    ax.axhline(75, color="k", linestyle="--", linewidth=1, label="shape rule")
    ax.set_ylim(0, 100)
    ax.set_ylabel("exact match (%)", fontsize=size)
    ax.tick_params(axis="y", labelsize=size)
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=size * 0.85, loc="upper center", ncols=3, columnspacing=1.0, handlelength=1.5)
    ax.set_title("Selected on the training domains: every method reads the colour", fontsize=size)
    return save_figure(fig, path, data)


def real_size_data(root: Path) -> list[list[Any]]:
    """[[figure, quantity, measured ratio, "<=" or ">=", target], ...]: the rows with a target of
    the real-size page's "On this CPU" table; a row naming "time, memory" gives two ratios (the
    first two of its cell), any other row its first."""
    [table] = tables_with(_page(root, REAL_SIZE_PAGE), "target", str(REAL_SIZE_PAGE))
    data = []
    for row in table:
        where = f"{REAL_SIZE_PAGE}, {row['figure']}"
        targets = [t for t in row["target"].split(":", 1)[0].split(",") if not t.strip().startswith("none")]
        if not targets:
            continue
        figure = row["figure"].replace("`", "")
        quantities = ["time", "memory"] if figure.endswith("time, memory") else [""]
        if len(quantities) != len(targets):
            raise DataError(f"{where}: {len(targets)} targets for {len(quantities)} measured ratios")
        figure = figure.removesuffix(", time, memory").removesuffix(" time, memory")
        measured = numbers(row["measured"], where)
        for quantity, value, target in zip(quantities, measured, targets):
            op = re.match(r"\s*(<=|>=)", target)
            if op is None:
                raise DataError(f"{where}: target {target!r} is not '<= N' or '>= N'")
            data.append([figure, quantity, value, op.group(1), numbers(target, where)[0]])
    return data


def _met(row: Sequence[Any]) -> bool:
    """Whether a `real_size_data` row's ratio meets its target."""
    return bool(row[2] <= row[4]) if row[3] == "<=" else bool(row[2] >= row[4])


def real_size_picture(data: list[list[Any]], path: Path) -> Path:
    """Two panels: the costs relative to ERM (targets at most) and the speed-ups (targets at
    least); each measured ratio a dot, green where its target is met, its target a bar. A
    prefix that every label of a panel shares ("Dynamic BIRM / ERM, ") goes to its title."""
    size = readable_points(WIDTH_IN)
    panels = {"<=": ("cost ratio", "target: at most"), ">=": ("speed-up", "target: at least")}
    shown = {op: rows for op in panels if (rows := [r for r in data if r[3] == op])}
    fig = Figure(figsize=(WIDTH_IN, HEIGHT_IN), layout="constrained")
    axes = fig.subplots(len(shown), 1, squeeze=False, height_ratios=[len(rows) + 1.2 for rows in shown.values()])[:, 0]
    for ax, (op, rows) in zip(axes, shown.items()):
        labels = [f"{r[0]}{', ' + r[1] if r[1] else ''}" for r in rows]
        shared = _shared_prefix(labels)
        y = np.arange(len(rows))[::-1]
        ax.scatter([r[2] for r in rows], y, c=["#2a9d48" if _met(r) else "#c0392b" for r in rows], s=40, zorder=3)
        ax.scatter([r[4] for r in rows], y, marker="|", s=250, color="k", label="target")
        ax.set_yticks(y, [textwrap.fill(label[len(shared):], 40) for label in labels], fontsize=size * 0.85)
        ax.tick_params(axis="x", labelsize=size * 0.85)
        if op == "<=":
            ax.axvline(1.0, color="grey", linewidth=1, linestyle=":")
        name, target = panels[op]
        ax.set_title(f"{shared.rstrip(', ') or name} ({target})", fontsize=size * 0.85)
        ax.grid(axis="x", alpha=0.3)
        ax.margins(x=0.2, y=0.12)
    axes[0].legend(fontsize=size * 0.8, loc="lower right")
    n_met = sum(_met(r) for r in data)
    fig.suptitle(f"At SmolVLM-256M size on CPU: {'every' if n_met == len(data) else f'{n_met} of {len(data)}'} "
                 "target met", fontsize=size)
    return save_figure(fig, path, data)


def _shared_prefix(labels: Sequence[str]) -> str:
    """The longest start, ending in ", ", that all of `labels` share ("" when none)."""
    common = labels[0]
    for label in labels[1:]:
        while not label.startswith(common):
            common = common[:-1]
    return common[:common.rfind(", ") + 2] if ", " in common else ""


def _title(text: str, where: Path) -> str:
    match = re.search(r"^# (.+)$", text, re.M)
    if match is None:
        raise DataError(f"{where}: no '# title' line")
    return match.group(1).strip()


def headline_data(root: Path) -> list[dict[str, str]]:
    """[{page, title, image, sha256}]: each Results page the index links to, in its order, with
    its first picture (under docs/images) and that file's SHA-256; pages without one are left
    out (they are the index's own business: tests/test_docs_pictures.py)."""
    index = _page(root, RESULTS / "index.md")
    data = []
    for name in dict.fromkeys(re.findall(r"^- \[[^\]]+\]\(([\w-]+\.md)\)", index, re.M)):
        text = _page(root, RESULTS / name)
        first = re.search(r"!\[[^\]]*\]\(\.\./images/([^)\s]+\.png)\)", text)
        if first is None:
            continue
        image = IMAGES / first.group(1)
        if not (root / image).is_file():
            raise DataError(f"{RESULTS / name} shows {image}, which does not exist")
        data.append({"page": name, "title": _title(text, RESULTS / name), "image": image.as_posix(),
                     "sha256": hashlib.sha256((root / image).read_bytes()).hexdigest()})
    if not data:
        raise DataError(f"{RESULTS / 'index.md'}: it links to no Results page with a picture")
    return data


def headlines_picture(data: list[dict[str, str]], path: Path, *, root: Path = Path(".")) -> Path:
    """The pages' headline pictures in a grid of two columns, each under its page's title."""
    size = readable_points(WIDTH_IN)
    rows = (len(data) + 1) // 2
    fig, axes = new_figure(rows, 2, size=(WIDTH_IN, 2.6 * rows))
    for ax in np.ravel(axes):
        ax.set_axis_off()
    for ax, entry in zip(np.ravel(axes), data):
        ax.imshow(imread(root / entry["image"]))
        ax.set_title(textwrap.fill(entry["title"], 26), fontsize=size * 0.8)
    return save_figure(fig, path, data)


#: picture file under docs/images -> (what it plots, read from the pages; how it is drawn)
PICTURES: dict[str, tuple[Callable[[Path], Any], Callable[..., Path]]] = {
    "spurious-study.png": (spurious_data, spurious_picture),
    "real-size.png": (real_size_data, real_size_picture),
    "results-headlines.png": (headline_data, headlines_picture),  # last: it shows the others
}


def draw(name: str, root: Path) -> Path:
    """Draw picture `name` (`PICTURES`) from the pages under `root` into root/docs/images."""
    read, picture = PICTURES[name]
    path = root / IMAGES / name
    if picture is headlines_picture:
        return headlines_picture(read(root), path, root=root)
    return picture(read(root), path)


def main(argv: Sequence[str]) -> int:
    """Redraw the named pictures (all by default) from the pages; 2 with a one-line error."""
    parser = argparse.ArgumentParser(prog="python -m robustvlm.report.page_pictures",
                                     description=__doc__.strip().splitlines()[0])
    parser.add_argument("names", nargs="*", metavar="NAME",
                        help=f"the pictures to redraw (default: all): {', '.join(PICTURES)}")
    parser.add_argument("--root", type=Path, default=Path("."), help="the repository root (default: here)")
    args = parser.parse_args(argv)
    unknown = [name for name in args.names if name not in PICTURES]
    if unknown:
        parser.error(f"unknown picture(s) {', '.join(unknown)}; known: {', '.join(PICTURES)}")
    for name in args.names or PICTURES:
        try:
            print(f"drew {draw(name, args.root)}")
        except (RobustVLMError, OSError) as err:
            print(f"error: {name}: {err}", file=sys.stderr)
            return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
