"""A raw record to `Example`s: a flat record gives one, a conversation one per human/gpt pair."""

from __future__ import annotations

import io
import re
from pathlib import Path
from typing import Any

from PIL import Image

from robustvlm.data.loaders.raw import RawRecord
from robustvlm.data.records import SPLITS, Example

#: Split names some datasets use for ours.
SPLIT_ALIASES = {"validation": "val", "valid": "val", "dev": "val"}


def examples_of(row: RawRecord) -> list[Example]:
    """The Examples of one flat or conversation record (environment not assigned yet)."""
    data = row.data
    if not isinstance(data, dict):
        raise row.error("record is not a JSON object")
    record_id = data.get("id")
    if record_id in (None, ""):
        raise row.error("missing field 'id'")
    if isinstance(record_id, bool) or not isinstance(record_id, (str, int)):
        raise row.error(f"field 'id' must be a string or an integer, not {type(record_id).__name__}")
    split = data.get("split") or "train"
    split = SPLIT_ALIASES.get(split, split)
    if split not in SPLITS:
        raise row.error(f"split {split!r} is not one of {', '.join(SPLITS)}")
    ood = data.get("ood", False)
    if not isinstance(ood, bool):
        raise row.error(f"field 'ood' must be true or false, not {ood!r}")
    shared: dict[str, Any] = {"image": image_ref(data.get("image"), row), "env": "", "split": split, "ood": ood,
              "source": row.location}
    if "conversations" in data:
        return [
            Example(id=f"{record_id}#{turn}", instruction=without_image_placeholder(question),
                    target=answer, **shared)
            for turn, (question, answer) in enumerate(_turn_pairs(data["conversations"], row))
        ]
    return [Example(id=str(record_id), instruction=_text(data, "instruction", row),
                    target=_text(data, "target", row), **shared)]


def _text(data: dict, key: str, row: RawRecord) -> str:
    value = data.get(key)
    if value is None:
        raise row.error(f"missing field {key!r}")
    if not isinstance(value, str):
        raise row.error(f"field {key!r} must be a string, not {type(value).__name__}")
    return value


def _turn_pairs(conversations: object, row: RawRecord) -> list[tuple[str, str]]:
    """(question, answer) pairs of a conversation alternating human and gpt turns."""
    turns = conversations if isinstance(conversations, list) else []
    roles = [turn.get("from") if isinstance(turn, dict) else None for turn in turns]
    if not turns or len(turns) % 2 or roles != ["human", "gpt"] * (len(turns) // 2):
        raise row.error("'conversations' must alternate 'human' and 'gpt' turns, starting with 'human'")
    values = [turn.get("value") for turn in turns]
    if not all(isinstance(value, str) for value in values):
        raise row.error("every conversation turn needs a string 'value'")
    return list(zip(values[::2], values[1::2]))


def without_image_placeholder(text: str) -> str:
    """The instruction with `<image>` placeholders and the whitespace around them removed."""
    return re.sub(r"\s*<image>\s*", " ", text).strip()


def image_ref(value: object, row: RawRecord) -> str | bytes | None:
    """An absolute path or encoded bytes from a path, bytes, HF image dict or PIL image."""
    if value is None:
        return None
    if value == "":
        raise row.error("field 'image' is an empty string: give an image path, or leave the field out "
                        "(or null) for a text-only record")
    if isinstance(value, bytes):
        return value
    if isinstance(value, str):
        if "\x00" in value:
            raise row.error(f"image path {value!r} holds a NUL byte, which no file name can")
        path = Path(value)
        if row.base_dir is None:  # hub rows: the datasets library's own cache paths
            return str(path)
        full = path if path.is_absolute() else (row.base_dir / path).absolute()
        if not row.allow_outside_root and not full.resolve().is_relative_to(row.base_dir.resolve()):
            raise row.error(
                f"image path {value!r} leaves the data root {row.base_dir} (paths in data files stay "
                "inside it, or inside --image-root); pass --allow-outside-root (data.allow_outside_root) "
                "to allow it"
            )
        return str(full)
    if isinstance(value, dict):
        return image_ref(value.get("bytes") or value.get("path"), row)
    if isinstance(value, Image.Image):
        buffer = io.BytesIO()
        value.save(buffer, format="PNG")
        return buffer.getvalue()
    raise row.error(f"field 'image' must be a path, bytes or an image, not {type(value).__name__}")
