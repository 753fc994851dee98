"""Write the results-file fixtures of tests/data/fixtures/results/ with the tools' own writer code.

Versions: lmms-eval 0.7.3 and clip_benchmark 1.6.2, from the package index, in a throwaway venv
that reuses robustvlm's torch (never a CUDA build):

    python -m venv --system-site-packages /tmp/fixvenv
    echo "$PWD/.venv/lib/python3.11/site-packages" > /tmp/fixvenv/lib/python3.11/site-packages/zz_robustvlm.pth
    /tmp/fixvenv/bin/pip install --no-deps lmms-eval==0.7.3 clip_benchmark==1.6.2
    /tmp/fixvenv/bin/pip install datasets evaluate loguru pytz sqlitedict tenacity zstandard numpy==2.2.6
    /tmp/fixvenv/bin/pip install --no-deps pycocoevalcap
    /tmp/fixvenv/bin/python tools/write_result_fixtures.py --out tests/data/fixtures/results

What runs is the tools' code; what is stood in for is named:

- **lmms-eval**: per document, `lmms_eval.evaluator._process_document_results` (the task's own
  `process_results`, the sample log) on a made-up prediction; per task, `TaskOutput`
  (`calculate_aggregate_metric` with the task's own aggregation, `calculate_clt_aggregate_metric`),
  `consolidate_results`, and `EvaluationTracker.save_results_aggregated` /
  `save_results_samples`, which write `OUT/MODEL/DATE_results.json` and
  `DATE_samples_TASK.jsonl`. Tasks: `mmstar` (its `mmstar_process_results` and
  `mmstar_aggregate_results`: `average` over l2 categories beside a metric per category; the
  per-sample score an object), `mmbench_en_dev_static` (`mmbench_process_results` and
  `mmbench_aggregate_dev_results_static`, which returns `overall_acc * 100`) and `ai2d` (its
  `ai2d_doc_to_target` and the `exact_match` metric, aggregated by `mean`). Stood in: the model
  (predictions drawn with a seed), the task object's loading of its Hugging Face dataset (a
  handful of documents written here), and `evaluate`'s assembly of the results dict, copied from
  lmms-eval 0.7.3's `evaluator.evaluate` (`results`, `group_subtasks`, `configs`, `versions`,
  `n-shot`, `higher_is_better`, `n-samples`) since `evaluate` itself needs a loaded model and
  dataset. Two models; the first re-runs `ai2d` on a second DATE (a re-run in the same folder).
- **clip_benchmark**: its command line, `clip_benchmark.cli.main` (`eval`: `run`, its output
  name template, `zeroshot_classification.evaluate` / `zeroshot_retrieval.evaluate`, its JSON
  dump; `build`: its CSV). Stood in: `load_clip` (a tiny model whose image features are noisy
  one-hot class vectors) and `build_dataset` (a few in-memory pictures), as both need downloads;
  `torchvision` and `open_clip`, which `clip_benchmark.cli` imports only for the datasets, the
  model loading and the captioning task stood in or unused here, are stub modules (torchvision's
  build on the index does not match robustvlm's CPU torch).

numpy 2.2: clip_benchmark 1.6.2's `accuracy` converts a one-element array with `float()`, which
numpy 2.4 refuses. Writes nothing but `--out`, which must not exist.
"""

from __future__ import annotations

import argparse
import importlib.abc
import importlib.machinery
import shutil
import sys
import types
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

import numpy as np

LMMS_EVAL_VERSION = "0.7.3"
CLIP_BENCHMARK_VERSION = "1.6.2"


class _Request:
    """What `_process_document_results` reads of an lmms-eval Instance."""

    def __init__(self, doc: dict, prediction: str) -> None:
        self.doc, self.args = doc, ("question", {"max_new_tokens": 16})
        self.resps = [prediction]
        self.filtered_resps = {"none": prediction}
        self.raw_filtered_resps: dict = {}
        self.token_counts: list = []


class _Task:
    """An lmms-eval task as `TaskOutput` and `_process_document_results` use it, with the real task's
    scoring functions (`process_results`, `doc_to_target`, aggregation)."""

    VERSION = "Yaml"

    def __init__(self, name: str, docs: list[dict], process_results: Callable, aggregation: dict,
                 doc_to_target: Callable, output_path: Path) -> None:
        self.name, self.eval_docs, self._aggregation = name, docs, aggregation
        self.process_results, self.doc_to_target = process_results, doc_to_target
        self.args = SimpleNamespace(output_path=str(output_path))

    def aggregation(self) -> dict:
        return self._aggregation

    def higher_is_better(self) -> dict:
        return dict.fromkeys(self._aggregation, True)

    def dump_config(self) -> dict:
        return {"task": self.name, "num_fewshot": 0, "metadata": {"version": 0.0}}


def _mmstar_docs() -> list[dict]:
    """23 MMStar-shaped documents, l2 categories of unequal size (so `average` is not the mean)."""
    cells = [("coarse perception", "image scene and topic")] * 10 + [("coarse perception", "image style & quality")] * 4 \
        + [("math", "numeric commonsense and calculation")] * 7 + [("math", "geometry")] * 2
    return [{"index": i, "question": f"q{i}", "answer": "ABCD"[i % 4], "category": c, "l2_category": l2,
             "image": None} for i, (c, l2) in enumerate(cells)]


def _mmbench_docs() -> list[dict]:
    return [{"index": i, "question": f"q{i}", "answer": "ABCD"[i % 4], "hint": "nan", "source": "s",
             "split": "dev", "category": "attribute_recognition" if i % 2 else "image_scene",
             "L2-category": "finegrained_perception" if i % 2 else "coarse_perception",
             "A": "cat", "B": "dog", "C": "cow", "D": "owl"} for i in range(20)]


def _ai2d_docs(n: int) -> list[dict]:
    return [{"question": f"q{i}", "options": ["cat", "dog", "cow", "owl"], "answer": str(i % 4)} for i in range(n)]


def _predict(target: str, rng: np.random.Generator, p_right: float) -> str:
    """A made-up model's answer: `target` with probability `p_right`, else another letter."""
    return target if rng.random() < p_right else "ABCD"[("ABCD".index(target) + 1) % 4]


def _lmms_eval_run(out: Path, model_args: str, date: str, tasks: dict[str, tuple], seed: int, p_right: float) -> None:
    """One lmms-eval run of `tasks` ({name: (docs, process_results, aggregation, doc_to_target)})
    written by lmms-eval's own scoring, aggregation and EvaluationTracker."""
    from lmms_eval.evaluator import _process_document_results
    from lmms_eval.evaluator_utils import TaskOutput, consolidate_results
    from lmms_eval.loggers.evaluation_tracker import EvaluationTracker

    rng = np.random.default_rng(seed)
    tracker = EvaluationTracker(output_path=str(out))
    tracker.general_config_tracker.log_experiment_args(model_source="llava_onevision", model_args=model_args,
                                                        system_instruction=None, chat_template=None,
                                                        fewshot_as_multiturn=False)
    outputs = []
    for name, (docs, process_results, aggregation, doc_to_target) in tasks.items():
        task = _Task(name, docs, process_results, aggregation, doc_to_target, out / "submissions")
        output = TaskOutput.from_taskdict(name, task)
        for doc_id, doc in enumerate(docs):
            target = doc["answer"] if "answer" in doc and doc["answer"] in "ABCD" else doc_to_target(doc)
            done = _process_document_results((doc_id, doc, [_Request(doc, _predict(target, rng, p_right))]),
                                             task=task, filter_key="none", reasoning_tags=None, log_samples=True)
            output.logged_samples.append(done.logged_sample)
            for metric, value in done.metrics.items():
                output.sample_metrics[(metric, "none")].append(value)
        output.calculate_aggregate_metric(bootstrap_iters=100000)
        output.calculate_clt_aggregate_metric()
        outputs.append(output)
    results, samples, configs, versions, num_fewshot, higher_is_better = consolidate_results(outputs)
    results_dict = {  # as lmms_eval.evaluator.evaluate (0.7.3) assembles it
        "results": dict(results.items()),
        "group_subtasks": {o.task_name: [] for o in reversed(outputs)},
        "configs": dict(sorted(configs.items())),
        "versions": dict(sorted(versions.items())),
        "n-shot": dict(sorted(num_fewshot.items())),
        "higher_is_better": dict(sorted(higher_is_better.items())),
        "n-samples": {o.task_name: {"original": len(o.task.eval_docs), "effective": len(o.task.eval_docs)}
                      for o in outputs},
        "config": {"model": "llava_onevision", "model_args": model_args, "batch_size": 1, "limit": None},
        "lmms_eval_version": LMMS_EVAL_VERSION,
        "date": date,
    }
    tracker.save_results_aggregated(results=results_dict, samples=samples, datetime_str=date)
    for name in tasks:
        tracker.save_results_samples(task_name=name, samples=samples[name])


def write_lmms_eval(out: Path) -> None:
    """OUT/<model>/DATE_results.json and DATE_samples_TASK.jsonl of two models, the first with a re-run."""
    from lmms_eval.api.metrics import exact_match_fn, mean
    from lmms_eval.tasks.ai2d.utils import ai2d_doc_to_target
    from lmms_eval.tasks.mmbench.en_utils import (
        mmbench_aggregate_dev_results_static,
        mmbench_process_results,
    )
    from lmms_eval.tasks.mmstar.utils import mmstar_aggregate_results, mmstar_process_results

    def ai2d_process_results(doc: dict, results: list[str]) -> dict:  # ConfigurableTask's exact_match path
        return {"exact_match": exact_match_fn(references=[ai2d_doc_to_target(doc, "mcq")],
                                              predictions=[results[0]])["exact_match"]}

    mmstar_docs = _mmstar_docs()
    mmstar_aggregation = {name: mmstar_aggregate_results for name in
                          [*dict.fromkeys(d["category"] for d in mmstar_docs), "average"]}

    def ai2d_target(doc: dict) -> str:
        return ai2d_doc_to_target(doc, "mcq")

    def tasks(n_ai2d: int) -> dict[str, tuple]:
        return {"ai2d": (_ai2d_docs(n_ai2d), ai2d_process_results, {"exact_match": mean}, ai2d_target),
                "mmstar": (mmstar_docs, mmstar_process_results, mmstar_aggregation, lambda d: d["answer"]),
                "mmbench_en_dev_static": (_mmbench_docs(), mmbench_process_results,
                                          {"gpt_eval_score": mmbench_aggregate_dev_results_static,
                                           "submission": lambda items: None}, lambda d: d["answer"])}

    small = "pretrained=lmms-lab/llava-onevision-qwen2-0.5b-ov"
    _lmms_eval_run(out, small, "20260101_120000", tasks(20), seed=1, p_right=0.6)
    _lmms_eval_run(out, small, "20260102_090000", {"ai2d": tasks(20)["ai2d"]}, seed=2, p_right=0.6)  # a re-run
    _lmms_eval_run(out, "pretrained=lmms-lab/llava-onevision-qwen2-7b-ov", "20260101_130000", tasks(20), seed=3,
                   p_right=0.8)
    shutil.rmtree(out / "submissions", ignore_errors=True)  # the mmbench aggregation's side files


class _StubFinder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Stub modules for `torchvision`, `open_clip` and their submodules (module doc): any attribute is a class."""

    def find_spec(self, name: str, path: object, target: object = None) -> importlib.machinery.ModuleSpec | None:
        if name.split(".", 1)[0] in ("torchvision", "open_clip"):
            return importlib.machinery.ModuleSpec(name, self, is_package=True)
        return None

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType:
        module = types.ModuleType(spec.name)
        module.__path__ = []
        module.__getattr__ = lambda attr: type(attr, (), {})  # type: ignore[method-assign]
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        return None


def write_clip_benchmark(out: Path) -> None:
    """clip_benchmark eval JSONs of two models on two classification sets and one retrieval set, and
    the `build` CSV of them, by clip_benchmark's command line."""
    import torch

    sys.meta_path.insert(0, _StubFinder())
    import clip_benchmark.cli as cli

    classes = ["cat", "dog", "cow", "owl", "fox"]

    def tokenizer(texts: list[str]) -> torch.Tensor:
        return torch.tensor([[next(i for i, c in enumerate(classes) if c in t)] for t in texts])

    class Model(torch.nn.Module):
        def __init__(self, noise: float) -> None:
            super().__init__()
            self.noise = noise

        def encode_text(self, tokens: torch.Tensor) -> torch.Tensor:
            return torch.nn.functional.one_hot(tokens[:, 0], len(classes)).float()

        def encode_image(self, images: torch.Tensor) -> torch.Tensor:
            return images

    class Pictures(torch.utils.data.Dataset):
        def __init__(self, n: int, noise: float, seed: int, retrieval: bool) -> None:
            g = torch.Generator().manual_seed(seed)
            self.labels = torch.arange(n) % len(classes)
            self.x = torch.nn.functional.one_hot(self.labels, len(classes)).float() + noise * torch.randn(
                n, len(classes), generator=g)
            self.retrieval, self.classes, self.templates = retrieval, classes, ["a photo of a {c}."]

        def __len__(self) -> int:
            return len(self.labels)

        def __getitem__(self, i: int) -> tuple[torch.Tensor, object]:  # a picture and its label or captions
            label = int(self.labels[i])
            return (self.x[i], [f"a {classes[label]} here"]) if self.retrieval else (self.x[i], label)

    noise = {"laion2b_s34b_b79k": 0.6, "openai": 0.9}
    current: dict[str, float] = {}

    def load_clip(model_type: str, model_name: str, pretrained: str, cache_dir: str,
                  device: str) -> tuple[Model, None, Callable]:
        current["noise"] = noise[pretrained]
        return Model(noise[pretrained]), None, tokenizer

    def build_dataset(dataset_name: str, task: str = "zeroshot_classification", **_: object) -> Pictures:
        size = {"cifar10": 40, "imagenet-r": 30, "flickr30k": 10}[dataset_name]
        return Pictures(size, current["noise"], seed=len(dataset_name), retrieval=task == "zeroshot_retrieval")

    cli.load_clip, cli.build_dataset = load_clip, build_dataset
    folder = out / "clip_benchmark"
    folder.mkdir(parents=True)
    argv = ["clip_benchmark", "eval", "--model", "ViT-B-32", "--pretrained", "laion2b_s34b_b79k", "openai",
            "--dataset", "cifar10", "imagenet-r", "flickr30k", "--batch_size", "8", "--num_workers", "0",
            "--output", str(folder / "{dataset}_{pretrained}_{model}_{language}_{task}.json")]
    sys.argv = argv
    cli.main()
    sys.argv = ["clip_benchmark", "build", str(folder), "--output", str(out / "clip_benchmark_build.csv")]
    cli.main()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--out", required=True, help="folder to create (must not exist)")
    out = Path(parser.parse_args().out)
    if out.exists():
        print(f"error: {out} exists; remove it to write the fixtures again", file=sys.stderr)
        return 2
    write_lmms_eval(out / "lmms_eval")
    write_clip_benchmark(out)
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
