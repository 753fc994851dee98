"""VLMEvalKit's deterministic answer matching, so that a prediction sheet without its `_result`
sheet is scored as VLMEvalKit's exact-matching judge scores it.

A port of `can_infer_option`, `can_infer_text` and `can_infer` (vlmeval/utils/matching_util.py)
and of the circular rule of `ImageMCQDataset.evaluate_heuristic` / `mcq_circular_eval`
(vlmeval/dataset/image_mcq.py, vlmeval/dataset/utils/multiple_choice.py) at VLMEvalKit commit
e8e78f05f3080fe28154f2130321f17951c3be94, with VLMEvalKit's default environment (VERBOSE unset).
tests/data/results/test_vlmevalkit_fixtures.py checks it against sheets VLMEvalKit scored itself.
Where `infer` finds no option VLMEvalKit asks its LLM judge, so the reader refuses the sheet.
"""

from __future__ import annotations

import re

_VERBOSE_ANSWER = re.compile(r"(?i)(?:correct\s+)?answer\s+is\s+\**([ABCD])\**")
_REJECTIONS = ("Sorry, I can't help with images of people yet.", "I can't process this file.",
               "I'm sorry, but without the image provided", "Cannot determine the answer")
#: words in a dataset's name that make VLMEvalKit score it circularly
CIRCULAR_WORDS = ("mmbench", "ccbench", "circular", "mmcr")
#: VLMEvalKit groups the rotations of a circular question by index % ROTATION_STRIDE
ROTATION_STRIDE = 1_000_000


def _option(answer: str, choices: dict[str, str]) -> str | None:
    """The option letter `answer` names by its letters (can_infer_option); "Z" for a refusal."""
    if "Failed to obtain answer via API" in answer:
        return None
    if any(refusal in answer for refusal in _REJECTIONS):
        return "Z"
    splits = [word.strip() for word in re.sub(r"[.()\[\],:;!*#{}]", " ", answer).split()]
    named = [c for c in choices if c in splits]
    if len(named) == 1:
        for letter in choices:
            if letter in splits and splits.index(letter) > len(splits) - 5:
                return letter
    elif not named and sum(c in splits for c in ("Z", "")) == 1:
        return "Z"
    match = _VERBOSE_ANSWER.search(answer)
    return match.group(1).upper() if match and match.group(1).upper() in choices else None


def _text(answer: str, choices: dict[str, str]) -> str | None:
    """The option whose text alone `answer` contains (can_infer_text)."""
    answer = answer.lower()
    if len(answer) > 2 * sum(len(text) for text in choices.values()):
        return None
    found = [letter for letter, text in choices.items() if text.lower() in answer]
    return found[0] if len(found) == 1 else None


def infer(answer: str, choices: dict[str, str]) -> str | None:
    """The option letter VLMEvalKit reads from the prediction `answer` (can_infer), given the
    options {letter: text} of the question; None where it would ask its judge."""
    return _option(answer, choices) or _text(answer, choices)


def is_circular(dataset: str) -> bool:
    """Whether VLMEvalKit scores `dataset` circularly (MMBench, CCBench, *circular*, MMCR)."""
    return any(word in dataset.lower() for word in CIRCULAR_WORDS)
