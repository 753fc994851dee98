"""Fashion-MNIST from any folder (`--data-root`, $ROBUSTVLM_FASHION_MNIST) and `data fetch
fashion-mnist`, checked by checksum, tested offline against a local HTTP server and a file://
mirror (issue 46.3)."""

from __future__ import annotations

import functools
import gzip
import http.server
import struct
import threading
from pathlib import Path

import numpy as np
import pytest
from bad_input import run_cli

from robustvlm.data import real_images
from robustvlm.data.fetch import FASHION_CHECKSUMS, fetch_fashion_mnist
from robustvlm.data.real_images import FASHION_ENV, FASHION_FILES, FASHION_ROOT, load_fashion_mnist
from robustvlm.errors import DataError, MissingDataSource
from robustvlm.runs import MARKER_FILE

DEBIAN = FASHION_ROOT / "t10k-images-idx3-ubyte.gz"
needs_debian = pytest.mark.skipif(not DEBIAN.is_file(), reason="Debian's dataset-fashion-mnist is not installed")


def write_idx(path: Path, array: np.ndarray) -> None:
    """An IDX file of unsigned bytes (the format's 4-byte magic, the sizes, the bytes), unzipped."""
    header = struct.pack(">HBB", 0, 0x08, array.ndim) + struct.pack(f">{array.ndim}I", *array.shape)
    path.write_bytes(header + array.astype(np.uint8).tobytes())


@pytest.fixture
def tiny_fashion(tmp_path) -> tuple[Path, np.ndarray]:
    """A folder of the four files, unzipped, 3 training and 2 test pictures."""
    rng = np.random.default_rng(0)
    folder = tmp_path / "fashion"
    folder.mkdir()
    images = rng.integers(0, 256, (5, 28, 28))
    for split, (images_name, labels_name) in FASHION_FILES.items():
        part = slice(0, 3) if split == "train" else slice(3, 5)
        write_idx(folder / images_name.removesuffix(".gz"), images[part])
        write_idx(folder / labels_name.removesuffix(".gz"), np.arange(5)[part])
    real_images._fashion_split.cache_clear()
    return folder, images


def test_the_environment_variable_names_the_folder(tiny_fashion, monkeypatch):
    folder, images = tiny_fashion
    monkeypatch.setenv(FASHION_ENV, str(folder))
    read, labels = load_fashion_mnist()
    assert read.tolist() == images.tolist() and labels.tolist() == [0, 1, 2, 3, 4]


def test_a_named_folder_without_the_files_is_refused_by_name(tmp_path, monkeypatch):
    monkeypatch.setenv(FASHION_ENV, str(tmp_path))
    with pytest.raises(MissingDataSource, match=str(tmp_path)):
        load_fashion_mnist("test")


def test_data_root_reaches_the_reader_and_a_damaged_file_is_named(tiny_fashion, tmp_path, monkeypatch, capsys):
    folder, _ = tiny_fashion
    # --data-root wins over the variable; monkeypatch restores the variable main() sets
    monkeypatch.setenv(FASHION_ENV, str(tmp_path / "not-this-one"))
    (folder / "t10k-images-idx3-ubyte").write_bytes(b"\x00\x00\x08")
    code = run_cli(["data", "synth", "--benchmark", "fashion-test", "--out", str(tmp_path / "out"),
                    "--data-root", str(folder)])
    assert code == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "t10k-images-idx3-ubyte" in err and "Traceback" not in err


@pytest.fixture
def served_debian(tmp_path):
    """Debian's files served over HTTP on 127.0.0.1 by the standard library's server."""
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(FASHION_ROOT))
    handler.log_message = lambda *args: None  # type: ignore[attr-defined]
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()


@needs_debian
@pytest.mark.slow
def test_fetch_over_http_checks_and_keeps_the_files(served_debian, tmp_path, capsys):
    target = tmp_path / "fetched"
    assert run_cli(["data", "fetch", "fashion-mnist", "--to", str(target), "--url", served_debian]) == 0
    assert capsys.readouterr().out.count("downloaded, checksum ok") == 4
    assert sorted(p.name for p in target.iterdir() if p.name != MARKER_FILE) == sorted(FASHION_CHECKSUMS)  # no .part
    real_images._fashion_split.cache_clear()
    fetched, debian = load_fashion_mnist("test", target), load_fashion_mnist("test", FASHION_ROOT)
    assert fetched[0].tobytes() == debian[0].tobytes() and fetched[1].tolist() == debian[1].tolist()
    assert fetch_fashion_mnist(target, served_debian) == [(name, False) for name in FASHION_CHECKSUMS]


def test_a_file_mirror_with_a_wrong_file_keeps_nothing_of_it(tmp_path):
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    first = next(iter(FASHION_CHECKSUMS))
    with gzip.open(mirror / first, "wb") as handle:  # the right format, the wrong bytes
        handle.write(b"\x00\x00\x08\x01" + struct.pack(">I", 3) + b"\x01\x02\x03")
    target = tmp_path / "fetched"
    with pytest.raises(DataError, match=f"{first}: checksum mismatch"):
        fetch_fashion_mnist(target, mirror.as_uri())
    assert not (target / first).exists()
    assert not list(target.glob("*.part"))


def test_an_unreachable_mirror_is_one_line(tmp_path, capsys):
    code = run_cli(["data", "fetch", "fashion-mnist", "--to", str(tmp_path / "f"), "--url", (tmp_path / "none").as_uri()])
    assert code == 1
    err = capsys.readouterr().err
    assert err.startswith("error: could not download") and err.count("\n") == 1


def test_offline_fetch_says_which_copy_the_commands_read_instead(tiny_fashion, tmp_path, monkeypatch, capsys):
    """Issue 56.5: a failed download named only the DNS error, not the usable copy already found."""
    folder, _ = tiny_fashion
    monkeypatch.setenv(FASHION_ENV, str(folder))
    code = run_cli(["data", "fetch", "fashion-mnist", "--to", str(tmp_path / "f"), "--url", (tmp_path / "none").as_uri()])
    err = capsys.readouterr().err
    assert code == 1 and err.count("\n") == 1
    assert f"the commands read the copy already in {folder} instead (from ${FASHION_ENV}; NOT Zalando's" in err


def test_the_data_read_is_recorded_with_its_source_and_checksums(tiny_fashion, tmp_path, monkeypatch):
    """Issue 56.5: every report and results.json says which copy of the data it read."""
    import hashlib
    import json

    from robustvlm.data.provenance import (
        DATA_KEY,
        ROOT_FROM_OPTION,
        add_to_results,
        clear_reads,
        data_read,
    )
    from robustvlm.report.page import DATA_HEADING, Paragraph, write_page

    folder, _ = tiny_fashion
    monkeypatch.setenv(FASHION_ENV, str(folder))
    monkeypatch.delenv(ROOT_FROM_OPTION, raising=False)
    clear_reads()
    load_fashion_mnist("test")
    [record] = data_read()
    assert record["path"] == str(folder.resolve()) and record["source"] == f"${FASHION_ENV}"
    for name, digest in record["sha256_unzipped"].items():  # the files are unzipped here: their own bytes
        assert digest == hashlib.sha256((folder / name).read_bytes()).hexdigest()
    assert record["published_data"] is False and len(record["sha256_unzipped"]) == 4
    (tmp_path / "results.json").write_text(json.dumps({"quick": True}))
    add_to_results(tmp_path)
    assert json.loads((tmp_path / "results.json").read_text()) == {"quick": True, DATA_KEY: [record]}
    md, _ = write_page([Paragraph("body")], tmp_path, title="t")
    sums = ", ".join(f"{name} {digest[:12]}…" for name, digest in record["sha256_unzipped"].items())
    assert md.read_text().endswith(f"## {DATA_HEADING}\n\nfashion-mnist: {folder.resolve()} (from ${FASHION_ENV}; "
                                   f"SHA-256 of the unzipped files {sums}; NOT Zalando's published data).\n")
    clear_reads()
    write_page([Paragraph("body")], tmp_path, title="t")
    assert DATA_HEADING not in md.read_text()


@needs_debian
def test_debians_copy_is_recorded_as_debians_and_as_the_published_data(monkeypatch):
    from robustvlm.data.provenance import clear_reads, data_read

    monkeypatch.delenv(FASHION_ENV, raising=False)
    monkeypatch.setenv("ROBUSTVLM_CACHE", "/nonexistent-cache")
    clear_reads()
    load_fashion_mnist("test")
    [record] = data_read()
    assert record["source"] == "Debian's dataset-fashion-mnist package" and record["published_data"] is True
    clear_reads()
