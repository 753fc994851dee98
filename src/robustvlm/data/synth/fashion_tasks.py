"""`fashion-tasks`: environments defined by task type, on pictures the model zoo's VLMs can read.

The `tasks` benchmark's layout (task types as environments, some held out) on Fashion-MNIST
test-split scans (held out of the zoo's pretraining), drawn as the `fashion` suite's `clean`
domain (64x64 RGB), asked in the question kinds the zoo's VLMs were instruction-tuned on
(`workflows.zoo.data`; a test pins that the wording is theirs):

    class/open       "<question> Answer with one of: t-shirt, ..., ankle boot."  -> class name
    group/word       "Is the item a top, footwear or other? Answer with one word." -> group
    yesno/class      "Is this a <class>? Answer yes or no."                       -> yes / no
    class/lettered   (OOD) the 10-way lettered question, classes in label order     -> "C. pullover"
    yesno/group      (OOD) "Is this a <group>? Answer yes or no." (top, footwear, other): the
                     yes/no template asked of a group, a question kind no model was tuned on

Each environment draws its own scans (seeded by environment) and, for yes/no, asks about the
shown class or group half of the time. A record's `class` and `group` fields carry the truth.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np

from robustvlm.data.real_images import FASHION_CLASSES, load_fashion_mnist
from robustvlm.data.synth.domains import FASHION_STYLES, scan_ink
from robustvlm.data.synth.real import FASHION_SOURCE
from robustvlm.data.synth.writer import (
    SplitSizes,
    SynthRecord,
    env_rng,
    write_instruction_benchmark,
)

SIZE = 64
SIZES = SplitSizes(train=200, val=20, test=100, ood_test=100)
QUESTION = "What type of object is in this photo?"
#: The zoo's groups of classes (`workflows.zoo.data.GROUPS`, pinned by a test).
GROUPS = {
    "top": ("t-shirt", "pullover", "coat", "shirt"),
    "footwear": ("sandal", "sneaker", "ankle boot"),
    "other": ("trouser", "dress", "bag"),
}
GROUP_OF = {c: g for g, members in GROUPS.items() for c in members}
Ask = Callable[[int, np.random.Generator], tuple[str, str]]


def _open(label: int, rng: np.random.Generator) -> tuple[str, str]:
    return f"{QUESTION} Answer with one of: {', '.join(FASHION_CLASSES)}.", FASHION_CLASSES[label]


def _group(label: int, rng: np.random.Generator) -> tuple[str, str]:
    return "Is the item a top, footwear or other? Answer with one word.", GROUP_OF[FASHION_CLASSES[label]]


def _yes_no(asked: str, truth: str, others: list[str], rng: np.random.Generator) -> tuple[str, str]:
    if rng.random() >= 0.5:
        asked = str(rng.choice([o for o in others if o != truth]))
    return f"Is this a {asked}? Answer yes or no.", "yes" if asked == truth else "no"


def _yes_no_class(label: int, rng: np.random.Generator) -> tuple[str, str]:
    name = FASHION_CLASSES[label]
    return _yes_no(name, name, list(FASHION_CLASSES), rng)


def _yes_no_group(label: int, rng: np.random.Generator) -> tuple[str, str]:
    group = GROUP_OF[FASHION_CLASSES[label]]
    return _yes_no(group, group, list(GROUPS), rng)


def _lettered(label: int, rng: np.random.Generator) -> tuple[str, str]:
    """The zoo's held-out question (`workflows.zoo.data.ten_way_question`) and its answer."""
    letters = "ABCDEFGHIJ"
    options = [f"{letters[i]}. {name}" for i, name in enumerate(FASHION_CLASSES)]
    text = "\n".join([QUESTION, *options, "Answer with the option's letter."])
    return text, options[label]


#: environment -> (held out, question kind)
TASKS: dict[str, tuple[bool, Ask]] = {
    "class/open": (False, _open),
    "group/word": (False, _group),
    "yesno/class": (False, _yes_no_class),
    "class/lettered": (True, _lettered),
    "yesno/group": (True, _yes_no_group),
}


def _records(seed: int, sizes: SplitSizes, images: np.ndarray, labels: np.ndarray) -> Iterator[SynthRecord]:
    used: set[int] = set()
    for env, (ood, ask) in TASKS.items():
        rng = env_rng(seed, f"fashion-tasks/{env}")
        for split, n in sizes.for_env(ood).items():
            for _ in range(n):
                index = int(rng.integers(len(labels)))
                while index in used:  # no scan in two records
                    index = int(rng.integers(len(labels)))
                used.add(index)
                label = int(labels[index])
                text, target = ask(label, rng)
                picture = FASHION_STYLES["clean"](scan_ink(images[index]), np.random.default_rng(0))
                yield SynthRecord(picture, text, target, env, split, ood, {
                    "class": FASHION_CLASSES[label], "group": GROUP_OF[FASHION_CLASSES[label]],
                    "source_index": index})


def build(out_dir: Path, seed: int, n_per_env: int | None) -> Path:
    """The `fashion-tasks` benchmark (`n_per_env` training records per in-domain environment,
    default 200; val, test and the held-out environments scale with it)."""
    images, labels = load_fashion_mnist("test")
    records = _records(seed, SIZES.scaled(n_per_env), images, labels)
    return write_instruction_benchmark(
        out_dir, "fashion-tasks", seed, records, image_size=SIZE, real_images=True,
        source=f"{FASHION_SOURCE}, test split only", held_out=[e for e, (ood, _) in TASKS.items() if ood],
    )
