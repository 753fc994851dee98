"""The column layouts of public preference datasets, and their conversion to preference pairs.

Each layout turns one raw record (a dict, from JSONL / JSON / parquet / a saved or hub dataset)
into zero or more pairs: `{id, image, query, chosen, rejected}` plus, where the record says,
`margin`, `split` and `env`. Records a layout cannot use raise a DataError naming the record
(a number that is NaN or infinite, as a margin, a rating or a rank, is such a record);
pairs a layout leaves out on purpose (tied ratings, unrated responses) are returned as counted
reasons, never dropped silently.

| layout           | columns it is recognised by                       | dataset                      |
|------------------|---------------------------------------------------|------------------------------|
| `preference`     | `query, chosen, rejected` (+ `id, image, env, margin, split`) | robustvlm's own record |
| `rlaif-v`        | `question, chosen, rejected, image`               | openbmb/RLAIF-V-Dataset      |
| `povid`          | `conversations` + `chosen, rejected` or `rejected_conversations` | POVID (COCO images under an image root) |
| `rlhf-v`         | `text` (a JSON string: question, chosen, rejected) | openbmb/RLHF-V-Dataset      |
| `vlfeedback`     | `prompt, completions, img_path`                   | MMInstruction/VLFeedback     |
| `vl-rewardbench` | `query, response, human_ranking`                  | MMInstruction/VL-RewardBench (test set) |
| `mm-rewardbench` | `Text, Output1, Output2, Better`                  | Multimodal RewardBench (test set) |
| `mmrb2`          | `prompt_content, response_a, response_b, chosen`  | Multimodal RewardBench 2 (`<task>.json`'s `pairs`) |
| `rmhackbench`    | `query, responses, answer`                        | RMHackBench (each subset's test split) |

`detect_layout` picks the first layout, in the table's order, whose columns a record has.

The two reward benchmarks give each pair the *category* their authors report accuracy by:
VL-RewardBench's `query_source` grouped as its paper does (WildVision: general; POVID, RLAIF-V,
RLHF-V: hallucination; MMMU-Pro, MathVerse: reasoning; any other source under its own name), and
Multimodal RewardBench's `Category`, with safety split into bias / toxicity and reasoning into
math / coding by the record's `ID` prefix, as its accuracy script does. robustvlm's own records
may carry a `category` field too.

Multimodal RewardBench 2 (facebookresearch/MMRB2, `benchmark/build_from_hf.py`) writes one
`<task>.json` per task (t2i, edit, interleaved, reasoning) holding `{"pairs": [...]}`; a pair's
prompt and responses are lists of `["text", str]` / `["image", path]` parts (paths relative to
the file's folder) and `chosen` is "A" or "B", the human preference its accuracy script compares
with. robustvlm's reward models score a text response to one image, so a pair whose prompt holds
no image or several, or whose responses hold images (text-to-image, editing, interleaved
generation), is left out and counted; a pair without a preference ("") too. Its category is the
task, from the file's name.

RMHackBench (hub dataset `sdfss1/RMHackBench`, one config per hacking mechanism) has `id, query,
image, responses, answer, source`. Its card does not define `answer`; its fields mirror
VL-RewardBench's, so `answer` is read as VL-RewardBench's `human_ranking` (a rank per response, 0 =
preferred; tied ranks left out and counted), and a one-element `answer` as the index of the
preferred response. The category is the record's `subset` (the hub config, tagged when loaded as
`hf:sdfss1/RMHackBench:CONFIG`), else its `source`.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from itertools import combinations
from pathlib import Path
from typing import Any, cast

from robustvlm.data.loaders import RawRecord, without_image_placeholder
from robustvlm.errors import ConfigError

VLFEEDBACK_ASPECTS = ("Helpfulness", "Visual Faithfulness", "Ethical Considerations")
MEAN_ASPECT = "mean"


@dataclass
class Converted:
    """What one raw record became: pair fields (dicts) and reasons for pairs left out."""

    pairs: list[dict[str, Any]] = field(default_factory=list)
    left_out: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Layout:
    """A dataset layout: the columns it is recognised by, its records' default split, and its
    converter (record, where it came from, VLFeedback aspect) -> Converted."""

    name: str
    columns: frozenset[str]
    default_split: str
    convert: Callable[[dict, RawRecord, str], Converted]


def _text(data: Mapping, key: str, row: RawRecord, rid: str) -> str:
    value = data.get(key)
    if not isinstance(value, str):
        what = "missing" if value is None else f"not a string ({type(value).__name__})"
        raise row.error(f"field {key!r} is {what}", rid)
    return value


def _record_id(data: Mapping, row: RawRecord, *keys: str) -> str:
    """The first non-empty of `keys`, else the record's place in its file."""
    for key in keys:
        value = data.get(key)
        if value not in (None, ""):
            return str(value)
    return f"line-{row.ref}" if isinstance(row.ref, int) else str(row.ref)


def _pair(record_id: str, image: Any, query: str, chosen: str, rejected: str, **extra: Any) -> dict:
    return {"id": record_id, "image": image, "query": query, "chosen": chosen, "rejected": rejected,
            **{k: v for k, v in extra.items() if v is not None}}


def _category(value: object, row: RawRecord, rid: str) -> str | None:
    """A record's category: None when absent, else a non-empty string."""
    if value in (None, ""):
        return None
    if not isinstance(value, str):
        raise row.error(f"field 'category' must be a string, not {value!r}", rid)
    return value


def _finite(value: float, what: str, row: RawRecord, rid: str) -> float:
    """`value` as a float; a DataError naming `what` when it is NaN or infinite."""
    if not math.isfinite(value):
        raise row.error(f"{what} must be a finite number, not {value!r}", rid)
    return float(value)


def _native(data: dict, row: RawRecord, aspect: str) -> Converted:
    rid = _record_id(data, row, "id")
    margin = data.get("margin")
    if margin is not None and (isinstance(margin, bool) or not isinstance(margin, int | float)):
        raise row.error(f"field 'margin' must be a number, not {margin!r}", rid)
    if margin is not None:
        _finite(margin, "field 'margin'", row, rid)
    return Converted([_pair(
        rid, data.get("image"), _text(data, "query", row, rid),
        _text(data, "chosen", row, rid), _text(data, "rejected", row, rid),
        margin=None if margin is None else float(margin), env=data.get("env"), split=data.get("split"),
        category=_category(data.get("category"), row, rid),
    )])


def _rlaif_v(data: dict, row: RawRecord, aspect: str) -> Converted:
    rid = _record_id(data, row, "id", "idx")
    return Converted([_pair(
        rid, data.get("image") or data.get("image_path"),
        _text(data, "question", row, rid), _text(data, "chosen", row, rid), _text(data, "rejected", row, rid),
        split=data.get("split"),
    )])


def _rlhf_v(data: dict, row: RawRecord, aspect: str) -> Converted:
    rid = _record_id(data, row, "id", "idx")
    try:
        inner = json.loads(_text(data, "text", row, rid))
    except json.JSONDecodeError as exc:
        raise row.error(f"field 'text' is not valid JSON ({exc.msg})", rid) from None
    if not isinstance(inner, dict):
        raise row.error("field 'text' must hold a JSON object with question, chosen, rejected", rid)
    return Converted([_pair(
        rid, data.get("image") or data.get("image_path"),
        _text(inner, "question", row, rid), _text(inner, "chosen", row, rid), _text(inner, "rejected", row, rid),
        split=data.get("split"),
    )])


def _gpt_reply(turns: object, key: str, row: RawRecord, rid: str) -> str:
    """The first assistant ("gpt") turn of a LLaVA conversation."""
    for turn in turns if isinstance(turns, list) else []:
        if isinstance(turn, dict) and turn.get("from") == "gpt" and isinstance(turn.get("value"), str):
            return turn["value"]
    raise row.error(f"field {key!r} has no 'gpt' turn", rid)


def _povid(data: dict, row: RawRecord, aspect: str) -> Converted:
    rid = _record_id(data, row, "id")
    turns = data.get("conversations")
    human = [t for t in turns if isinstance(t, dict) and t.get("from") == "human"] if isinstance(turns, list) else []
    if not human or not isinstance(human[0].get("value"), str):
        raise row.error("field 'conversations' has no 'human' turn", rid)
    chosen = data["chosen"] if isinstance(data.get("chosen"), str) else _gpt_reply(turns, "conversations", row, rid)
    rejected = (data["rejected"] if isinstance(data.get("rejected"), str)
                else _gpt_reply(data.get("rejected_conversations"), "rejected_conversations", row, rid))
    return Converted([_pair(
        rid, data.get("image"), without_image_placeholder(human[0]["value"]),
        chosen, rejected, split=data.get("split"),
    )])


def _rating(annotations: object, aspect: str, where: str) -> float | None:
    """A VLFeedback response's score: the aspect's Rating, or the mean of its readable ratings.
    A rating that reads as NaN or infinite is no rating to rank by: ValueError naming it
    (`where` with the aspect's name in its `{}`)."""
    if not isinstance(annotations, dict):
        return None
    names = VLFEEDBACK_ASPECTS if aspect == MEAN_ASPECT else (aspect,)
    values = []
    for name in names:
        entry = annotations.get(name)
        try:
            value = float(cast(Any, entry.get("Rating"))) if isinstance(entry, dict) else None
        except (TypeError, ValueError):  # "N/A" and the like
            value = None
        if value is not None and not math.isfinite(value):
            raise ValueError(f"{where.format(name)} must be a finite number, not {value!r}")
        values.append(value)
    readable = [v for v in values if v is not None]
    if aspect != MEAN_ASPECT:
        return readable[0] if readable else None
    return sum(readable) / len(readable) if readable else None


def _completions(value: object, row: RawRecord, rid: str) -> list[dict]:
    """VLFeedback's completions as a list of {annotations, model, response}, from a list of dicts
    (its JSONL) or a dict of lists (how `datasets` stores a sequence of structs)."""
    if isinstance(value, dict):
        keys = list(value)
        lengths = {len(v) for v in value.values() if isinstance(v, list)}
        if len(lengths) != 1 or not all(isinstance(v, list) for v in value.values()):
            raise row.error("field 'completions' must be a list of responses", rid)
        return [dict(zip(keys, items)) for items in zip(*value.values())]
    if isinstance(value, list) and all(isinstance(c, dict) for c in value):
        return value
    raise row.error("field 'completions' must be a list of responses", rid)


def _vlfeedback(data: dict, row: RawRecord, aspect: str) -> Converted:
    record_id = _record_id(data, row, "id")
    query = _text(data, "prompt", row, record_id)
    scored, out = [], Converted()
    for i, c in enumerate(_completions(data.get("completions"), row, record_id)):
        try:
            score = _rating(c.get("annotations"), aspect, f"completion {i}: {{}} Rating")
        except ValueError as err:
            raise row.error(str(err), record_id) from None
        response = c.get("response")
        if score is None or not isinstance(response, str):
            out.left_out.append(f"vlfeedback: response without a readable {aspect} rating")
            continue
        scored.append((score, response))
    for k, ((s1, r1), (s2, r2)) in enumerate(combinations(scored, 2)):
        if s1 == s2:
            out.left_out.append(f"vlfeedback: tied {aspect} rating")
            continue
        (_, chosen), (_, rejected) = sorted([(s1, r1), (s2, r2)], reverse=True)
        out.pairs.append(_pair(f"{record_id}#{k}", data.get("img_path"), query, chosen, rejected,
                               split=data.get("split")))
    return out


#: VL-RewardBench's sources ({lower-case name fragment: category}), grouped as its paper reports.
VL_REWARDBENCH_CATEGORIES = {
    "wildvision": "general", "povid": "hallucination", "rlaif": "hallucination",
    "rlhf": "hallucination", "mmmu": "reasoning", "mathverse": "reasoning",
}


def vl_rewardbench_category(source: object) -> str | None:
    """The category of a VL-RewardBench `query_source` (None when the record names none)."""
    if not isinstance(source, str) or not source.strip():
        return None
    key = source.strip().lower()
    return next((cat for frag, cat in VL_REWARDBENCH_CATEGORIES.items() if frag in key), key)


def mm_rewardbench_category(category: object, record_id: str) -> str | None:
    """The category Multimodal RewardBench reports a triplet under: its `Category`, with safety
    split into bias (ids starting "pairs") / toxicity and reasoning into math (ids starting
    "math") / coding, as the benchmark's accuracy script does."""
    if not isinstance(category, str) or not category.strip():
        return None
    lowered = record_id.lower()
    if category == "safety":
        return "safety/bias" if lowered.startswith("pairs") else "safety/toxicity"
    if category == "reasoning":
        return "reasoning/math" if lowered.startswith("math") else "reasoning/coding"
    return category


def _vl_rewardbench(data: dict, row: RawRecord, aspect: str) -> Converted:
    rid = _record_id(data, row, "id")
    responses, ranking = data.get("response"), data.get("human_ranking")
    if not (isinstance(responses, list) and len(responses) == 2 and all(isinstance(r, str) for r in responses)):
        raise row.error("field 'response' must be a list of two strings", rid)
    if not (isinstance(ranking, list) and len(ranking) == 2 and all(isinstance(r, int | float) for r in ranking)):
        raise row.error("field 'human_ranking' must be a list of two ranks (0 = preferred)", rid)
    for rank in ranking:
        _finite(rank, "field 'human_ranking'", row, rid)
    if ranking[0] == ranking[1]:
        return Converted(left_out=["vl-rewardbench: tied human ranking"])
    best = 0 if ranking[0] < ranking[1] else 1
    return Converted([_pair(
        rid, data.get("image"), _text(data, "query", row, rid),
        responses[best], responses[1 - best], split=data.get("split"),
        category=vl_rewardbench_category(data.get("query_source")),
    )])


def _mm_rewardbench(data: dict, row: RawRecord, aspect: str) -> Converted:
    rid = _record_id(data, row, "ID", "id")
    better = data.get("Better")
    if better not in ("Output1", "Output2"):
        raise row.error(f"field 'Better' must be 'Output1' or 'Output2', not {better!r}", rid)
    worse = "Output2" if better == "Output1" else "Output1"
    return Converted([_pair(
        rid, data.get("Image"), _text(data, "Text", row, rid),
        _text(data, better, row, rid), _text(data, worse, row, rid), split=data.get("split"),
        category=mm_rewardbench_category(data.get("Category"), rid),
    )])


MMRB2_TASKS = ("t2i", "edit", "interleaved", "reasoning")


def _mmrb2_parts(value: object, key: str, row: RawRecord, rid: str) -> tuple[list[str], list[str]]:
    """(texts, image paths) of an MMRB2 content list of ["text" | "image", str] parts."""
    if not isinstance(value, list):
        raise row.error(f"field {key!r} must be a list of [\"text\" | \"image\", content] parts", rid)
    texts: list[str] = []
    images: list[str] = []
    for part in value:
        if not (isinstance(part, list | tuple) and len(part) == 2 and part[0] in ("text", "image")
                and isinstance(part[1], str)):
            raise row.error(f"field {key!r} has a part that is not [\"text\" | \"image\", string]: {part!r}"[:200], rid)
        (texts if part[0] == "text" else images).append(part[1])
    return texts, images


def _mmrb2_response(data: dict, key: str, row: RawRecord, rid: str) -> tuple[str, int]:
    """(the response's text, its number of images)."""
    response = data.get(key)
    if not isinstance(response, dict):
        raise row.error(f"field {key!r} must be an object with 'response_content'", rid)
    texts, images = _mmrb2_parts(response.get("response_content"), f"{key}.response_content", row, rid)
    return "\n\n".join(texts), len(images)


def _mmrb2(data: dict, row: RawRecord, aspect: str) -> Converted:
    rid = _record_id(data, row, "id", "pair_id")
    chosen = data.get("chosen")
    if chosen == "":
        return Converted(left_out=["mmrb2: pair without a human preference"])
    if not isinstance(chosen, str) or chosen.upper() not in ("A", "B"):
        raise row.error(f"field 'chosen' must be 'A' or 'B', not {chosen!r}", rid)
    texts, images = _mmrb2_parts(data.get("prompt_content"), "prompt_content", row, rid)
    (text_a, images_a), (text_b, images_b) = (_mmrb2_response(data, k, row, rid) for k in ("response_a", "response_b"))
    if images_a or images_b:
        return Converted(left_out=["mmrb2: responses hold images (robustvlm's reward models score text)"])
    if len(images) != 1:
        return Converted(left_out=[f"mmrb2: prompt with {len(images) or 'no'} image(s) (robustvlm scores one per pair)"])
    best, other = (text_a, text_b) if chosen.upper() == "A" else (text_b, text_a)
    stem = Path(row.file).stem
    return Converted([_pair(rid, images[0], "\n\n".join(texts), best, other, split=data.get("split"),
                            category=stem if stem in MMRB2_TASKS else _category(data.get("prompt_source"), row, rid))])


def _rmhackbench(data: dict, row: RawRecord, aspect: str) -> Converted:
    rid = _record_id(data, row, "id")
    responses, answer = data.get("responses"), data.get("answer")
    if not (isinstance(responses, list) and len(responses) == 2 and all(isinstance(r, str) for r in responses)):
        raise row.error("field 'responses' must be a list of two strings", rid)
    if not (isinstance(answer, list) and len(answer) in (1, 2)
            and all(isinstance(a, int) and not isinstance(a, bool) for a in answer)):
        raise row.error(f"field 'answer' must be a list of two ranks (0 = preferred) or one index, not {answer!r}"[:200],
                        rid)
    if len(answer) == 1:
        if answer[0] not in (0, 1):
            raise row.error(f"field 'answer' names response {answer[0]}, but there are 2", rid)
        best = answer[0]
    elif answer[0] == answer[1]:
        return Converted(left_out=["rmhackbench: tied ranks"])
    else:
        best = 0 if answer[0] < answer[1] else 1
    category = data.get("subset") or data.get("source")
    return Converted([_pair(rid, data.get("image"), _text(data, "query", row, rid), responses[best],
                            responses[1 - best], split=data.get("split"), category=_category(category, row, rid))])


LAYOUTS: dict[str, Layout] = {
    layout.name: layout
    for layout in (
        Layout("preference", frozenset({"query", "chosen", "rejected"}), "train", _native),
        Layout("rlaif-v", frozenset({"question", "chosen", "rejected"}), "train", _rlaif_v),
        Layout("povid", frozenset({"conversations"}), "train", _povid),
        Layout("rlhf-v", frozenset({"text"}), "train", _rlhf_v),
        Layout("vlfeedback", frozenset({"prompt", "completions"}), "train", _vlfeedback),
        Layout("vl-rewardbench", frozenset({"query", "response", "human_ranking"}), "test", _vl_rewardbench),
        Layout("mm-rewardbench", frozenset({"Text", "Output1", "Output2", "Better"}), "test", _mm_rewardbench),
        Layout("mmrb2", frozenset({"prompt_content", "response_a", "response_b", "chosen"}), "test", _mmrb2),
        Layout("rmhackbench", frozenset({"query", "responses", "answer"}), "test", _rmhackbench),
    )
}
PREFERENCE_FORMATS = ("auto", *LAYOUTS)


def detect_layout(columns: set[str]) -> Layout | None:
    """The first layout (in `LAYOUTS` order) whose columns are all among `columns`."""
    return next((lay for lay in LAYOUTS.values() if lay.columns <= columns), None)


def layout_named(name: str, aspect: str = MEAN_ASPECT) -> Layout | None:
    """The layout `name` (None for "auto"); ConfigError for an unknown name or aspect."""
    if name not in PREFERENCE_FORMATS:
        raise ConfigError(f"unknown preference format {name!r}; expected one of {', '.join(PREFERENCE_FORMATS)}")
    if aspect != MEAN_ASPECT and aspect not in VLFEEDBACK_ASPECTS:
        raise ConfigError(f"unknown VLFeedback aspect {aspect!r}; expected one of "
                          f"{', '.join((MEAN_ASPECT, *VLFEEDBACK_ASPECTS))}")
    return None if name == "auto" else LAYOUTS[name]
