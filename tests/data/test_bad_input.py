"""Bad images and bad records give a DataError naming the file and the line or record; skip mode
counts each one; check_dataset lists them all."""

from __future__ import annotations

import io
import json
import struct
import zlib
from pathlib import Path

import pytest
from PIL import Image

from robustvlm.data import SPLITS, SkipLog, check_dataset, load_examples, load_image
from robustvlm.errors import DataError

# ---------------------------------------------------------------- images


def noise_png(size: tuple[int, int] = (64, 64)) -> bytes:
    buffer = io.BytesIO()
    Image.frombytes("RGB", size, bytes(range(256)) * (size[0] * size[1] * 3 // 256 + 1)).save(buffer, "PNG")
    return buffer.getvalue()


def png_header_claiming(width: int, height: int) -> bytes:
    """A 1x1 PNG whose IHDR claims width x height (no pixel data to match it)."""
    data = noise_png((1, 1))
    ihdr = struct.pack(">II", width, height) + data[24:29]
    return data[:16] + ihdr + struct.pack(">I", zlib.crc32(b"IHDR" + ihdr)) + data[33:]


def image_error(ref, **kwargs) -> str:
    with pytest.raises(DataError) as info:
        load_image(ref, source="set.jsonl", record=7, **kwargs)
    assert info.value.source == "set.jsonl" and info.value.record == 7
    assert str(info.value).startswith("set.jsonl:7: ")
    return str(info.value)


def test_missing_empty_and_non_image_files(tmp_path):
    assert "file not found" in image_error(str(tmp_path / "nope.png"))
    (tmp_path / "folder.png").mkdir()
    assert image_error(str(tmp_path / "folder.png")).endswith("folder.png: is a directory, not an image file")
    (tmp_path / "empty.png").write_bytes(b"")
    assert "empty" in image_error(str(tmp_path / "empty.png"))
    assert "empty" in image_error(b"")
    (tmp_path / "text.png").write_text("just some text\n")
    message = image_error(str(tmp_path / "text.png"))
    assert "not an image" in message and "text.png" in message


def test_a_path_with_a_nul_byte_is_refused_and_printed_escaped():
    assert image_error("a\x00.png").endswith("image a\\x00.png: the path holds a NUL byte, which no file name can")


@pytest.mark.parametrize("fmt", ["PNG", "JPEG"])
def test_truncated_files_are_detected(tmp_path, fmt):
    buffer = io.BytesIO()
    Image.open(io.BytesIO(noise_png())).save(buffer, fmt)
    path = tmp_path / f"cut.{fmt.lower()}"
    path.write_bytes(buffer.getvalue()[: len(buffer.getvalue()) // 2])
    Image.open(path)  # the header alone still opens: only a full decode finds the damage
    assert "truncated" in image_error(str(path))


def test_pixel_limit_is_checked_before_decoding():
    huge = png_header_claiming(8_000, 8_000)  # 64 Mpx claimed (under PIL's own limit), no pixel data
    message = image_error(huge)  # would read as 'truncated' if the pixel data were decoded first
    assert "8000x8000" in message and "40000000-pixel limit" in message
    assert "over the 99-pixel limit" in image_error(noise_png((10, 10)), max_pixels=99)
    assert load_image(noise_png((10, 10)), max_pixels=100).size == (10, 10)


@pytest.mark.parametrize("side", [10_000, 20_000])  # PIL warns over 89.5 Mpx, raises over twice that
def test_pil_decompression_bomb_checks_become_data_errors(side):
    assert "decompression bomb" in image_error(png_header_claiming(side, side), max_pixels=10**12)


# ---------------------------------------------------------------- records

GOOD = {"id": "g", "image": None, "instruction": "Q?", "target": "A", "env": "e"}


def write_lines(path: Path, lines: list[bytes]) -> Path:
    path.write_bytes(b"".join(line + b"\n" for line in lines))
    return path


def line(**fields) -> bytes:
    return json.dumps({**GOOD, **fields}).encode()


BAD_LINES = {
    "empty instruction": line(id="b", instruction="  "),
    "empty target": line(id="b", target=""),
    "missing environment": line(id="b", env=None),
    "not in the env map": line(id="b", env="elsewhere"),
    "invalid JSON": b'{"id": "b", "instruction": ',
    "not valid UTF-8": b'{"id": "b", "instruction": "caf\xe9"}',
    "duplicate id 'g'": line(),
    "file not found": line(id="b", image="missing.png"),
    "missing field 'target'": b'{"id": "b", "instruction": "Q", "env": "e"}',
    "split 'holdout'": line(id="b", split="holdout"),
    "not a JSON object": b"[1, 2]",
}
ENV_MAP = {"environments": {"e": {"sources": ["e"]}}}


@pytest.mark.parametrize("reason", list(BAD_LINES))
def test_bad_jsonl_record_names_file_and_line(tmp_path, reason):
    path = write_lines(tmp_path / "d.jsonl", [line(), BAD_LINES[reason], line(id="h")])
    env_map = ENV_MAP if reason == "not in the env map" else None
    with pytest.raises(DataError) as info:
        load_examples(path, env_map=env_map, verbose=False)
    assert str(info.value).startswith(f"{path}:2: ")
    assert reason.split("'")[0].lower() in str(info.value).lower()


def test_skip_mode_counts_every_bad_record(tmp_path):
    path = write_lines(tmp_path / "d.jsonl", [line(), *BAD_LINES.values(), line(id="h")])
    log = SkipLog()
    examples = load_examples(path, env_map=ENV_MAP, on_bad_record="skip", skip_log=log, verbose=False)
    assert [ex.id for ex in examples] == ["g", "h"]
    assert len(log) == len(BAD_LINES)
    assert [row["record"] for row in log.rows] == list(range(2, 2 + len(BAD_LINES)))
    assert all(row["source"] == str(path) for row in log.rows)
    log.write(tmp_path / "skipped.jsonl")
    assert len((tmp_path / "skipped.jsonl").read_text().splitlines()) == len(BAD_LINES)
    # records that have an id name it; unreadable lines have none to name
    no_id = [row["reason"] for row in log.rows if "id" not in row]
    assert {row["id"] for row in log.rows if "id" in row} == {"b", "g"}  # g: the duplicate
    assert len(no_id) == 3 and all(r.startswith(("invalid JSON", "not valid UTF-8", "record is not")) for r in no_id)


def test_skip_mode_prints_the_number_skipped(tmp_path, capsys):
    path = write_lines(tmp_path / "d.jsonl", [line(), line(id="b", target="")])
    assert len(load_examples(path, on_bad_record="skip")) == 1
    assert "skipped 1 bad record" in capsys.readouterr().out


def test_bad_image_in_folder_layout_names_the_image(tmp_path):
    (tmp_path / "photo/cat").mkdir(parents=True)
    (tmp_path / "photo/cat/ok.png").write_bytes(noise_png((4, 4)))
    (tmp_path / "photo/cat/bad.png").write_bytes(b"")
    with pytest.raises(DataError) as info:
        load_examples(tmp_path, verbose=False)
    assert str(info.value).startswith(f"{tmp_path} [photo/cat/bad.png]: ")
    log = SkipLog()
    assert [ex.id for ex in load_examples(tmp_path, on_bad_record="skip", skip_log=log, verbose=False)] == ["photo/cat/ok.png"]
    assert log.rows[0]["record"] == "photo/cat/bad.png"
    assert load_examples(tmp_path, validate_images=False, verbose=False)[0].id == "photo/cat/bad.png"


def test_bad_conversation_records_name_the_record(tmp_path):
    records = [
        {"id": "ok", "data_source": "s", "conversations": [{"from": "human", "value": "Q"}, {"from": "gpt", "value": "A"}]},
        {"id": "order", "data_source": "s", "conversations": [{"from": "gpt", "value": "A"}, {"from": "human", "value": "Q"}]},
        {"id": "blank", "data_source": "s", "conversations": [{"from": "human", "value": "<image>"}, {"from": "gpt", "value": "A"}]},
        {"id": "nosrc", "conversations": [{"from": "human", "value": "Q"}, {"from": "gpt", "value": "A"}]},
    ]
    path = tmp_path / "llava.json"
    path.write_text(json.dumps(records), encoding="utf-8")
    report = check_dataset(path)
    assert [str(e) for e in report.errors] == [
        f"{path} [order]: 'conversations' must alternate 'human' and 'gpt' turns, starting with 'human'",
        f"{path} [blank#0]: empty instruction",
        f"{path} [nosrc#0]: missing environment (no 'env' or 'data_source' field)",
    ]
    assert report.n_ok == 1 and not report.ok


def test_unreadable_json_document_names_the_line(tmp_path):
    path = tmp_path / "broken.json"
    path.write_text('[\n {"id": "a"},\n {"id": \n]', encoding="utf-8")
    with pytest.raises(DataError, match=rf"^{path}:4: invalid JSON"):
        load_examples(path, verbose=False)
    path.write_bytes(b'[\n{"id": "caf\xe9"}]')
    with pytest.raises(DataError, match=rf"^{path}:2: not valid UTF-8"):
        load_examples(path, on_bad_record="skip", verbose=False)  # a whole-file error always raises


def test_missing_data_path(tmp_path):
    for path in (tmp_path / "none.jsonl", tmp_path / "nodir"):
        with pytest.raises(DataError, match="not found") as info:
            load_examples(path, verbose=False)
        assert info.value.source == str(path)
    (tmp_path / "emptydir").mkdir()
    with pytest.raises(DataError, match="no images found"):
        load_examples(tmp_path / "emptydir", verbose=False)


def test_check_dataset_reports_every_bad_record_and_counts(tmp_path):
    bad = [BAD_LINES["empty target"], BAD_LINES["invalid JSON"], line(id="b2", target="")]
    path = write_lines(tmp_path / "d.jsonl", [line(), *bad, line(id="h", env="f", split="test")])
    report = check_dataset(path)
    assert [(e.source, e.record) for e in report.errors] == [(str(path), 2), (str(path), 3), (str(path), 4)]
    assert report.n_ok == 2 and not report.ok
    assert report.counts["e"]["train"] == 1 and report.counts["f"]["test"] == 1
    text = report.format().splitlines()
    assert text[0].split() == ["env", *SPLITS, "ood", "total"]
    assert text[-3:] == [f"  {e}" for e in report.errors]
    with pytest.raises(DataError, match="not found") as missing:  # a missing input is no bad record (45.19)
        check_dataset(tmp_path / "missing.jsonl")
    assert missing.value.source == str(tmp_path / "missing.jsonl")
    clean = check_dataset(write_lines(tmp_path / "ok.jsonl", [line()]))
    assert clean.ok and clean.n_ok == 1


def test_data_error_names_the_line_and_the_record_id():
    assert str(DataError("bad", "d.jsonl", 7, "rec-3")) == "d.jsonl:7: [rec-3] bad"
    assert str(DataError("bad", "d.jsonl", 7)) == "d.jsonl:7: bad"
    assert str(DataError("bad", "d.json", "rec-3")) == "d.json [rec-3]: bad"
    assert str(DataError("bad", "d.json")) == "d.json: bad"
    assert str(DataError("bad")) == "bad"


def test_bad_jsonl_records_name_the_line_and_the_record_id(tmp_path):
    turns = [{"from": "human", "value": "<image>"}, {"from": "gpt", "value": "A"}]
    path = write_lines(tmp_path / "d.jsonl", [
        line(id="rec-1", target=""),
        line(id="rec-2", image="missing.png"),
        json.dumps({"id": "conv", "data_source": "s", "conversations": turns}).encode(),
        b'{"instruction": "Q", "target": "A", "env": "e"}',
        b"not json",
    ])
    report = check_dataset(path)
    assert [str(error) for error in report.errors] == [
        f"{path}:1: [rec-1] empty target",
        f"{path}:2: [rec-2] image {tmp_path / 'missing.png'}: file not found",
        f"{path}:3: [conv#0] empty instruction",
        f"{path}:4: missing field 'id'",
        f"{path}:5: invalid JSON (Expecting value, column 1)",
    ]
    assert [(e.record, e.record_id) for e in report.errors[:2]] == [(1, "rec-1"), (2, "rec-2")]


def test_a_record_without_an_image_is_a_data_error_naming_it():
    with pytest.raises(DataError, match="has no image") as info:
        load_image(None, source="data.jsonl", record=3, record_id="q7")
    assert "data.jsonl" in str(info.value) and "q7" in str(info.value)
