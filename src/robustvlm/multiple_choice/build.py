"""Build K-way multiple-choice classification questions from labelled images.

Each chosen image becomes one question: its class (the answer) and K - 1 distractor classes
(see `distractors`), the answer placed so that answer letters are balanced across A..K. The
same seed gives the same images, answer letters and option orders whatever the distractor
method, so benchmarks built with different methods are comparable image by image.

Class keys, names and subsets:
- an example's class key is its `target` (e.g. an image-folder class such as "dog" or the
  WordNet id "n02084071"); `class_subset` restricts or maps keys (below);
- options show display names: `class_names` maps keys to names (e.g. ImageNet's
  "n01440764 tench, Tinca tinca" lines), else the key is shown as it is;
- `class_subset` is a list of keys (questions only for images of those classes, options only
  from them) or a mapping {dataset class: reference class} (questions for images of the mapped
  classes, answer = the reference class, options from the reference classes).

WordNet distractors look a key up as a WordNet id when it is one, else its display name's first
noun sense; to fix a sense, map the dataset classes to ids and name the ids, e.g.
class_subset={"star": "n13881644"}, class_names={"n13881644": "star"}.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import IO

import numpy as np
import yaml

from robustvlm.data.records import Example
from robustvlm.errors import ConfigError, DataError
from robustvlm.multiple_choice.distractors import (
    ClassPool,
    ImageEmbedder,
    TextEncoder,
    choose_distractors,
)
from robustvlm.multiple_choice.prompts import LETTERS, render_prompt, resolve_prompt

ClassSpec = str | Path | Mapping[str, str] | Sequence[str]


@dataclass
class MCQuestion:
    """One multiple-choice question about an image.

    Attributes:
        id: the id of the example the image comes from (shared by a question's rotations).
        image: an image path or the encoded bytes of an image file.
        question: the text for the model: a question with lettered options and the answer
            instruction, or a dual-encoder template holding `{class}` (see `prompts`).
        options: the K class names offered, in letter order.
        answer: index of the correct option (0 = "A").
        source: the example's environment (domain or benchmark).
        dataset_class: the example's own class label (differs from the answer's class name
            under a class mapping or display names).
        prompt: the prompt formulation the question was rendered from.
        rotation: how many places the options were rotated (0 = as built).
    """

    id: str
    image: str | bytes
    question: str
    options: list[str]
    answer: int
    source: str
    dataset_class: str
    prompt: str
    rotation: int = 0

    @property
    def answer_class(self) -> str:
        """The correct option's class name."""
        return self.options[self.answer]

    @property
    def answer_letter(self) -> str:
        return LETTERS[self.answer]


def build_questions(
    examples: list[Example],
    *,
    k: int = 5,
    distractors: str = "random",
    n: int | None = None,
    seed: int = 0,
    class_subset: ClassSpec | None = None,
    class_names: ClassSpec | None = None,
    prompt: int | str = 0,
    encoder: TextEncoder | str | Path | None = None,
    image_embedder: ImageEmbedder | None = None,
    circular: bool = False,
) -> list[MCQuestion]:
    """K-way questions for labelled images, in the examples' order.

    Args:
        examples: images with `target` = class key and `env` = domain/benchmark.
        k: options per question (2..26).
        distractors: "random", "wordnet", "text" or "visual" (see `distractors`).
        n: number of questions, sampled stratified by class; None = one per eligible image.
        seed: seeds the sample, the answer letters, the option order and distractor ties.
        class_subset: list of keys or {dataset class: reference class}; a dict, a sequence or
            a JSON / YAML / txt (one key per line) file.
        class_names: {key: display name}; a dict or a JSON / YAML file, or a txt file of
            "KEY name[, alias...]" lines (the text before the first comma is the name).
        prompt: index into `prompts.PROMPTS` or a custom question / `{class}` template.
        encoder: sentence encoder for `text` distractors (callable, model folder, None = MiniLM).
        image_embedder: list of RGB images -> [n, d] array, for `visual` distractors.
        circular: return every cyclic rotation of each question (K per question, adjacent).
    """
    if not 2 <= k <= len(LETTERS):
        raise ConfigError(f"k must be between 2 and {len(LETTERS)}, got {k}")
    if seed < 0:
        raise ConfigError(f"seed must be >= 0, got {seed}")
    prompt_text = resolve_prompt(prompt)
    mapping = load_class_subset(class_subset) if class_subset is not None else None
    eligible = _eligible(examples, mapping, class_subset)
    pool = _class_pool(eligible, mapping, load_class_names(class_names) if class_names else None)
    if len(pool.keys) < k:
        raise ConfigError(f"k={k} options need at least {k} classes; there are {len(pool.keys)}: {pool.keys}")

    keys = [key for _, key in eligible]
    chosen = range(len(eligible)) if n is None else _stratified_sample(keys, n, np.random.default_rng([seed, 1]))
    answers = [keys[i] for i in chosen]
    wrong = choose_distractors(
        distractors, pool, answers, k - 1, seed=seed, encoder=encoder, image_embedder=image_embedder
    )
    rng = np.random.default_rng([seed, 2])
    positions = balanced_positions(len(answers), k, rng)
    name_of = dict(zip(pool.keys, pool.names))
    questions = []
    for i, answer_key, distractor_keys, position in zip(chosen, answers, wrong, positions):
        options = [name_of[key] for key in rng.permutation(distractor_keys)]
        options.insert(int(position), name_of[answer_key])
        questions.append(_question(eligible[i][0], options, int(position), prompt_text))
    return [r for q in questions for r in rotations(q)] if circular else questions


def _eligible(examples: list[Example], mapping: dict[str, str] | None,
              class_subset: ClassSpec | None) -> list[tuple[Example, str]]:
    """(example, answer key) for the examples a question can be built from (in the subset, with
    an image); none is a `DataError`."""
    keyed = [(ex, _answer_key(ex, mapping)) for ex in examples]
    eligible = [(ex, key) for ex, key in keyed if key is not None]
    if not eligible:
        where = f" of the class subset {_describe(class_subset)}" if mapping else ""
        raise DataError(f"no examples{where} to build questions from")
    return eligible


def _question(ex: Example, options: list[str], position: int, prompt_text: str) -> MCQuestion:
    """The question about `ex`'s image whose answer is option `position`."""
    assert ex.image is not None  # _answer_key rejects examples without an image
    return MCQuestion(
        id=ex.id, image=ex.image, question=render_prompt(prompt_text, options), options=options,
        answer=position, source=ex.env, dataset_class=ex.target, prompt=prompt_text,
    )


def balanced_positions(count: int, k: int, rng: np.random.Generator) -> np.ndarray:
    """Answer positions for `count` questions: each of 0..k-1 used count // k times, the
    remaining count % k positions distinct and drawn at random, then all shuffled."""
    base = np.repeat(np.arange(k), count // k)
    extra = rng.choice(k, size=count % k, replace=False)
    return rng.permutation(np.concatenate([base, extra]))


def rotations(question: MCQuestion) -> list[MCQuestion]:
    """Every cyclic rotation of the options (rotation r starts at option r), the answer index
    moved with its option and the question text re-rendered; rotation 0 is the question itself."""
    k = len(question.options)
    rotated = []
    for r in range(k):
        options = question.options[r:] + question.options[:r]
        rotated.append(replace(
            question, options=options, answer=(question.answer - r) % k,
            question=render_prompt(question.prompt, options), rotation=r,
        ))
    return rotated


def _answer_key(example: Example, mapping: Mapping[str, str] | None) -> str | None:
    """The reference class of an example, or None when the subset leaves it out."""
    if example.image is None:
        raise DataError(f"example {example.id!r} has no image", example.source or None, example.id)
    return example.target if mapping is None else mapping.get(example.target)


def _class_pool(
    eligible: list[tuple[Example, str]], mapping: Mapping[str, str] | None, names: Mapping[str, str] | None
) -> ClassPool:
    """The option pool: the subset's reference classes, else every class of the examples."""
    keys = list(dict.fromkeys(mapping.values())) if mapping else sorted({key for _, key in eligible})
    if names is not None:
        unnamed = [key for key in keys if key not in names]
        if unnamed:
            raise DataError(f"class_names has no name for class(es) {unnamed}")
    display = [names[key] for key in keys] if names is not None else keys
    seen: dict[str, str] = {}
    for key, name in zip(keys, display):
        if name in seen:
            raise DataError(f"classes {seen[name]!r} and {key!r} share the name {name!r}; options must differ")
        seen[name] = key
    images: dict[str, list[str | bytes]] = {key: [] for key in keys}
    for ex, key in eligible:
        assert ex.image is not None  # _answer_key rejects examples without an image
        images[key].append(ex.image)
    return ClassPool(keys=keys, names=display, images=images)


def _stratified_sample(labels: Sequence[str], n: int, rng: np.random.Generator) -> list[int]:
    """Indices (sorted) of `n` items, drawing classes round-robin in random order so that class
    counts differ by at most one where class sizes allow; items within a class at random."""
    if not 1 <= n <= len(labels):
        raise ConfigError(f"n must be between 1 and the {len(labels)} eligible images, got {n}")
    members: dict[str, list[int]] = {}
    for i, label in enumerate(labels):
        members.setdefault(label, []).append(i)
    classes = sorted(members)
    class_rank = dict(zip(classes, rng.permutation(len(classes))))
    round_of = np.empty(len(labels), dtype=int)  # the item's turn within its class
    for c in classes:
        round_of[rng.permutation(members[c])] = np.arange(len(members[c]))
    order = np.lexsort(([class_rank[label] for label in labels], round_of))
    return sorted(order[:n].tolist())


def load_class_subset(spec: ClassSpec) -> dict[str, str]:
    """A class subset as {dataset class: reference class} (a list maps each class to itself)."""
    data = _read_class_spec(spec)
    if isinstance(data, Mapping):
        pairs = list(data.items())
    elif isinstance(data, list):
        pairs = [(c, c) for c in data]
    else:
        raise ConfigError(f"class subset {_describe(spec)} must be a list of classes or a mapping")
    if not pairs:
        raise ConfigError(f"class subset {_describe(spec)} is empty")
    bad = [p for p in pairs if not all(isinstance(v, str) and v.strip() for v in p)]
    if bad:
        raise ConfigError(f"class subset {_describe(spec)}: class names must be non-empty strings, got {bad[:3]}")
    return dict(pairs)


def load_class_names(spec: ClassSpec) -> dict[str, str]:
    """Display names {key: name} from a dict, a JSON / YAML file or a "KEY name, alias" txt file."""
    data = _read_class_spec(spec)
    if isinstance(data, list) and all(isinstance(line, str) for line in data):
        data = dict(_split_name_line(line, spec) for line in data)
    if not isinstance(data, Mapping) or not all(isinstance(v, str) for v in data.values()):
        raise ConfigError(f"class names {_describe(spec)} must map class keys to name strings")
    return {str(key): name for key, name in data.items()}


def _split_name_line(line: str, spec: ClassSpec) -> tuple[str, str]:
    parts = line.split(maxsplit=1)
    if len(parts) != 2:
        raise ConfigError(f"class names {_describe(spec)}: line {line!r} is not 'KEY name'")
    return parts[0], parts[1].split(",")[0].strip()


def _read_class_spec(spec: ClassSpec) -> object:
    """The content of a class list / mapping: given directly, or read from a JSON, YAML or txt
    file (txt: one entry per line, blank lines and '#' comments ignored)."""
    if isinstance(spec, Mapping):
        return dict(spec)
    if not isinstance(spec, str | Path):
        return list(spec)
    path = Path(spec)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as err:
        raise ConfigError(f"cannot read class file {path}: {err}") from err
    try:
        if path.suffix == ".json":
            return json.loads(text)
        if path.suffix in (".yaml", ".yml"):
            return yaml.safe_load(text)
    except (json.JSONDecodeError, yaml.YAMLError) as err:
        raise ConfigError(f"class file {path} is not valid {path.suffix[1:].upper()}: {err}") from err
    lines = (line.strip() for line in text.splitlines())
    return [line for line in lines if line and not line.startswith("#")]


def _describe(spec: object) -> str:
    return str(spec) if isinstance(spec, str | Path) else f"({type(spec).__name__})"


# --- JSONL files -------------------------------------------------------------------------

_FIELD_TYPES = {
    "id": str, "question": str, "options": list, "answer": int, "source": str,
    "dataset_class": str, "prompt": str, "rotation": int,
}
_OPTIONAL = {"rotation"}


def write_questions(questions: Sequence[MCQuestion], path: str | Path, *, embed_images: bool = False) -> None:
    """Write one JSON object per line; image bytes go to `image_base64`, paths to `image`. With
    `embed_images`, image files are read and embedded too (a self-contained benchmark, as
    MMBench's base64 TSVs are): nothing outside the file is opened when it is scored."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf-8") as f:
        write_question_rows(questions, f, embed_images=embed_images)


def write_question_rows(questions: Sequence[MCQuestion], handle: IO[str], *, embed_images: bool = False) -> None:
    """Write `questions` to an open text file as `write_questions` does."""
    for q in questions:
        row = asdict(q)
        image = _image_bytes(q) if embed_images else q.image
        if isinstance(image, bytes):
            row.pop("image")
            row["image_base64"] = base64.b64encode(image).decode("ascii")
        handle.write(json.dumps(row, ensure_ascii=False) + "\n")


def _image_bytes(q: MCQuestion) -> bytes:
    if isinstance(q.image, bytes):
        return q.image
    try:
        return Path(q.image).read_bytes()
    except OSError as err:
        raise DataError(f"cannot read image {q.image!r}: {err.strerror or err}", q.image, q.id) from None


def read_questions(
    path: str | Path, *, image_root: str | Path | None = None, allow_outside_root: bool = False
) -> list[MCQuestion]:
    """Read a file written by `write_questions`; a bad line raises DataError naming file and line,
    and so does a file without questions.

    Image paths are taken relative to the file's folder and must stay inside it or inside
    `image_root` (a benchmark from elsewhere cannot make the scorer open any file on the
    machine); `allow_outside_root` accepts any path (benchmarks this process built itself)."""
    path = Path(path)
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as err:
        raise DataError(f"cannot read questions file: {err}", str(path)) from err
    roots = [path.parent.resolve(), *([Path(image_root).resolve()] if image_root is not None else [])]
    questions = []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            question = _question_from_row(json.loads(line))
        except json.JSONDecodeError as err:
            raise DataError(f"not valid JSON ({err.msg})", str(path), number) from err
        except ValueError as err:
            raise DataError(str(err), str(path), number) from err
        if isinstance(question.image, str):
            full = path.parent / question.image
            if not allow_outside_root and not any(full.resolve().is_relative_to(r) for r in roots):
                raise DataError(
                    f"image path {question.image!r} of question {question.id!r} leaves the benchmark's "
                    f"folder {path.parent}; pass --image-root DIR (the folder its images are in) or "
                    "--allow-outside-root to accept it", str(path), number)
            question = replace(question, image=str(full.absolute()))
        questions.append(question)
    if not questions:
        raise DataError("holds no questions (the file is empty)", str(path))
    return questions


def _question_from_row(row: object) -> MCQuestion:
    """Check one decoded JSONL row; raises ValueError saying what is wrong."""
    if not isinstance(row, dict):
        raise ValueError(f"expected a JSON object, got {type(row).__name__}")
    unknown = set(row) - set(_FIELD_TYPES) - {"image", "image_base64"}
    missing = set(_FIELD_TYPES) - _OPTIONAL - set(row)
    if unknown or missing:
        raise ValueError(f"unknown fields {sorted(unknown)}, missing fields {sorted(missing)}")
    for name, kind in _FIELD_TYPES.items():
        if name in row and (not isinstance(row[name], kind) or isinstance(row[name], bool)):
            raise ValueError(f"field {name!r} must be a {kind.__name__}, got {row[name]!r}")
    options = row["options"]
    if len(options) < 2 or not all(isinstance(o, str) for o in options):
        raise ValueError(f"options must be a list of at least 2 strings, got {options!r}")
    if len(options) > len(LETTERS):
        raise ValueError(f"{len(options)} options, but answer letters run A..{LETTERS[-1]} (at most {len(LETTERS)})")
    if any(not o.strip() for o in options):
        raise ValueError(f"options must not be empty, got {options!r}")
    normal = [" ".join(o.split()).casefold() for o in options]
    repeated = sorted({o for o, n in zip(options, normal) if normal.count(n) > 1})
    if repeated:
        raise ValueError(f"options repeat {repeated}: a question's options must be distinct")
    if not 0 <= row["answer"] < len(options):
        raise ValueError(f"answer {row['answer']} is not an index into the {len(options)} options")
    return MCQuestion(image=_image_of(row), **{k: v for k, v in row.items() if k in _FIELD_TYPES})


def _image_of(row: dict) -> str | bytes:
    if ("image" in row) == ("image_base64" in row):
        raise ValueError("a question needs exactly one of 'image' (a path) and 'image_base64'")
    if "image" in row:
        if not isinstance(row["image"], str) or not row["image"]:
            raise ValueError(f"field 'image' must be a non-empty path string, got {row['image']!r}")
        return row["image"]
    try:
        return base64.b64decode(row["image_base64"], validate=True)
    except (binascii.Error, TypeError) as err:
        raise ValueError(f"field 'image_base64' is not valid base64: {err}") from err
