"""`image_root`: relative image paths of record files (every format but image folders) are taken
from a separate image folder, like LLaVA's `--image_folder`; without it they are not found there."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from PIL import Image

from robustvlm.config import DataConfig
from robustvlm.data import check_dataset, load_examples
from robustvlm.data.from_config import load_from_config
from robustvlm.errors import ConfigError, DataError

RECORD = {"id": "r1", "image": "img/a.png", "instruction": "Colour?", "target": "red", "env": "e"}
CONVERSATION = {"id": "r1", "image": "img/a.png", "data_source": "e",
                "conversations": [{"from": "human", "value": "<image>Colour?"}, {"from": "gpt", "value": "red"}]}


@pytest.fixture
def layout(tmp_path, monkeypatch) -> Path:
    """tmp_path/images/img/a.png and an empty tmp_path/data; the working directory is tmp_path."""
    (tmp_path / "images/img").mkdir(parents=True)
    Image.new("RGB", (4, 4), (255, 0, 0)).save(tmp_path / "images/img/a.png")
    (tmp_path / "data").mkdir()
    monkeypatch.chdir(tmp_path)
    return tmp_path


def jsonl_file(data: Path, monkeypatch) -> tuple[str, str]:
    (data / "d.jsonl").write_text(json.dumps(RECORD) + "\n", encoding="utf-8")
    return str(data / "d.jsonl"), f"{data / 'd.jsonl'}:1: [r1] image {data / 'img/a.png'}"


def llava_file(data: Path, monkeypatch) -> tuple[str, str]:
    (data / "llava.json").write_text(json.dumps([CONVERSATION]), encoding="utf-8")
    return str(data / "llava.json"), f"{data / 'llava.json'} [r1#0]: image {data / 'img/a.png'}"


def parquet_file(data: Path, monkeypatch) -> tuple[str, str]:
    import datasets

    datasets.Dataset.from_list([RECORD]).to_parquet(str(data / "d.parquet"))
    return str(data / "d.parquet"), f"{data / 'd.parquet'} [r1]: image {data / 'img/a.png'}"


def saved_dataset(data: Path, monkeypatch) -> tuple[str, str]:
    import datasets

    datasets.Dataset.from_list([RECORD]).save_to_disk(str(data / "saved"))
    return str(data / "saved"), f"{data / 'saved'} [r1]: image img/a.png"


def hub_dataset(data: Path, monkeypatch) -> tuple[str, str]:
    """`hf:NAME` through a monkeypatched `datasets.load_dataset`; an Image feature holding a path."""
    import datasets

    features = datasets.Features({name: datasets.Value("string") for name in RECORD})
    features["image"] = datasets.Image()
    hub = datasets.Dataset.from_list([{**RECORD, "image": {"bytes": None, "path": "img/a.png"}}],
                                     features=features)
    monkeypatch.setattr(datasets, "load_dataset", lambda name, config, split: hub)
    return "hf:org/set", "hf:org/set [r1]: image img/a.png"


LOADERS = [jsonl_file, llava_file, parquet_file, saved_dataset, hub_dataset]


@pytest.mark.parametrize("write", LOADERS, ids=lambda write: write.__name__)
def test_relative_images_are_found_under_the_image_root(layout, monkeypatch, write):
    path, _ = write(layout / "data", monkeypatch)
    examples = load_examples(path, image_root="images", verbose=False)  # relative to the cwd
    assert [ex.image for ex in examples] == [str(layout / "images/img/a.png")]


@pytest.mark.parametrize("write", LOADERS, ids=lambda write: write.__name__)
def test_without_the_image_root_the_error_names_the_file_and_record(layout, monkeypatch, write):
    path, where = write(layout / "data", monkeypatch)
    report = check_dataset(path)
    assert [str(error) for error in report.errors] == [f"{where}: file not found"]


def test_absolute_image_paths_must_lie_inside_the_image_root_unless_allowed(layout):
    """Issue 17.13: an absolute path used to be opened wherever it pointed."""
    absolute = {**RECORD, "id": "r2", "image": str(layout / "images/img/a.png")}
    path = layout / "data/d.jsonl"
    path.write_text(json.dumps(absolute) + "\n", encoding="utf-8")
    assert load_examples(path, image_root=layout / "images", verbose=False)[0].image == absolute["image"]
    other = layout / "other"
    other.mkdir()
    with pytest.raises(DataError, match="leaves the data root"):
        load_examples(path, image_root=other, verbose=False)
    allowed = load_examples(path, image_root=other, allow_outside_root=True, verbose=False)
    assert allowed[0].image == absolute["image"]


def test_image_root_from_the_data_config(layout):
    path = layout / "data/d.jsonl"
    path.write_text(json.dumps(RECORD) + "\n", encoding="utf-8")
    cfg = DataConfig(path=str(path), image_root=str(layout / "images"))
    examples = load_from_config(cfg, layout / "run", verbose=False)
    assert [ex.image for ex in examples] == [str(layout / "images/img/a.png")]


def test_missing_image_root_is_a_config_error_naming_it(layout):
    path = layout / "data/d.jsonl"
    path.write_text(json.dumps(RECORD) + "\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="^image root nowhere: not found$"):
        load_examples(path, image_root="nowhere", verbose=False)
    with pytest.raises(ConfigError, match=r"^image root .*d\.jsonl: is not a directory$"):
        check_dataset(path, image_root=path)


def test_image_folders_refuse_an_image_root(layout):
    with pytest.raises(ConfigError, match="not to an image folder"):
        load_examples("images", fmt="folder", image_root="images", verbose=False)
