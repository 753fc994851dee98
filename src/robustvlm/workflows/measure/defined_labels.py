"""`robustvlm icl defined-labels`: defined-label in-context accuracy on an image-folder suite, with
demonstrations of the query's own domain and of every other domain, and with none (0-shot).

The trials (`workflows.zoo.defined_labels.draw_trials`) address pictures as (class, item), item i of
a class being the i-th file of the class folder in name order: in a suite whose item i is the same
scan in every domain (`data synth --benchmark fashion-test`), the trials shown with shifted
demonstrations differ from those with clean ones only in the demonstrations' style, so the cost
of shifted demonstrations is paired trial by trial (a suite whose domains hold different counts
per class is refused).

Writes in its output folder: config.resolved.yaml, defined_labels.jsonl (one line per (cell,
trial), appended as each cell finishes; with `resume` finished cells are kept) and
defined_labels.json / .md (per cell: accuracy with a Wilson 95% interval; the gain over 0-shot
and the cost of each shifted domain's demonstrations, paired; `report.icl_gain`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from robustvlm.data.images import load_image
from robustvlm.data.records import Example
from robustvlm.errors import DataError
from robustvlm.machine import with_machine
from robustvlm.model_ref import ModelRef
from robustvlm.models.loading import load_vlm
from robustvlm.report.icl_gain import defined_labels_markdown, defined_labels_summary
from robustvlm.runs import append_jsonl, claim_run_folder, read_jsonl
from robustvlm.workflows.measure.icl_eval import load_domains
from robustvlm.workflows.zoo.defined_labels import draw_trials, score_trials

RECORDS_FILE = "defined_labels.jsonl"
RESULTS_FILE = "defined_labels.json"
NO_DEMOS = "none"  # the cell name of the 0-shot trials


def suite_items(examples: Sequence[Example]) -> dict[str, list[list[Example]]]:
    """domain -> per class (sorted class names) the class's examples in file-name order; DataError
    when a domain lacks a class or holds another count of it than the first domain."""
    by: dict[str, dict[str, list[Example]]] = {}
    for ex in examples:
        by.setdefault(ex.env, {}).setdefault(ex.target, []).append(ex)
    classes = sorted({ex.target for ex in examples})
    first = sorted(by)[0]
    items = {}
    for domain in sorted(by):
        counts = [len(by[domain].get(c, [])) for c in classes]
        if counts != [len(by[first][c]) for c in classes]:
            raise DataError(f"domain {domain!r} holds {counts} pictures per class, domain {first!r} "
                            f"{[len(by[first][c]) for c in classes]}: the domains must pair item by item")
        items[domain] = [sorted(by[domain][c], key=lambda ex: Path(str(ex.image)).name) for c in classes]
    return items


def run_defined_labels(
    model_ref: ModelRef, data_root: str | Path, out_dir: str | Path, *, query_domain: str = "clean",
    demo_domains: Sequence[str] | None = None, ways: int = 2, shots: int = 1, trials: int = 200, seed: int = 0,
    resume: bool = False,
) -> dict[str, Any]:
    """Score the trials with no demonstrations and with demonstrations of each of `demo_domains`
    (default: every domain, the query's first), write the outputs (module doc), return the summary."""
    items = suite_items(load_domains(data_root))
    demos = list(demo_domains) if demo_domains else [query_domain, *sorted(set(items) - {query_domain})]
    unknown = [d for d in [query_domain, *demos] if d not in items]
    if unknown:
        raise DataError(f"no domain {unknown[0]!r} in the suite (domains: {', '.join(sorted(items))})", str(data_root))
    config = {"model": model_ref.name, "data": str(data_root), "query_domain": query_domain, "demo_domains": demos,
              "ways": ways, "shots": shots, "trials": trials, "seed": seed}
    out = claim_run_folder(out_dir, config, command="icl defined-labels", resume=resume)
    drawn = draw_trials([len(c) for c in items[query_domain]], trials, n_ways=ways, shots=shots, seed=seed)
    model, processor = load_vlm(model_ref)
    log_path = out / RECORDS_FILE
    earlier = read_jsonl(log_path) if resume else []
    records = [r for r in earlier if _complete(earlier, r["demos"], trials)]

    def picture(domain: str) -> Any:
        return lambda c, i: load_image(items[domain][c][i].image)

    with log_path.open("w", encoding="utf-8") as log:
        append_jsonl(log, records)
        for cell in [NO_DEMOS, *demos]:
            if any(r["demos"] == cell for r in records):
                continue
            new = score_trials(model, processor, drawn, picture(query_domain if cell == NO_DEMOS else cell),
                               picture(query_domain), with_demos=cell != NO_DEMOS)
            new = [{**r, "demos": cell, "id": str(r["trial"])} for r in new]
            append_jsonl(log, new)
            records += new
    summary = {"config": config, **defined_labels_summary(records, query_domain, ways)}
    (out / RESULTS_FILE).write_text(json.dumps(with_machine(summary), indent=2), encoding="utf-8")
    (out / "defined_labels.md").write_text(defined_labels_markdown(summary), encoding="utf-8")
    return summary


def _complete(records: Sequence[Mapping], cell: str, trials: int) -> bool:
    """Whether `records` hold every trial of `cell` (a cell cut short by a kill is redone)."""
    return sum(r["demos"] == cell for r in records) == trials
