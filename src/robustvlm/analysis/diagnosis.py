"""Which gap explains a domain's failure: visual features, semantics, or the feature-to-label mapping.

Pure functions on numbers and arrays. Three measurements per domain (accuracies in [0, 1]):

    probe_acc      linear probe on frozen vision-encoder features (do the features carry the class?)
    semantic_acc   text-only matching of class descriptions to class names (does the language side
                   know what the classes mean?)
    zero_shot_acc  image classification without demos; icl_acc with in-context demos (can the
                   model map what it sees to the right name?)

Each accuracy is turned into a chance-corrected skill, (acc - 1/C) / (1 - 1/C) for C classes
(0 = chance, 1 = perfect), and the verdict names the first stage of the pipeline whose skill
falls below its threshold: `visual`, then `semantic`, then `mapping`; `none` when all pass.
A stage measured as None (a served model has no vision tower to probe; a server that returns no
prompt log-probabilities cannot score the semantic question) has no skill and is never a gap.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from robustvlm.errors import DataError

VERDICTS = ("visual", "semantic", "mapping", "none")
OPTIONAL_STAGES = ("probe_acc", "semantic_acc")  # None: that stage was not measured


def skill(accuracy: float, n_classes: int) -> float:
    """Chance-corrected accuracy: 0 at 1/n_classes, 1 at 1.0 (negative below chance)."""
    if n_classes < 2:
        raise DataError(f"need at least 2 classes for a chance level, got {n_classes}")
    chance = 1.0 / n_classes
    return (accuracy - chance) / (1.0 - chance)


def diagnose_table(
    rows: Sequence[Mapping],
    *,
    visual_min_skill: float = 0.5,
    semantic_min_skill: float = 0.5,
    mapping_min_skill: float = 0.5,
) -> list[dict]:
    """Attach the dominant gap to each domain row.

    Args:
        rows: one mapping per domain with `domain`, `n_classes`, `probe_acc`, `semantic_acc`
            (None: not measured), `zero_shot_acc` and optionally `icl_acc` (None or missing:
            not measured).
        visual_min_skill: the probe's skill below this -> `visual` (features lack the class).
        semantic_min_skill: the text-only matching skill below this -> `semantic`.
        mapping_min_skill: the skill of the better of zero-shot and ICL accuracy below this ->
            `mapping` (features and semantics fine, the model cannot connect them).

    Returns:
        copies of the rows with `probe_skill`, `semantic_skill`, `mapping_skill`, `icl_gain`
        (icl_acc - zero_shot_acc, or None), skills None for stages not measured, `gaps` (every
        failing measured stage, pipeline order) and
        `verdict` (the first failing stage, or "none").
    """
    out = []
    for i, row in enumerate(rows):
        missing = [k for k in ("domain", "n_classes", "probe_acc", "semantic_acc", "zero_shot_acc")
                   if k not in row or (row[k] is None and k not in OPTIONAL_STAGES)]
        if missing:
            raise DataError(f"diagnosis row {i} ({row.get('domain')!r}) lacks {', '.join(missing)}")
        c = int(row["n_classes"])
        icl = row.get("icl_acc")
        task_acc = max(row["zero_shot_acc"], icl) if icl is not None else row["zero_shot_acc"]
        skills = {
            "visual": skill(row["probe_acc"], c) if row["probe_acc"] is not None else None,
            "semantic": skill(row["semantic_acc"], c) if row["semantic_acc"] is not None else None,
            "mapping": skill(task_acc, c),
        }
        limits = {"visual": visual_min_skill, "semantic": semantic_min_skill, "mapping": mapping_min_skill}
        gaps = [stage for stage in ("visual", "semantic", "mapping")
                if (stage_skill := skills[stage]) is not None and stage_skill < limits[stage]]
        out.append({
            **row,
            "probe_skill": skills["visual"],
            "semantic_skill": skills["semantic"],
            "mapping_skill": skills["mapping"],
            "icl_gain": icl - row["zero_shot_acc"] if icl is not None else None,
            "gaps": gaps,
            "verdict": gaps[0] if gaps else "none",
        })
    return out


def linear_probe_accuracy(
    features: np.ndarray, labels: Sequence[str], *, test_fraction: float = 0.5, seed: int = 0,
    max_iter: int = 2000,
) -> float:
    """Test accuracy of a logistic-regression probe on a stratified train/test split.

    Args:
        features: [N, D] float array (e.g. mean-pooled vision-encoder states of one domain).
        labels: N class names.
        test_fraction: share of each class held out for testing (at least one per class).
        seed: seed of the split.
        max_iter: solver iterations (lbfgs).

    Features are standardised with the training split's mean and spread. Every class needs at
    least two examples (one to train on, one to test).
    """
    from sklearn.linear_model import LogisticRegression
    from sklearn.model_selection import train_test_split
    from sklearn.preprocessing import StandardScaler

    x = np.asarray(features, dtype=float)
    y = np.asarray(labels)
    if x.ndim != 2 or len(x) != len(y):
        raise DataError(f"features must be [N, D] with N = len(labels); got {x.shape} and {len(y)} labels")
    classes, counts = np.unique(y, return_counts=True)
    if len(classes) < 2 or counts.min() < 2:
        raise DataError(
            f"linear probe needs >= 2 classes with >= 2 examples each; got counts "
            f"{dict(zip(classes.tolist(), counts.tolist()))}"
        )
    n_test = max(len(classes), int(round(test_fraction * len(y))))
    if len(y) - n_test < len(classes):
        n_test = len(y) - len(classes)
    x_train, x_test, y_train, y_test = train_test_split(
        x, y, test_size=n_test, stratify=y, random_state=seed
    )
    scaler = StandardScaler().fit(x_train)
    probe = LogisticRegression(max_iter=max_iter).fit(scaler.transform(x_train), y_train)
    return float(np.mean(probe.predict(scaler.transform(x_test)) == y_test))

