"""`robustvlm demo`: built-in data -> fine-tune a tiny VLM with ERM, BIRM, Dynamic BIRM -> score ID vs OOD.

Every run resumes: re-running the demo reuses finished trainings and evaluations.
"""

from __future__ import annotations

import json
import time
from importlib import resources
from pathlib import Path

import yaml

from robustvlm.config import RunConfig, apply_overrides, deep_merge, validate_config
from robustvlm.data.from_config import load_from_config
from robustvlm.evaluation.runner import evaluate
from robustvlm.report.plots import plot_series
from robustvlm.report.tables import env_table, fmt, markdown_table
from robustvlm.training.trainer import train


def demo_runs(
    quick: bool = False, overrides: list[str] | None = None
) -> list[tuple[str, str, RunConfig]]:
    """(benchmark, method, config) for every run of the packaged demo (configs/demo.yaml)."""
    spec = yaml.safe_load(resources.files("robustvlm.configs").joinpath("demo.yaml").read_text())
    quick_spec = spec["quick"] if quick else {}
    runs = []
    for bench, bench_cfg in spec["benchmarks"].items():
        for method, hparams in spec["methods"].items():
            raw = deep_merge(deep_merge(spec["base"], bench_cfg), quick_spec.get(bench, {}))
            raw["method"] = method
            raw["method_args"] = deep_merge(hparams, quick_spec.get("methods", {}).get(method, {}))
            apply_overrides(raw, overrides or [])
            runs.append((bench, method, validate_config(raw, f"demo ({bench}, {method})")))
    return runs


def _log_rows(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / "train_log.jsonl").read_text().splitlines()]


def run_demo(
    out_dir: str | Path, *, quick: bool = False, overrides: list[str] | None = None
) -> dict:
    """Run every (benchmark, method) of the demo; write report.md, results.json and plots."""
    out_dir = Path(out_dir)
    t0 = time.perf_counter()
    results: dict[str, dict[str, dict]] = {}
    logs: dict[str, dict[str, list[dict]]] = {}
    for bench, method, cfg in demo_runs(quick, overrides):
        print(f"\n=== {bench}: {method} ===")
        run_dir = out_dir / bench / method
        result = train(cfg, run_dir / "train", resume=True)
        examples = load_from_config(cfg.data, run_dir / "train", verbose=False)
        metrics = evaluate(result.final_dir, examples, run_dir / "eval", cfg=cfg.eval, resume=True)
        results.setdefault(bench, {})[method] = {
            "steps": result.steps,
            "method_args": cfg.method_args,
            "metrics": metrics,
        }
        logs.setdefault(bench, {})[method] = _log_rows(run_dir / "train")
    seconds = time.perf_counter() - t0

    for bench, runs in logs.items():
        plot_series(
            {m: rows for m, rows in runs.items() if m != "erm"},
            ["lambda", "P", "R_emp"],
            out_dir / f"{bench}_penalty.png",
            f"{bench}: penalty weight and penalty over steps",
            log_keys=["lambda"],
        )
    summary = {"quick": quick, "seconds": round(seconds, 1), "results": results}
    (out_dir / "results.json").write_text(json.dumps(summary, indent=2), encoding="utf-8")
    report = render_report(results, seconds, quick)
    (out_dir / "report.md").write_text(report, encoding="utf-8")
    print("\n" + summary_table(results) + f"\n\nreport: {out_dir / 'report.md'}")
    return summary


def summary_table(results: dict[str, dict[str, dict]]) -> str:
    """One row per (benchmark, method): in-domain and out-of-domain chrF and exact match."""
    rows = []
    for bench, runs in results.items():
        for method, run in runs.items():
            m = run["metrics"]
            rows.append(
                [
                    bench,
                    method,
                    fmt(m["id"]["chrf"]),
                    fmt(m["ood"]["chrf"]),
                    fmt(m["id"]["exact"]),
                    fmt(m["ood"]["exact"]),
                ]
            )
    return markdown_table(
        ["benchmark", "method", "ID chrF", "OOD chrF", "ID exact", "OOD exact"], rows
    )


def render_report(results: dict[str, dict[str, dict]], seconds: float, quick: bool) -> str:
    """The demo's Markdown report: the summary table, per-environment tables, penalty plots."""
    parts = [
        "# robustvlm demo" + (" (quick)" if quick else ""),
        "",
        "A tiny offline Idefics3 (about 0.6M parameters, randomly initialised) fine-tuned with ERM, "
        "static BIRM and Dynamic BIRM on two built-in benchmarks; greedy decoding; chrF and exact match "
        "on the 0-1 scale, macro-averaged over environments. Out-of-domain environments are never "
        "trained on: `tasks` holds out OCR; `spurious` tests on reversed-colour and colour-free images. "
        "One seed: differences between methods here are within seed-to-seed variation unless repeated.",
        "",
        "Reading `spurious`: a model that answers from the background colour alone scores each "
        "environment's colour-agreement rate (about 0.9 and 0.8 in training, 0.1 reversed, 0.5 "
        "colour-free); the anti-colour rule scores the mirror image (0.1, 0.2, 0.9, 0.5). Only the "
        "shape rule does well on both test environments (up to 0.75, the label-noise ceiling). "
        "A high reversed-colour score with chance on colour-free images is the wrong reason.",
        "",
        summary_table(results),
        "",
    ]
    for bench, runs in results.items():
        parts += [f"## {bench}", "", f"![penalty]({bench}_penalty.png)", ""]
        for method, run in runs.items():
            parts += [
                f"### {method} ({run['steps']} steps, {run['method_args'] or 'no hyperparameters'})",
                "",
                env_table(run["metrics"], "chrf" if bench == "tasks" else "exact"),
                "",
            ]
    parts.append(f"Wall time: {seconds:.0f} s.")
    return "\n".join(parts) + "\n"
