"""`preferences-fashion`: the `preferences` shortcut structure on pictures the model zoo reads.

The zoo's members are pretrained on Fashion-MNIST's training split and never saw `preferences`'
shapes, so a reward model started from a zoo member gets pictures it can read here: each image
is a Fashion-MNIST **test-split** scan drawn as the zoo's clean domain (64x64 RGB, the scan at
48x48 on black, `domains.FASHION_STYLES["clean"]`), the query is the zoo's held-out question
("What type of object is in this photo?"), the chosen response names the scan's class in the
zoo's caption template ("This is a photo of a coat.") and the rejected one another class. Only
the image tells them apart. `ankle boot`, the one two-word class, is left out, so the two
responses have equal word counts and lengths differ only by the cue.

The environments and their cues are `preferences`' (`preferences.cue_envs`, every cue agreeing
with the preference 90% of the time: `clause`, `long`, `short`, `plain`), placed by the same
code, so the shortcut structure is the same; each record's `cue` says where the phrase went.

Output: OUT/data.jsonl (the `preference` layout plus `truth` {class, scan: its index in the
test split} and `cue`), OUT/images/,
OUT/manifest.json.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from robustvlm.data.real_images import FASHION_CLASSES, load_fashion_mnist
from robustvlm.data.synth.domains import FASHION_STYLES, scan_ink
from robustvlm.data.synth.preferences import (
    DEFAULT_TEST,
    DEFAULT_TRAIN,
    CueEnv,
    cue_envs,
    place_cue,
)
from robustvlm.data.synth.writer import env_rng, save_png, write_manifest
from robustvlm.errors import ConfigError

#: the zoo's held-out question (`multiple_choice.prompts.GENERATIVE_PROMPTS[0]`, a layer above)
QUERY = "What type of object is in this photo?"
#: the classes drawn: every one-word Fashion-MNIST class (label -> name)
CLASSES = {label: name for label, name in enumerate(FASHION_CLASSES) if " " not in name}
SOURCE = "Fashion-MNIST test split (Zalando, MIT licence; Debian's dataset-fashion-mnist)"


def fashion_statement(name: str) -> str:
    """'This is a photo of a coat.' (the zoo's caption template "a photo of a {c}.")."""
    return f"This is a photo of a {name}."


def _pairs(env: CueEnv, split: str, seed: int, scans: np.ndarray, labels: np.ndarray) -> list[tuple[int, dict]]:
    """(scan index, record fields) for each of `scans` in one environment and split, deterministic
    for the seed."""
    rng = env_rng(seed, f"fashion/{env.name}/{split}")
    rows = []
    for index in scans:
        label = int(labels[index])
        wrong = [name for other, name in CLASSES.items() if other != label]
        rejected = wrong[int(rng.integers(len(wrong)))]
        chosen, rejected_text, cue = place_cue(env, fashion_statement(CLASSES[label]),
                                               fashion_statement(rejected), rng)
        rows.append((int(index), {"query": QUERY, "chosen": chosen, "rejected": rejected_text, "env": env.name,
                                  "split": split, "truth": {"class": CLASSES[label], "scan": int(index)}, "cue": cue}))
    return rows


def build_fashion_preferences(out_dir: Path, seed: int, n_per_env: int | None) -> Path:
    """Write `preferences-fashion` to `out_dir`; returns the manifest path. `n_per_env` training
    pairs per environment (default 300) and a third as many test pairs (default 100, at least 20);
    every pair has its own scan (no scan is drawn twice in the benchmark)."""
    images, labels = load_fashion_mnist("test")
    n_train = DEFAULT_TRAIN if n_per_env is None else n_per_env
    n_test = DEFAULT_TEST if n_per_env is None else max(20, round(n_per_env / 3))
    envs = cue_envs(0.9)
    pool = np.flatnonzero(np.isin(labels, list(CLASSES)))
    pool = np.random.default_rng(seed).permutation(pool)
    if len(envs) * (n_train + n_test) > len(pool):
        raise ConfigError(f"preferences-fashion: n_per_env {n_train} needs more than the {len(pool)} test-split scans")
    (out_dir / "images").mkdir(parents=True, exist_ok=True)
    counts: dict[str, dict] = {}
    index, start = 0, 0
    style = FASHION_STYLES["clean"]
    with (out_dir / "data.jsonl").open("w", encoding="utf-8") as f:
        for env in envs:
            for split, count in (("train", n_train), ("test", n_test)):
                part = pool[start:start + count]  # disjoint scans per environment and split
                start += count
                for scan, fields in _pairs(env, split, seed, part, labels):
                    rid = f"{index:06d}"
                    save_png(style(scan_ink(images[scan]), np.random.default_rng(0)), out_dir / "images" / f"{rid}.png")
                    f.write(json.dumps({"id": rid, "image": f"images/{rid}.png", **fields}) + "\n")
                    counts.setdefault(env.name, {"train": 0, "val": 0, "test": 0, "ood": False})[split] += 1
                    index += 1
    return write_manifest(out_dir, {
        "benchmark": "preferences-fashion", "seed": seed, "envs": counts, "image_size": 64,
        "layout": "preference", "real_images": True, "source": SOURCE, "classes": list(CLASSES.values()),
        "cue_rates": {env.name: env.rates() for env in envs},
    })
