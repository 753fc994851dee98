"""Rewards of preference pairs, with or without the image.

A *view* says what the model sees of a pair's image: `multimodal` (the image), `drop` (no image)
or `blank` (a white image of the same size). Each pair is one prompt with two responses, scored
with the prompt run once (`models.reward.candidate_rewards`, shared prefix by default).

The swap check scores each pair a second time with its responses in the other order, through the
same path: a reward model scores each response on its own, so the second scores must be the first
ones reversed; anything else is a bug in how pairs reach the model
(`analysis.reward.swap_check`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from PIL import Image
from tqdm.auto import tqdm

from robustvlm.data.images import load_image
from robustvlm.data.preference_collate import TEXT_MODES, blank_image
from robustvlm.data.preferences import PreferencePair
from robustvlm.errors import ConfigError
from robustvlm.models.reward import RewardModel, candidate_rewards

VIEWS = ("multimodal", *TEXT_MODES)
#: The row key of the swap check's scores: [r_rejected, r_chosen], scored in that order.
SWAPPED = "swapped"


def view_image(ref: str | bytes, view: str, *, source: str = "", record: str | None = None) -> Image.Image | None:
    """The image a model sees in `view` (None for drop)."""
    if view not in VIEWS:
        raise ConfigError(f"view must be one of {VIEWS}, not {view!r}")
    if view == "drop":
        return None
    loader = blank_image if view == "blank" else load_image
    return loader(ref, source=source, record=record)


def training_view(meta: dict[str, Any]) -> str:
    """The view a saved reward model was trained on (from its reward_model.json): a text-only
    model's text mode, else multimodal."""
    if meta.get("loss") == "text_only":
        return meta.get("loss_args", {}).get("text_mode", "drop")
    return "multimodal"


def score_pairs(
    model: RewardModel,
    processor: Any,
    pairs: Iterable[PreferencePair],
    *,
    views: Sequence[str] = ("multimodal",),
    shared_prefix: bool = True,
    progress: bool = False,
    total: int | None = None,
    swap_view: str | None = None,
) -> Iterator[dict[str, Any]]:
    """One row per pair: {id, env, <view>: [r_chosen, r_rejected] for each view}, `category`
    when the pair has one, and with `swap_view` also `swapped`: [r_rejected, r_chosen] scored in
    that order in that view (the swap check)."""
    for pair in tqdm(pairs, total=total, disable=not progress, desc="scoring pairs", unit="pair"):
        row: dict[str, Any] = {"id": pair.id, "env": pair.env}
        if pair.category is not None:
            row["category"] = pair.category
        for view in views:
            image = view_image(pair.image, view, source=pair.source, record=pair.id)
            row[view] = candidate_rewards(model, processor, pair.query, [pair.chosen, pair.rejected],
                                          image=image, shared_prefix=shared_prefix, record=pair.id)
            if view == swap_view:
                row[SWAPPED] = candidate_rewards(model, processor, pair.query, [pair.rejected, pair.chosen],
                                                 image=image, shared_prefix=shared_prefix, record=pair.id)
        yield row
