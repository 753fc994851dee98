"""Write the VLMEvalKit fixtures of the readers' tests with VLMEvalKit's own code (issue 51).

VLMEvalKit commit e8e78f05f3080fe28154f2130321f17951c3be94 (open-compass/VLMEvalKit, 2026-08-18),
its scoring run offline: `vlmeval.smp.dump` writes every sheet, `mcq_vanilla_eval` /
`mcq_circular_eval` score them with the exact-matching judge (`--judge exact_matching`: the
option-letter extraction `can_infer`, no LLM) and `report_acc` writes the `_acc.csv`, in the
steps of `ImageMCQDataset.evaluate_heuristic` (vlmeval/dataset/image_mcq.py). The predictions are
synthetic (drawn with a fixed seed; the model names start with `sim_` so that no one reads them
as those models' results); the scores and aggregates are VLMEvalKit's.

Run in a throwaway environment, never in the project's (no torch needed; the package __init__s,
which import models and API clients, are bypassed):

    python3 -m venv /tmp/vlmenv
    /tmp/vlmenv/bin/pip install pandas==3.1.1 numpy==2.4.6 openpyxl==3.1.5 xlsxwriter==3.3.1 pillow filelock
    git -C VLMEvalKit archive e8e78f05f3080fe28154f2130321f17951c3be94 vlmeval | tar -x -C /tmp/vlmk
    /tmp/vlmenv/bin/python tools/write_vlmevalkit_fixtures.py /tmp/vlmk

It writes tests/data/fixtures/vlmevalkit/ (vanilla/, circular/, free_text/, acc_only/, can_infer.json:
VLMEvalKit's reading of hard predictions) and the
six-model work folder docs/data/vlmevalkit_work/ (the results-files guide's example).
"""

from __future__ import annotations

import argparse
import importlib
import json
import shutil
import sys
import tempfile
import types
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
COMMIT = "e8e78f05f3080fe28154f2130321f17951c3be94"
OPTIONS = ("cat", "dog", "cow", "owl")
#: prediction styles a model writes: VLMEvalKit's can_infer reads every one of them
STYLES = ("{L}", "{L}.", "({L})", "Answer: {L}", "The answer is {L}.", "{L}. {T}", "{T}")
UNDECIDED = "I am not sure about this one."
MMSTAR_CATEGORIES = ("coarse perception", "fine-grained perception", "instance reasoning", "logical reasoning",
                     "math", "science & technology")
MMBENCH_CATEGORIES = ("attribute_recognition", "object_localization", "image_scene", "spatial_relationship",
                      "function_reasoning")
WORK_MODELS = {"sim_llava_v1.5_7b": 0.45, "sim_llava_v1.5_13b": 0.55, "sim_Qwen2-VL-2B-Instruct": 0.62,
               "sim_InternVL2_5-1B": 0.50, "sim_MiniCPM-V_2_6": 0.72, "sim_idefics2_8b": 0.66}


def load_vlmeval(source: Path) -> types.SimpleNamespace:
    """VLMEvalKit's dump/load and multiple-choice scoring from the snapshot at `source`, with its
    package __init__s bypassed and the three imports the scoring never calls stubbed."""
    stubs: dict[str, dict[str, object]] = {"validators": {"url": lambda _: False}, "sty": {"fg": None}, "huggingface_hub": {},
                                          "huggingface_hub.utils": {},
                                          "huggingface_hub.utils._cache_manager": {"_scan_cached_repo": None}}
    for name, attrs in stubs.items():
        module = types.ModuleType(name)
        module.__dict__.update(attrs)
        module.__path__ = []
        sys.modules[name] = module
    for name in ("vlmeval", "vlmeval.dataset", "vlmeval.dataset.utils"):
        package = types.ModuleType(name)
        package.__path__ = [str(source / name.replace(".", "/"))]
        sys.modules[name] = package
    mc = importlib.import_module("vlmeval.dataset.utils.multiple_choice")
    smp = importlib.import_module("vlmeval.smp")
    utils = importlib.import_module("vlmeval.utils")
    return types.SimpleNamespace(dump=smp.dump, load=smp.load, mc=mc, can_infer=utils.can_infer)


def prediction(rng: np.random.Generator, answer: str, options: dict[str, str], right: bool,
               undecided: float = 0.0) -> str:
    """A free-text prediction naming `answer`'s option when `right`, another option otherwise."""
    if undecided and rng.random() < undecided:
        return UNDECIDED
    letter = answer if right else str(rng.choice([k for k in options if k != answer]))
    return str(rng.choice(STYLES)).format(L=letter, T=options[letter])


def vanilla_frame(rng: np.random.Generator, n: int, skill: float, *, undecided: float = 0.0,
                  splits: tuple[str, ...] = ()) -> pd.DataFrame:
    """A vanilla MCQ prediction sheet (MMStar-like): n questions, 4 options, a category each."""
    import pandas as pd

    rows = []
    for i in range(n):
        order = rng.permutation(len(OPTIONS))
        options = {"ABCD"[k]: OPTIONS[j] for k, j in enumerate(order)}
        answer = "ABCD"[int(rng.integers(4))]
        row = {"index": i, "question": f"Which animal is in picture {i}?", **options, "answer": answer,
               "category": MMSTAR_CATEGORIES[i % len(MMSTAR_CATEGORIES)],
               "l2-category": "perception" if i % len(MMSTAR_CATEGORIES) < 2 else "reasoning",
               "prediction": prediction(rng, answer, options, rng.random() < skill, undecided)}
        if splits:
            row["split"] = splits[i % len(splits)]
        rows.append(row)
    return pd.DataFrame(rows)


def circular_frame(rng: np.random.Generator, n: int, skill: float) -> pd.DataFrame:
    """A circular MCQ prediction sheet as MMBench's: each question in 4 rotations of its options,
    indexed i, i + 1e6, i + 2e6, i + 3e6 (VLMEvalKit groups them by index % 1e6)."""
    import pandas as pd

    rows = []
    for i in range(n):
        base = {"ABCD"[k]: OPTIONS[j] for k, j in enumerate(rng.permutation(len(OPTIONS)))}
        right_text = base["ABCD"[int(rng.integers(4))]]
        for turn in range(4):
            letters = "ABCD"[turn:] + "ABCD"[:turn]
            options = {new: base[old] for new, old in zip("ABCD", letters)}
            answer = next(k for k, v in options.items() if v == right_text)
            rows.append({"index": i + turn * 1_000_000, "question": f"Which animal is in picture {i}?", **options,
                         "answer": answer, "category": MMBENCH_CATEGORIES[i % len(MMBENCH_CATEGORIES)],
                         "l2-category": "perception", "split": "dev",
                         "prediction": prediction(rng, answer, options, rng.random() < skill)})
    return pd.DataFrame(rows)


def score(vlm: types.SimpleNamespace, sheet: Path, dataset: str, *, write_result: bool = True) -> None:
    """`ImageMCQDataset.evaluate_heuristic` with `--judge exact_matching` on `sheet` (the dataset's
    meta: the sheet itself): writes `_exact_matching_result.xlsx` (when `write_result`) and `_acc.csv`."""
    import string

    circular = any(word in dataset.lower() for word in ("mmbench", "ccbench", "circular", "mmcr"))
    if circular:
        data = vlm.load(str(sheet))
        data["index"] = [int(x) for x in data["index"]]
        vlm.dump(data, str(sheet))
    data = vlm.load(str(sheet)).sort_values(by="index")
    data["prediction"] = [str(x) for x in data["prediction"]]
    for k in list(data.keys()):
        data[k.lower() if k not in list(string.ascii_uppercase) else k] = data.pop(k)
    meta = data.copy()
    with tempfile.TemporaryDirectory() as tmp:
        result_pkl = str(Path(tmp) / "result.pkl")
        scorer = vlm.mc.mcq_circular_eval if circular else vlm.mc.mcq_vanilla_eval
        data = scorer(None, data, meta, 1, result_pkl, dataset)
    record = sheet.with_name(f"{sheet.stem}_exact_matching_result.xlsx")
    vlm.dump(data, str(record))
    data = vlm.load(str(record))
    if not write_result:
        record.unlink()
    vlm.dump(vlm.mc.report_acc(data), str(sheet.with_name(f"{sheet.stem}_acc.csv")))


#: predictions whose option letters VLMEvalKit's can_infer reads (or not): can_infer.json
HARD_PREDICTIONS = ("B", "b", "B.", "(C)", "[D]", "Answer: B", "The answer is B.", "The correct answer is **C**.",
                    "answer is d", "A dog is shown, so the answer is B", "A or B", "I pick A and then B",
                    "dog", "Dog.", "a cat", "cat or dog", "It is an owl, clearly an owl and not a cow.",
                    "Cannot determine the answer", "Z", "Failed to obtain answer via API", "nan", "",
                    "B is wrong, C is right", "The options are A B C D and I say B", "Option B: dog",
                    "B) dog", "In the picture there is one animal and it is B", "cow" * 20)


def sheet_path(folder: Path, model: str, dataset: str) -> Path:
    """WORK_DIR/MODEL/MODEL_DATASET.xlsx (VLMEvalKit's run.py layout), its folder made."""
    (folder / model).mkdir(parents=True, exist_ok=True)
    return folder / model / f"{model}_{dataset}.xlsx"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("vlmevalkit", type=Path, help=f"VLMEvalKit's source tree at commit {COMMIT}")
    args = parser.parse_args()
    import numpy as np

    vlm = load_vlmeval(args.vlmevalkit.resolve())
    rng = np.random.default_rng(51)
    fixtures = ROOT / "tests/data/fixtures/vlmevalkit"
    work = ROOT / "docs/data/vlmevalkit_work"
    for folder in (fixtures, work):
        shutil.rmtree(folder, ignore_errors=True)
    model = "sim_llava_v1.5_7b"
    cases = {"vanilla": ("MMStar", vanilla_frame(rng, 40, 0.6, undecided=0.15)),
             "circular": ("MMBench_DEV_EN", circular_frame(rng, 50, 0.75)),
             "free_text": ("AI2D_TEST", vanilla_frame(rng, 50, 0.62)),
             "splits": ("ScienceQA_IMG", vanilla_frame(rng, 30, 0.7, splits=("val", "test")))}
    for case, (dataset, frame) in cases.items():
        sheet = sheet_path(fixtures / case, model, dataset)
        vlm.dump(frame, str(sheet))
        score(vlm, sheet, dataset, write_result=case != "splits")
    acc_only = fixtures / "acc_only" / model
    acc_only.mkdir(parents=True)
    for case in ("circular", "splits"):
        for acc in (fixtures / case / model).glob("*_acc.csv"):
            shutil.copy(acc, acc_only / acc.name)
    shutil.rmtree(fixtures / "splits")
    options = dict(zip("ABCD", OPTIONS))
    cases_json = [{"prediction": p, "choices": options, "can_infer": vlm.can_infer(p, dict(options)) or None}
                  for p in HARD_PREDICTIONS]
    (fixtures / "can_infer.json").write_text(json.dumps(cases_json, indent=1) + "\n", encoding="utf-8")
    for name, skill in WORK_MODELS.items():
        for dataset, frame in (("MMBench_DEV_EN", circular_frame(np.random.default_rng(1), 30, skill + 0.2)),
                               ("MMStar", vanilla_frame(np.random.default_rng(2), 60, skill))):
            frame["prediction"] = [prediction(rng, a, {k: r[k] for k in "ABCD"}, rng.random() < skill + (
                0.2 if dataset == "MMBench_DEV_EN" else 0.0)) for a, (_, r) in zip(frame["answer"], frame.iterrows())]
            sheet = sheet_path(work, name, dataset)
            vlm.dump(frame, str(sheet))
            score(vlm, sheet, dataset, write_result=False)
    print(f"wrote {fixtures.relative_to(ROOT)} and {work.relative_to(ROOT)} with VLMEvalKit {COMMIT[:10]}")


if __name__ == "__main__":
    main()
