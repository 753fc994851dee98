"""Getting started's picture: what the five-minute tour's run shows, drawn from its outputs.

The tour trains a tiny offline Idefics3 with ERM (`robustvlm train erm_tasks --out runs/erm_tour
train.steps=200`) and scores it (`robustvlm eval ... --out runs/erm_tour/eval`): the picture shows
the training loss per step (train_log.jsonl) and chrF per task environment, in-domain beside the
held-out OCR ones (eval/metrics.json), and keeps those numbers in its PNG (`plots.save_figure`),
so a test can hold the page's stated figures to the picture.

    python -m robustvlm.report.tour_picture RUN_DIR EVAL_DIR OUT.png
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.figure import Figure

from robustvlm.errors import DataError, RobustVLMError
from robustvlm.report.plots import readable_points, save_figure
from robustvlm.runs import read_jsonl

#: its size (inches): body-sized text at the page's width; the finding, picture and caption fit a first screen
WIDTH_IN, HEIGHT_IN = 6.4, 4.0


def tour_data(run_dir: Path, eval_dir: Path) -> dict[str, Any]:
    """{"loss": [[step, loss], ...], "chrf": {env: [chrF 0-1, held out?]}, "id": mean, "ood": mean}
    of a `train` run folder and its `eval` folder; DataError naming the file when one is missing
    or lacks a field."""
    log, metrics_path = run_dir / "train_log.jsonl", eval_dir / "metrics.json"
    for path in (log, metrics_path):
        if not path.is_file():
            raise DataError(f"{path} not found: run the tour's `train` and `eval` first")
    loss = [[row["step"], row["loss"]] for row in read_jsonl(log) if "loss" in row and "step" in row]
    metrics = json.loads(metrics_path.read_text(encoding="utf-8"))
    try:
        chrf = {env: [info["chrf"], bool(info["ood"])] for env, info in metrics["per_env"].items()}
        means = {"id": metrics["id"]["chrf"], "ood": metrics["ood"]["chrf"]}
    except (KeyError, TypeError) as err:
        raise DataError(f"{metrics_path}: no chrF per environment and mean ({err})") from None
    if not loss:
        raise DataError(f"{log}: no row with a step and a loss")
    return {"loss": loss, "chrf": chrf, **means}


def tour_picture(data: dict[str, Any], path: Path) -> Path:
    """Two panels: the training loss per step (a 10-step running mean over the raw values), and
    chrF per environment, in-domain and held out in two colours, with both means as lines."""
    size = readable_points(WIDTH_IN)
    fig = Figure(figsize=(WIDTH_IN, HEIGHT_IN), layout="constrained")
    loss_ax, chrf_ax = fig.subplots(1, 2, width_ratios=[1, 1.25])
    steps, losses = np.asarray(data["loss"], dtype=float).T
    loss_ax.plot(steps, losses, color="#bbbbbb", linewidth=0.8, label="per step")
    window = min(10, len(losses))
    loss_ax.plot(steps[window - 1:], np.convolve(losses, np.ones(window) / window, mode="valid"),
                 color="#4C72B0", label=f"{window}-step mean")
    loss_ax.set_xlabel("training step", fontsize=size)
    loss_ax.set_ylabel("loss", fontsize=size)
    loss_ax.set_title(f"training loss, {int(steps[-1])} steps", fontsize=size)
    loss_ax.legend(fontsize=size * 0.8)
    envs = sorted(data["chrf"], key=lambda env: (data["chrf"][env][1], env))
    y = np.arange(len(envs))[::-1]
    held_out = [data["chrf"][env][1] for env in envs]
    chrf_ax.barh(y, [data["chrf"][env][0] for env in envs], color=["#DD8452" if h else "#4C72B0" for h in held_out])
    chrf_ax.axvline(data["id"], color="#4C72B0", linestyle="--", label=f"in-domain: {data['id']:.3f}")
    chrf_ax.axvline(data["ood"], color="#DD8452", linestyle="--", label=f"held out: {data['ood']:.3f}")
    chrf_ax.set_yticks(y, envs, fontsize=size * 0.8)
    chrf_ax.set_xlabel("chrF (0-1)", fontsize=size)
    chrf_ax.set_title("chrF per task environment", fontsize=size)
    chrf_ax.legend(fontsize=size * 0.8, loc="lower right")
    for ax in (loss_ax, chrf_ax):
        ax.tick_params(labelsize=size * 0.8)
        ax.grid(alpha=0.3)
    return save_figure(fig, path, data)


def main(argv: Sequence[str]) -> int:
    """Draw the tour's picture: RUN_DIR EVAL_DIR OUT.png; 2 with a one-line error."""
    if len(argv) != 3:
        print("usage: python -m robustvlm.report.tour_picture RUN_DIR EVAL_DIR OUT.png", file=sys.stderr)
        return 2
    try:
        print(f"drew {tour_picture(tour_data(Path(argv[0]), Path(argv[1])), Path(argv[2]))}")
    except (RobustVLMError, OSError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
