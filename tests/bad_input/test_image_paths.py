"""Image paths that leave the data root (issue 17.13): a path in a data file resolves inside the
data file's folder (or --image-root); anything else is a bad record naming the file and line,
unless --allow-outside-root. Kinds of bad input covered: 4 (`../` path, absolute path, a symlink
pointing out, an absolute path outside --image-root), across data check, eval, embed eval's
retrieval records and rm data check."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from bad_input import expect_clean_failure, run_cli
from PIL import Image


def _image(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", (8, 8), "red").save(path)
    return path


@pytest.fixture
def layout(tmp_path: Path) -> dict[str, Path]:
    data = tmp_path / "data"
    _image(data / "img" / "ok.png")
    outside = _image(tmp_path / "secret" / "outside.png")
    (data / "link.png").symlink_to(outside)
    return {"data": data, "outside": outside, "root": tmp_path}


def _records(folder: Path, image: str) -> Path:
    rows = [{"id": "a", "image": "img/ok.png", "instruction": "q", "target": "t", "env": "e", "split": "test"},
            {"id": "b", "image": image, "instruction": "q", "target": "t", "env": "e", "split": "test"}]
    path = folder / "records.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


PATHS = {
    "dot-dot": lambda lay: "../secret/outside.png",
    "absolute": lambda lay: str(lay["outside"]),
    "symlink-out": lambda lay: "link.png",
}


@pytest.mark.parametrize("kind", list(PATHS))
def test_eval_refuses_an_image_path_leaving_the_data_root(kind, layout, tmp_path, capsys):
    records = _records(layout["data"], PATHS[kind](layout))
    expect_clean_failure(
        ["eval", "--model", "tiny:idefics3", "--data", str(records), "--out", str(tmp_path / "ev")],
        capsys, mentions=[f"{records}:2", "leaves the data root", "--allow-outside-root"],
    )
    assert not (tmp_path / "ev").exists()


def test_an_absolute_path_outside_the_image_root_is_refused(layout, capsys):
    records = _records(layout["root"], str(layout["outside"]))
    assert run_cli(["data", "check", str(records), "--image-root", str(layout["data"])]) == 1
    out = capsys.readouterr().out
    assert f"{records}:2" in out and "leaves the data root" in out


@pytest.mark.parametrize("kind", list(PATHS))
def test_data_check_lists_it_and_allow_outside_root_accepts_it(kind, layout, capsys):
    records = _records(layout["data"], PATHS[kind](layout))
    assert run_cli(["data", "check", str(records)]) == 1
    out = capsys.readouterr().out
    assert "1 good example(s), 1 bad record(s)" in out and "leaves the data root" in out
    assert run_cli(["data", "check", str(records), "--allow-outside-root"]) == 0
    assert "2 good example(s), 0 bad record(s)" in capsys.readouterr().out


def test_preference_pairs_are_held_to_the_same_root(layout, capsys):
    pair = {"id": "p", "image": "../secret/outside.png", "query": "q", "chosen": "a", "rejected": "b", "env": "e"}
    path = layout["data"] / "pairs.jsonl"
    path.write_text(json.dumps(pair) + "\n", encoding="utf-8")
    assert run_cli(["rm", "data", "check", str(path)]) == 1
    assert "leaves the data root" in "".join(capsys.readouterr())
    assert run_cli(["rm", "data", "check", str(path), "--allow-outside-root"]) == 0


def test_embed_eval_retrieval_records_stay_inside_the_root_unless_allowed(layout, tmp_path, capsys):
    records = _records(layout["data"], "../secret/outside.png")
    argv = ["embed", "eval", "--model", "tiny:idefics3", "--family", "vlm2vec-vqa", "--retrieval", str(records)]
    expect_clean_failure([*argv, "--out", str(tmp_path / "ee")], capsys,
                         mentions=[f"{records}:2", "leaves the data root"])
    assert not (tmp_path / "ee").exists()
