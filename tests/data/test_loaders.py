"""Every format round-trips into Examples; load_image converts every mode to the right RGB pixels."""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from robustvlm.data import Example, format_env_counts, load_examples, load_image
from robustvlm.data.loaders import HubSelection
from robustvlm.errors import ConfigError


def png_bytes(color: tuple[int, int, int], size: tuple[int, int] = (6, 4)) -> bytes:
    buffer = io.BytesIO()
    Image.new("RGB", size, color).save(buffer, format="PNG")
    return buffer.getvalue()


def write_jsonl(path: Path, records: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    return path


FLAT = [
    {"id": "a", "image": "img/a.png", "instruction": "What colour?", "target": "red",
     "env": "e1", "split": "train", "ood": False},
    {"id": "b", "image": "img/b.png", "instruction": "And this?", "target": "blue",
     "env": "e2", "split": "test", "ood": True},
    {"id": "c", "image": None, "instruction": "Text only", "target": "ok", "env": "e1"},
]


def write_flat_images(root: Path) -> None:
    (root / "img").mkdir(parents=True)
    (root / "img/a.png").write_bytes(png_bytes((255, 0, 0)))
    (root / "img/b.png").write_bytes(png_bytes((0, 0, 255)))


def assert_flat_round_trip(examples: list[Example], root: Path, source: Path) -> None:
    assert [ex.id for ex in examples] == ["a", "b", "c"]
    for ex, rec in zip(examples, FLAT):
        assert (ex.instruction, ex.target, ex.env) == (rec["instruction"], rec["target"], rec["env"])
        assert ex.split == rec.get("split", "train")
        assert ex.ood == rec.get("ood", False)
        assert ex.image == (str((root / rec["image"]).absolute()) if rec["image"] else None)
        assert ex.source.startswith(str(source))
    assert load_image(examples[1].image).getpixel((0, 0)) == (0, 0, 255)


def test_jsonl_round_trip_with_line_sources(tmp_path):
    write_flat_images(tmp_path)
    path = write_jsonl(tmp_path / "data.jsonl", FLAT)
    examples = load_examples(path, verbose=False)
    assert_flat_round_trip(examples, tmp_path, path)
    assert [ex.source for ex in examples] == [f"{path}:{n}" for n in (1, 2, 3)]


def test_directory_with_data_jsonl_and_manifest(tmp_path):
    write_flat_images(tmp_path)
    write_jsonl(tmp_path / "data.jsonl", FLAT)
    (tmp_path / "manifest.json").write_text('{"benchmark": "x"}', encoding="utf-8")
    assert_flat_round_trip(load_examples(tmp_path, verbose=False), tmp_path, tmp_path / "data.jsonl")


def test_json_list_round_trip(tmp_path):
    write_flat_images(tmp_path)
    path = tmp_path / "records.json"
    path.write_text(json.dumps(FLAT), encoding="utf-8")
    assert_flat_round_trip(load_examples(path, verbose=False), tmp_path, path)


def test_split_filter(tmp_path):
    write_flat_images(tmp_path)
    path = write_jsonl(tmp_path / "data.jsonl", FLAT)
    assert [ex.id for ex in load_examples(path, split="test", verbose=False)] == ["b"]
    assert [ex.id for ex in load_examples(path, split="train", verbose=False)] == ["a", "c"]


LLAVA = [
    {"id": "q1", "image": "img/a.png", "data_source": "coco",
     "conversations": [
         {"from": "human", "value": "<image>\nWhat is this?"},
         {"from": "gpt", "value": "A red square."},
         {"from": "human", "value": "Its colour? "},
         {"from": "gpt", "value": "Red."},
     ]},
    {"id": "q2", "image": "img/b.png", "data_source": "textvqa", "task": "ocr",
     "conversations": [
         {"from": "human", "value": "Read  <image>  the sign."},
         {"from": "gpt", "value": "STOP"},
     ]},
]


def test_llava_json_every_turn_is_an_example(tmp_path):
    write_flat_images(tmp_path)
    path = tmp_path / "llava.json"
    path.write_text(json.dumps(LLAVA), encoding="utf-8")
    examples = load_examples(path, verbose=False)
    assert [ex.id for ex in examples] == ["q1#0", "q1#1", "q2#0"]
    assert [ex.instruction for ex in examples] == ["What is this?", "Its colour?", "Read the sign."]
    assert [ex.target for ex in examples] == ["A red square.", "Red.", "STOP"]
    assert [ex.env for ex in examples] == ["coco", "coco", "textvqa"]
    assert examples[0].image == str((tmp_path / "img/a.png").absolute())
    by_column = load_examples(path, fmt="llava", env_column="task", on_bad_record="skip", verbose=False)
    assert [(ex.id, ex.env) for ex in by_column] == [("q2#0", "ocr")]  # q1 has no 'task' field


def llava_onevision_dataset():
    """A tiny dataset with the LLaVA-OneVision columns (HF Image feature)."""
    import datasets

    features = datasets.Features({
        "id": datasets.Value("string"),
        "image": datasets.Image(),
        "conversations": [{"from": datasets.Value("string"), "value": datasets.Value("string")}],
        "data_source": datasets.Value("string"),
    })
    columns = {
        "id": ["r1", "r2"],
        "image": [{"bytes": png_bytes((10, 200, 30)), "path": None},
                  {"bytes": png_bytes((0, 0, 0), size=(3, 3)), "path": None}],
        "conversations": [[{"from": "human", "value": "<image>Describe."}, {"from": "gpt", "value": "Green."}],
                          [{"from": "human", "value": "Dark?"}, {"from": "gpt", "value": "Yes."}]],
        "data_source": ["geo170k", "coco"],
    }
    return datasets.Dataset.from_dict(columns, features=features)


def assert_onevision_examples(examples: list[Example], split: str = "train") -> None:
    assert [(ex.id, ex.instruction, ex.target, ex.env, ex.split) for ex in examples] == [
        ("r1#0", "Describe.", "Green.", "geo170k", split),
        ("r2#0", "Dark?", "Yes.", "coco", split),
    ]
    assert examples[0].image == png_bytes((10, 200, 30))  # kept as the encoded bytes
    assert load_image(examples[0].image).getpixel((5, 3)) == (10, 200, 30)


def test_parquet_file_and_directory(tmp_path):
    path = tmp_path / "shards" / "train-00000.parquet"
    path.parent.mkdir()
    llava_onevision_dataset().to_parquet(str(path))
    assert_onevision_examples(load_examples(path, verbose=False))
    assert_onevision_examples(load_examples(tmp_path / "shards", verbose=False))


def test_saved_hf_dataset_dir_keeps_split_names(tmp_path):
    import datasets

    data = llava_onevision_dataset()
    datasets.DatasetDict({"validation": data}).save_to_disk(str(tmp_path / "dd"))
    assert_onevision_examples(load_examples(tmp_path / "dd", verbose=False), split="val")
    data.save_to_disk(str(tmp_path / "single"))
    assert_onevision_examples(load_examples(tmp_path / "single", fmt="hf", verbose=False))


def test_hf_hub_path_converts_like_a_local_parquet(tmp_path, monkeypatch):
    """`hf:NAME:CONFIG` goes through datasets.load_dataset; here it serves a local parquet file."""
    import datasets

    path = tmp_path / "ov.parquet"
    llava_onevision_dataset().to_parquet(str(path))
    calls = []

    def fake_load_dataset(name, config, split):
        calls.append((name, config, split))
        return datasets.Dataset.from_parquet(str(path), cache_dir=str(tmp_path / "cache"))

    monkeypatch.setattr(datasets, "load_dataset", fake_load_dataset)
    assert_onevision_examples(load_examples("hf:lmms-lab/OV:CLEVR", verbose=False))
    assert_onevision_examples(load_examples("hf:lmms-lab/OV", split="val", verbose=False), split="val")
    assert calls == [("lmms-lab/OV", "CLEVR", "train"), ("lmms-lab/OV", None, "validation")]


def test_image_folder_domains(tmp_path):
    for rel, color in [("photo/red_car/1.png", (255, 0, 0)), ("photo/dog/2.jpg", (0, 0, 0)),
                       ("sketch/red_car/3.JPEG", (9, 9, 9))]:
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        Image.new("RGB", (8, 8), color).save(tmp_path / rel, format="PNG" if rel.endswith("png") else "JPEG")
    (tmp_path / "photo/dog/notes.txt").write_text("not an image")
    examples = load_examples(tmp_path, instruction_template="A {domain} of what?", verbose=False)
    assert [(ex.id, ex.env, ex.target, ex.instruction) for ex in examples] == [
        ("photo/dog/2.jpg", "photo", "dog", "A photo of what?"),
        ("photo/red_car/1.png", "photo", "red car", "A photo of what?"),
        ("sketch/red_car/3.JPEG", "sketch", "red car", "A sketch of what?"),
    ]
    assert examples[1].image == str(tmp_path / "photo/red_car/1.png")


def test_image_folder_with_a_relative_root_from_another_directory(tmp_path, monkeypatch):
    image = tmp_path / "sets/domains/photo/cat/1.png"
    image.parent.mkdir(parents=True)
    Image.new("RGB", (8, 8), (1, 2, 3)).save(image)
    monkeypatch.chdir(tmp_path / "sets")
    examples = load_examples("domains", fmt="folder", verbose=False)  # validates every image
    assert [ex.image for ex in examples] == [str(image)]


def test_verbose_prints_the_counts_table(tmp_path, capsys):
    write_flat_images(tmp_path)
    examples = load_examples(write_jsonl(tmp_path / "data.jsonl", FLAT))
    assert capsys.readouterr().out.strip() == format_env_counts(examples)


# ---------------------------------------------------------------- mode conversions


def saved(img: Image.Image, path: Path, fmt: str, **kwargs) -> str:
    img.save(path, format=fmt, **kwargs)
    return str(path)


def pixels(path: str) -> np.ndarray:
    img = load_image(path)
    assert img.mode == "RGB"
    return np.asarray(img)


def over_white(color: np.ndarray, alpha: np.ndarray) -> np.ndarray:
    """Reference 'over' compositing on white, per channel, in 0..255."""
    a = alpha[..., None] / 255.0
    return color * a + 255.0 * (1 - a)


def test_rgba_is_composited_on_white(tmp_path):
    rgba = np.array([[[10, 20, 30, 0], [10, 20, 30, 255], [200, 100, 0, 128]]], dtype=np.uint8)
    got = pixels(saved(Image.fromarray(rgba, "RGBA"), tmp_path / "a.png", "PNG"))
    assert got[0, 0].tolist() == [255, 255, 255]
    assert got[0, 1].tolist() == [10, 20, 30]
    np.testing.assert_allclose(got, over_white(rgba[..., :3].astype(float), rgba[..., 3]), atol=1)


def test_la_and_palette_transparency_become_white(tmp_path):
    la = np.array([[[50, 0], [50, 255]]], dtype=np.uint8)
    got = pixels(saved(Image.fromarray(la, "LA"), tmp_path / "la.png", "PNG"))
    assert got.tolist() == [[[255, 255, 255], [50, 50, 50]]]

    palette = Image.new("P", (2, 1))
    palette.putpalette([0, 0, 0, 0, 128, 0] + [0] * 762)
    palette.putdata([0, 1])
    got = pixels(saved(palette, tmp_path / "p.png", "PNG", transparency=0))
    assert got.tolist() == [[[255, 255, 255], [0, 128, 0]]]
    got = pixels(saved(palette, tmp_path / "p.gif", "GIF"))  # no transparency: palette colours
    assert got.tolist() == [[[0, 0, 0], [0, 128, 0]]]


def test_grey_bilevel_and_cmyk(tmp_path):
    grey = np.array([[0, 77, 255]], dtype=np.uint8)
    got = pixels(saved(Image.fromarray(grey, "L"), tmp_path / "l.png", "PNG"))
    assert got.tolist() == [[[v, v, v] for v in (0, 77, 255)]]
    bilevel = Image.fromarray(np.array([[False, True]]))
    assert bilevel.mode == "1"
    assert pixels(saved(bilevel, tmp_path / "b.png", "PNG")).tolist() == [[[0, 0, 0], [255, 255, 255]]]
    cmyk = Image.new("CMYK", (2, 1))
    cmyk.putdata([(0, 0, 0, 0), (255, 0, 0, 0)])
    assert pixels(saved(cmyk, tmp_path / "c.tif", "TIFF")).tolist() == [[[255, 255, 255], [0, 255, 255]]]


def test_16_bit_and_32_bit_integer_scale_to_8_bit(tmp_path):
    values = np.array([[0, 257, 1000, 65535]], dtype=np.uint16)
    expected = np.rint(values / 257.0).astype(int)  # 65535 -> 255, 1000 -> 4
    img16 = Image.fromarray(values)
    assert img16.mode == "I;16"
    got = pixels(saved(img16, tmp_path / "i16.png", "PNG"))
    assert got[..., 0].tolist() == expected.tolist() == [[0, 1, 4, 255]]
    assert (got[..., 0] == got[..., 2]).all()
    img32 = Image.fromarray(np.array([[0, 65535, 70000, -5]], dtype=np.int32), "I")
    assert pixels(saved(img32, tmp_path / "i32.tif", "TIFF"))[..., 0].tolist() == [[0, 255, 255, 0]]


def test_float_images(tmp_path):
    unit = Image.fromarray(np.array([[0.0, 0.5, 1.0]], dtype=np.float32), "F")
    assert pixels(saved(unit, tmp_path / "f1.tif", "TIFF"))[..., 0].tolist() == [[0, 128, 255]]
    wide = Image.fromarray(np.array([[12.4, 300.0, -3.0]], dtype=np.float32), "F")
    assert pixels(saved(wide, tmp_path / "f2.tif", "TIFF"))[..., 0].tolist() == [[12, 255, 0]]


@pytest.mark.parametrize("fmt", ["PNG", "JPEG"])
def test_rgb_bytes_and_paths_load_the_same(tmp_path, fmt):
    path = saved(Image.new("RGB", (5, 5), (0, 255, 0)), tmp_path / "g.img", fmt)
    from_path, from_bytes = load_image(path), load_image(Path(path).read_bytes())
    assert from_path.size == (5, 5)
    assert np.array_equal(np.asarray(from_path), np.asarray(from_bytes))


def test_a_new_format_is_one_registry_entry_and_one_reader(tmp_path, monkeypatch, capsys):
    """Issue 35.3: the format registry feeds detection, reading, the checks and `--format`'s help."""
    import csv

    from robustvlm.cli import build_parser
    from robustvlm.data.loaders import DATA_FORMATS, DataFormat, RawRecord

    def csv_rows(path: Path, options) -> object:
        with path.open(newline="", encoding="utf-8") as handle:
            for line, record in enumerate(csv.DictReader(handle), 2):
                yield RawRecord(record, str(path), line, path.parent)

    monkeypatch.setitem(DATA_FORMATS, "csv", DataFormat(read=csv_rows, detect=lambda p: p.suffix == ".csv"))
    path = tmp_path / "data.csv"
    path.write_text("id,instruction,target,env\na,Q?,yes,e1\nb,R?,no,e2\n", encoding="utf-8")
    examples = load_examples(path, verbose=False)
    assert [(ex.id, ex.target, ex.env, ex.source) for ex in examples] == [
        ("a", "yes", "e1", f"{path}:2"), ("b", "no", "e2", f"{path}:3")]
    assert load_examples(path, fmt="csv", verbose=False) == examples
    with pytest.raises(SystemExit):
        build_parser().parse_args(["data", "check", "--help"])
    assert "auto|jsonl|json|llava|parquet|hf|folder|csv" in capsys.readouterr().out


def test_detection_order_and_options_overrides(tmp_path):
    """A folder holding a saved dataset's marker and parquet files is the saved dataset (as before
    the registry); keyword arguments replace the fields of a LoadOptions."""
    from robustvlm.data.loaders import DATA_FORMATS, LoadOptions, detect_format

    (tmp_path / "both").mkdir()
    (tmp_path / "both" / "state.json").write_text("{}")
    (tmp_path / "both" / "x.parquet").write_bytes(b"")
    (tmp_path / "both" / "data.jsonl").write_text("")
    assert detect_format(tmp_path / "both") is DATA_FORMATS["jsonl"]
    (tmp_path / "both" / "data.jsonl").unlink()
    assert detect_format(tmp_path / "both") is DATA_FORMATS["hf"]
    (tmp_path / "both" / "state.json").unlink()
    assert detect_format(tmp_path / "both") is DATA_FORMATS["parquet"]
    (tmp_path / "both" / "x.parquet").unlink()
    assert detect_format(tmp_path / "both") is DATA_FORMATS["folder"]
    path = write_jsonl(tmp_path / "d.jsonl", [{**r, "image": None} for r in FLAT])
    assert [ex.id for ex in load_examples(path, LoadOptions(split="train"), split="test", verbose=False)] == ["b"]


def test_the_old_formats_name_still_answers_with_a_warning():
    import robustvlm.data as data

    with pytest.warns(FutureWarning, match="DATA_FORMATS"):
        assert data.FORMATS == ("auto", "jsonl", "json", "llava", "parquet", "hf", "folder")


@pytest.mark.parametrize("options, problem", [
    ({"fmt": "csv"}, "unknown data format 'csv'; expected one of"),
    ({"split": "dev"}, "unknown split 'dev'; expected one of train, test, val"),
    ({"hub": HubSelection(("a",), 1, 0)}, "hub subsets and row sampling apply only to hf:NAME datasets"),
])
def test_bad_load_options_are_refused_before_any_record_is_read(tmp_path, options, problem):
    with pytest.raises(ConfigError, match=problem):
        load_examples(tmp_path / "absent.jsonl", verbose=False, **options)
