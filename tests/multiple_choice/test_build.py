"""Question building: balanced answer letters, seeding, stratified subsampling, class subsets and
mappings, prompts, circular rotations and the JSONL round trip with its errors."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from robustvlm.analysis.accuracy import circular_correct
from robustvlm.data.records import Example
from robustvlm.data.wordnet import wordnet_available
from robustvlm.errors import ConfigError, DataError
from robustvlm.multiple_choice import (
    DUAL_ENCODER_TEMPLATES,
    PROMPTS,
    build_questions,
    format_question,
    read_questions,
    rotations,
    write_questions,
)
from robustvlm.multiple_choice.build import balanced_positions
from robustvlm.multiple_choice.prompts import fill_template

CLASSES = ["dog", "wolf", "cat", "car", "truck", "bicycle"]


def make_examples(root: Path, sizes: dict[str, int], domain: str = "photo", as_bytes: bool = False) -> list[Example]:
    """Tiny PNGs at ROOT/DOMAIN/CLASS/i.png and their Examples (env = domain, target = class)."""
    examples = []
    for c, (cls, size) in enumerate(sizes.items()):
        folder = root / domain / cls
        folder.mkdir(parents=True, exist_ok=True)
        for i in range(size):
            path = folder / f"{i}.png"
            Image.new("RGB", (4, 4), (40 * c % 256, 10 * i % 256, 90)).save(path)
            image = path.read_bytes() if as_bytes else str(path)
            examples.append(Example(id=f"{domain}/{cls}/{i}", image=image, instruction="", target=cls, env=domain))
    return examples


@pytest.fixture
def examples(tmp_path: Path) -> list[Example]:
    return make_examples(tmp_path, {c: 4 for c in CLASSES})


def test_questions_are_well_formed(examples):
    questions = build_questions(examples, k=4, seed=0)
    assert [q.id for q in questions] == [ex.id for ex in examples]
    for q, ex in zip(questions, examples):
        assert len(q.options) == len(set(q.options)) == 4
        assert set(q.options) <= set(CLASSES)
        assert q.answer_class == ex.target == q.dataset_class
        assert q.image == ex.image and q.source == "photo"
        assert q.question == format_question(PROMPTS[0], q.options)


@pytest.mark.parametrize("count, k", [(24, 4), (23, 5), (7, 3)])
def test_answer_letters_are_balanced_and_shuffled(tmp_path: Path, count: int, k: int):
    interleaved = sorted(make_examples(tmp_path, {c: 4 for c in CLASSES}), key=lambda ex: ex.id.rsplit("/", 1)[1])
    examples = interleaved[:count]
    letters = Counter(q.answer for q in build_questions(examples, k=k, seed=5))
    assert set(letters) <= set(range(k))
    assert max(letters.values()) - min(letters[i] for i in range(k)) <= (count % k > 0)
    runs = {tuple(balanced_positions(count, k, np.random.default_rng(s))) for s in range(5)}
    assert len(runs) > 1  # the order depends on the seed


def test_building_is_seeded_and_comparable_across_methods(examples):
    first = build_questions(examples, k=4, seed=1)
    assert first == build_questions(examples, k=4, seed=1)
    assert first != build_questions(examples, k=4, seed=2)
    table = {c: np.eye(len(CLASSES))[i] + 0.1 for i, c in enumerate(CLASSES)}
    text = build_questions(examples, k=4, seed=1, distractors="text",
                           encoder=lambda names: np.stack([table[n] for n in names]))
    assert [(q.id, q.answer, q.answer_class) for q in text] == [(q.id, q.answer, q.answer_class) for q in first]


def test_subsample_is_stratified_by_class(tmp_path: Path):
    examples = make_examples(tmp_path, {"dog": 10, "cat": 10, "car": 10, "bus": 2})
    counts = Counter(q.dataset_class for q in build_questions(examples, k=3, n=14, seed=0))
    assert counts == {"dog": 4, "cat": 4, "car": 4, "bus": 2}
    counts = Counter(q.dataset_class for q in build_questions(examples, k=3, n=13, seed=0))
    assert counts["bus"] == 2 and sorted(counts[c] for c in ("dog", "cat", "car")) == [3, 4, 4]
    ids = {q.id for q in build_questions(examples, k=3, n=13, seed=0)}
    assert len(ids) == 13 and ids != {q.id for q in build_questions(examples, k=3, n=13, seed=1)}
    with pytest.raises(ConfigError, match="32 eligible"):
        build_questions(examples, k=3, n=33)


def test_class_subset_list_restricts_questions_and_options(tmp_path: Path, examples):
    subset = tmp_path / "subset.txt"
    subset.write_text("# animals only\ndog\nwolf\ncat\nfox\n", encoding="utf-8")
    questions = build_questions(examples, k=4, class_subset=subset, seed=0)
    assert Counter(q.dataset_class for q in questions) == {"dog": 4, "wolf": 4, "cat": 4}
    assert all(set(q.options) == {"dog", "wolf", "cat", "fox"} for q in questions)  # k = pool size
    yaml_subset = tmp_path / "subset.yaml"
    yaml_subset.write_text("[dog, wolf, cat, fox]\n", encoding="utf-8")
    assert build_questions(examples, k=4, class_subset=yaml_subset, seed=0) == questions


def test_class_subset_mapping_checks_answers_against_reference_classes(tmp_path: Path):
    examples = make_examples(tmp_path, {"pooch": 3, "kitty": 3, "auto": 3, "lorry": 3, "unmapped": 3})
    mapping = {"pooch": "dog", "kitty": "cat", "auto": "car", "lorry": "truck"}
    path = tmp_path / "map.json"
    path.write_text(json.dumps(mapping), encoding="utf-8")
    questions = build_questions(examples, k=3, class_subset=path, seed=0)
    assert len(questions) == 12
    for q in questions:
        assert q.answer_class == mapping[q.dataset_class]
        assert set(q.options) <= set(mapping.values())
    with pytest.raises(DataError, match="no examples of the class subset"):
        build_questions(examples, k=2, class_subset={"zebra": "horse"})


def test_class_names_file_gives_the_option_texts(tmp_path: Path):
    wnids = {"n02084071": "dog", "n02114100": "wolf", "n02121620": "cat", "n02958343": "car"}
    examples = make_examples(tmp_path, {w: 2 for w in wnids})
    names = tmp_path / "names.txt"
    names.write_text("".join(f"{w} {n}, an alias\n" for w, n in wnids.items()), encoding="utf-8")
    questions = build_questions(examples, k=3, class_names=names, seed=0)
    assert all(q.answer_class == wnids[q.dataset_class] for q in questions)
    assert all(set(q.options) <= set(wnids.values()) for q in questions)
    if wordnet_available():  # the ids are looked up in WordNet: 2-way options = the nearest synset
        from robustvlm.data.wordnet import open_wordnet

        wn = open_wordnet()
        synsets = {n: wn.synset_from_pos_and_offset("n", int(w[1:])) for w, n in wnids.items()}
        for q in build_questions(examples, k=2, class_names=names, distractors="wordnet"):
            others = [n for n in synsets if n != q.answer_class]
            distance = [synsets[q.answer_class].shortest_path_distance(synsets[n]) for n in others]
            nearest = {n for n, d in zip(others, distance) if d == min(distance)}
            assert set(q.options) - {q.answer_class} <= nearest
    with pytest.raises(DataError, match="no name for"):
        build_questions(examples, k=3, class_names={"n02084071": "dog"})
    with pytest.raises(DataError, match="share the name 'dog'"):
        build_questions(examples, k=3, class_names={w: "dog" for w in wnids})


def test_prompts_render_questions_and_templates(examples):
    assert len(PROMPTS) == 5 and set(DUAL_ENCODER_TEMPLATES) <= set(PROMPTS)
    assert format_question("What is it?", ["dog", "cat"]) == "What is it?\nA. dog\nB. cat\nAnswer with the option's letter."
    assert fill_template("A photo of a {class}.", "dog") == "A photo of a dog."
    for index, text in enumerate(PROMPTS):
        q = build_questions(examples, k=3, prompt=index)[0]
        assert q.prompt == text
        if "{class}" in text:
            assert q.question == text
        else:
            lines = q.question.splitlines()
            assert lines[0] == text and lines[1:4] == [f"{'ABC'[i]}. {o}" for i, o in enumerate(q.options)]
    with pytest.raises(ConfigError, match="prompt must be"):
        build_questions(examples, prompt=5)


def test_rotations_move_the_answer_with_its_option(examples):
    q = build_questions(examples, k=4, seed=3)[5]
    rotated = rotations(q)
    assert [r.rotation for r in rotated] == [0, 1, 2, 3] and rotated[0] == q
    assert sorted(r.answer for r in rotated) == [0, 1, 2, 3]
    for r, rot in enumerate(rotated):
        assert rot.options == [q.options[(i + r) % 4] for i in range(4)]
        assert rot.answer_class == q.answer_class and rot.id == q.id
        assert rot.question == format_question(PROMPTS[0], rot.options)
    circular = build_questions(examples, k=4, seed=3, circular=True)
    assert circular[20:24] == rotated
    assert circular_correct([True] * 4) and not circular_correct([True, True, False, True])
    with pytest.raises(DataError):
        circular_correct([])


def test_bad_build_requests_are_refused(examples):
    with pytest.raises(ConfigError, match="at least 7 classes"):
        build_questions(examples, k=7)
    with pytest.raises(ConfigError, match="between 2 and 26"):
        build_questions(examples, k=1)
    with pytest.raises(DataError, match="'x' has no image"):
        build_questions([Example(id="x", image=None, instruction="", target="dog", env="e")])


def test_jsonl_round_trip_with_paths_and_bytes(tmp_path: Path):
    questions = build_questions(make_examples(tmp_path, {c: 2 for c in CLASSES}), k=3)
    questions += build_questions(make_examples(tmp_path / "b", {c: 1 for c in CLASSES}, as_bytes=True), k=3, circular=True)
    path = tmp_path / "out" / "questions.jsonl"
    write_questions(questions, path)
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    assert "image_base64" in rows[-1] and "image" not in rows[-1] and isinstance(rows[0]["image"], str)
    assert read_questions(path, image_root=tmp_path) == questions
    assert read_questions(path, allow_outside_root=True) == questions
    with pytest.raises(DataError, match="leaves the benchmark's folder"):  # paths outside out/
        read_questions(path)
    embedded = tmp_path / "out" / "embedded.jsonl"
    write_questions(questions, embedded, embed_images=True)
    assert all("image_base64" in json.loads(line) for line in embedded.read_text().splitlines())
    again = read_questions(embedded)  # self-contained: read without any root
    assert [q.image for q in again[:2]] == [Path(q.image).read_bytes() for q in questions[:2]]


@pytest.mark.parametrize("image", ["/etc/passwd", "../secret.png", "sub/../../secret.png"])
def test_benchmark_image_paths_stay_inside_its_folder(tmp_path: Path, image):
    """Issue 29.22: a benchmark from elsewhere cannot make the scorer open any file."""
    bench = tmp_path / "bench" / "q.jsonl"
    bench.parent.mkdir()
    bench.write_text(json.dumps({**GOOD_ROW, "image": image}) + "\n")
    with pytest.raises(DataError, match=r"q.jsonl:1: image path .* leaves the benchmark's folder"):
        read_questions(bench)
    inside = tmp_path / "bench" / "img.png"
    bench.write_text(json.dumps({**GOOD_ROW, "image": "img.png"}) + "\n")
    assert read_questions(bench)[0].image == str(inside)


GOOD_ROW = {"id": "q", "image": "a.png", "question": "?", "options": ["a", "b"], "answer": 1,
            "source": "s", "dataset_class": "b", "prompt": "?", "rotation": 0}


def row(**changes) -> str:
    """GOOD_ROW with some fields changed (None removes the field), as a JSON line."""
    return json.dumps({k: v for k, v in {**GOOD_ROW, **changes}.items() if v is not None})


@pytest.mark.parametrize("line, message", [
    ("{not json", "not valid JSON"),
    ('["a list"]', "expected a JSON object"),
    ('{"id": "x"}', "missing fields"),
    (row(answer=7), "answer 7 is not an index"),
    (row(answer=True), "'answer' must be a int"),
    (row(options=["a", 3]), "at least 2 strings"),
    (row(colour="red"), r"unknown fields \['colour'\]"),
    (row(image=None, image_base64="***"), "not valid base64"),
    (row(image_base64="AAAA"), "exactly one of"),
])
def test_malformed_question_files_name_file_and_line(tmp_path: Path, line: str, message: str):
    path = tmp_path / "q.jsonl"
    path.write_text(row() + "\n\n" + line + "\n", encoding="utf-8")
    with pytest.raises(DataError, match=message) as err:
        read_questions(path)
    assert str(err.value).startswith(f"{path}:3: ")
