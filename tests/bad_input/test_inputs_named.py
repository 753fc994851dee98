"""Inputs that once ended in a traceback or an unclear message (issues 29.11, 12, 16-18, 20-23 and
45.18-19): each is now one error line naming the input. Kinds of bad input covered: 19 (an image
path with a NUL byte in data check and in eval, an override that is not YAML, an override without
a value, a key given twice in a YAML file, a misspelled key, a garbage model.safetensors, an empty
data file in data check / eval / train, a split the data lacks, a missing local model folder, a
config after its overrides, an empty MC benchmark, an empty mc stability input, an id that is an
object, an empty image path, a missing data check input)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from bad_input import expect_clean_failure, run_cli
from PIL import Image

CONFIG = Path(__file__).resolve().parents[2] / "configs" / "erm_tasks.yaml"
#: A one-step run on little data: what an unrefused case would train (and then exit 0).
FAST = ["data.n_per_env=2", "train.steps=1", "train.epochs=0.001"]


def _records(folder: Path, image: str = "a.png", split: str = "test") -> Path:
    Image.new("RGB", (8, 8), "red").save(folder / "a.png")
    row = {"id": "r1", "image": image, "instruction": "q", "target": "t", "env": "e", "split": split}
    path = folder / "records.jsonl"
    path.write_text(json.dumps(row) + "\n", encoding="utf-8")
    return path


def test_data_check_lists_an_image_path_with_a_nul_byte_as_a_bad_record(tmp_path, capsys):
    records = _records(tmp_path, image="a\x00.png")
    assert run_cli(["data", "check", str(records)]) == 1
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err
    assert "0 good example(s), 1 bad record(s)" in out and f"{records}:1:" in out and "NUL byte" in out


def test_eval_refuses_an_image_path_with_a_nul_byte(tmp_path, capsys):
    records = _records(tmp_path, image="a\x00.png")
    expect_clean_failure(["eval", "--model", "tiny:idefics3", "--data", str(records), "--out", str(tmp_path / "ev")],
                         capsys, mentions=[f"{records}:1:", "NUL byte"], untouched=tmp_path)
    assert not (tmp_path / "ev").exists()


CONFIG_CASES = {
    "override-not-yaml": (["train.steps=[1,2"], ["override 'train.steps=[1,2'", "not valid YAML"]),
    "override-without-value": (["train.steps="], ["override 'train.steps='", "no value", "train.steps=null"]),
    "misspelled-key": (["train.batchsize=4"], ["train.batchsize", "unknown key", "did you mean 'batch_size'"]),
}


@pytest.mark.parametrize("case", list(CONFIG_CASES))
def test_a_bad_override_is_refused_naming_it(case, tmp_path, capsys):
    overrides, mentions = CONFIG_CASES[case]
    expect_clean_failure(["train", str(CONFIG), "--out", str(tmp_path / "run"), *FAST, *overrides], capsys,
                         mentions=mentions)
    assert not (tmp_path / "run").exists()


def test_a_key_given_twice_in_a_config_is_refused_naming_key_and_file(tmp_path, capsys):
    path = tmp_path / "dup.yaml"
    path.write_text(CONFIG.read_text(encoding="utf-8") + "train:\n  steps: 3\n", encoding="utf-8")
    expect_clean_failure(["train", str(path), "--out", str(tmp_path / "run"), *FAST], capsys,
                         mentions=[str(path), "duplicate key 'train'"])
    assert not (tmp_path / "run").exists()


def test_overrides_may_stand_before_the_config_file(tmp_path, capsys):
    """Were the override taken as the config, the error would be `config file not found`; here the
    config is read and the misspelled key (after it) is what is refused."""
    expect_clean_failure(["train", "train.steps=1", str(CONFIG), "--out", str(tmp_path / "run"), "train.batchsize=1"],
                         capsys, mentions=[str(CONFIG), "train.batchsize", "did you mean 'batch_size'"])


def test_a_garbage_model_safetensors_is_refused_naming_the_model(tiny_vlms, tmp_path, capsys):
    model, processor = tiny_vlms("idefics3")
    folder = tmp_path / "model"
    model.save_pretrained(folder)
    processor.save_pretrained(folder)
    (folder / "model.safetensors").write_bytes(b"\xff" * 64)
    records = _records(tmp_path)
    expect_clean_failure(["eval", "--model", str(folder), "--data", str(records), "--out", str(tmp_path / "ev")],
                         capsys, mentions=[str(folder), "cannot load"], untouched=folder)


def test_a_missing_local_model_folder_is_named_as_a_folder(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    records = _records(tmp_path)
    expect_clean_failure(["eval", "--model", "runs/nope/final", "--data", str(records), "--out", "ev"],
                         capsys, mentions=["runs/nope/final", "does not exist"], untouched=tmp_path)
    assert not (tmp_path / "ev").exists()


def test_eval_of_a_split_the_data_lacks_lists_the_splits_it_holds(tmp_path, capsys):
    records = _records(tmp_path)
    expect_clean_failure(
        ["eval", "--model", "tiny:idefics3", "--data", str(records), "--out", str(tmp_path / "ev"), "--split", "val"],
        capsys, mentions=[str(records), "'val'", "test (1 records)"], untouched=tmp_path,
    )
    assert not (tmp_path / "ev").exists()


def test_data_check_names_an_empty_data_file(tmp_path, capsys):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("\n", encoding="utf-8")
    assert run_cli(["data", "check", str(empty)]) == 1
    out = capsys.readouterr().out
    assert f"{empty}: holds no records" in out and "0 good example(s), 1 bad record(s)" in out


def test_eval_names_an_empty_data_file(tmp_path, capsys):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("", encoding="utf-8")
    expect_clean_failure(["eval", "--model", "tiny:idefics3", "--data", str(empty), "--out", str(tmp_path / "ev")],
                         capsys, mentions=[str(empty), "holds no records"])
    assert not (tmp_path / "ev").exists()


def test_train_names_an_empty_data_file(tmp_path, capsys):
    empty = tmp_path / "empty.jsonl"
    empty.write_text("", encoding="utf-8")
    argv = ["train", str(CONFIG), "--out", str(tmp_path / "run"), *FAST, "data.benchmark=null", f"data.path={empty}"]
    expect_clean_failure(argv, capsys, mentions=[str(empty), "holds no records"])
    assert not (tmp_path / "run" / "final").exists()


def test_mc_eval_names_an_empty_benchmark(tmp_path, capsys):
    bench = tmp_path / "q.jsonl"
    bench.write_text("", encoding="utf-8")
    expect_clean_failure(["mc", "eval", "--model", "tiny:idefics3", "--benchmark", str(bench), "--out", str(tmp_path / "mc")],
                         capsys, mentions=[str(bench), "holds no questions"])
    assert not (tmp_path / "mc").exists()


def test_mc_stability_names_an_empty_input(tmp_path, capsys):
    predictions = tmp_path / "per_question.jsonl"
    predictions.write_text("", encoding="utf-8")
    expect_clean_failure(["mc", "stability", str(predictions)], capsys,
                         mentions=[str(predictions), "holds no per-question rows"])


@pytest.mark.parametrize(("field", "value", "mention"), [
    ("id", {"a": 1}, "field 'id' must be a string or an integer"),  # issue 45.18: was a good record
    ("image", "", "field 'image' is an empty string"),  # issue 45.18: was a text-only record
])
def test_data_check_lists_a_bad_id_or_an_empty_image_path_as_a_bad_record(field, value, mention, tmp_path, capsys):
    records = _records(tmp_path)
    row = json.loads(records.read_text(encoding="utf-8"))
    records.write_text(json.dumps({**row, field: value}) + "\n", encoding="utf-8")
    assert run_cli(["data", "check", str(records)]) == 1
    out = capsys.readouterr().out
    assert "0 good example(s), 1 bad record(s)" in out and f"{records}:1:" in out and mention in out, out


def test_data_check_of_a_missing_input_exits_2_naming_it(tmp_path, capsys):
    """Issue 45.19: a missing input was reported as a bad record (exit 1)."""
    missing = tmp_path / "doesnotexist"
    expect_clean_failure(["data", "check", str(missing)], capsys, mentions=[str(missing), "not found"])
