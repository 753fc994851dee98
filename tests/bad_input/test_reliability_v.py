"""Reliability V (issue 52, defects 3-15): the newest commands keep the promises the old ones keep.

- a folder is robustvlm's only when its marker says so, never because it holds a file named like
  one a command writes (`demo invariance` and `results.json`, `demo ladder` and `runs.jsonl`,
  `data corrupt` and `manifest.json`); `data fetch --to` gets the output check of every `--out`;
- output files are written beside their name and renamed into place (`robustness convert` on a full
  disk leaves nothing that blocks its re-run, and never advises a `--resume` it lacks), and a
  command may replace its own earlier output, never a user's;
- `data fetch --url`: not a URL, a damaged mirror file, a key in the URL; `data corrupt`: resumes
  per domain and class after a kill or a full disk, pictures too large to corrupt, two pictures
  of one name, repeated or empty severities and corruptions;
- key-like names never reach the network, and a hub that cannot be reached (a proxy answering
  502, TLS, a timeout) is one `error:` line: checked with each command run as a user runs it, in
  its own process, behind a logging proxy on 127.0.0.1 (`logging_proxy.LoggingProxy`);
- `demo ladder --seeds ''`, `zoo probe-recall --steps 10**20`, `configs copy` to a dangling link or
  to `/`, and the commands page's synopses.

Kinds of bad input covered: 45 (7 folder and output-file rules, 10 of data fetch, 8 of data
corrupt, 9 key-like names behind the proxy, 6 hub failures, 5 small ones)."""

from __future__ import annotations

import argparse
import dataclasses
import errno
import gzip
import json
import os
import re
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import numpy as np
import pytest
from bad_input import expect_clean_failure, run_cli, snapshot
from logging_proxy import LoggingProxy
from PIL import Image

from robustvlm.extras import installed
from robustvlm.runs import MARKER_FILE

KEY = "sk-proj-Q7dK2mX9pL4vR8tW3nB6yH1cF5"
ROOT = Path(__file__).resolve().parents[2]
needs_corruptions = pytest.mark.skipif(not installed("corruptions"), reason="needs the [corruptions] extra")


def _users_folder(folder: Path, *names: str) -> Path:
    folder.mkdir(parents=True)
    for name in names:
        (folder / name).write_text("mine", encoding="utf-8")
    return folder


def _image_folder(folder: Path, classes: tuple[str, ...] = ("bag", "coat"), n: int = 2, size: int = 36) -> Path:
    rng = np.random.default_rng(0)
    for name in classes:
        (folder / name).mkdir(parents=True, exist_ok=True)
        for i in range(n):
            Image.fromarray(rng.integers(0, 255, (size, size, 3), dtype=np.uint8)).save(folder / name / f"{i}.png")
    return folder


# ------------------------------------------------------------- 52.4: a folder is robustvlm's by its marker


@pytest.mark.parametrize(("argv", "name"), [
    (["demo", "invariance", "--quick"], "results.json"),
    (["demo", "ladder", "--quick"], "runs.jsonl"),
    (["data", "corrupt", "SOURCE"], "manifest.json"),
    (["data", "synth", "--benchmark", "tasks"], "manifest.json"),
], ids=["demo-invariance-results", "demo-ladder-runs", "data-corrupt-manifest", "data-synth-manifest"])
def test_a_users_file_named_like_a_commands_own_is_never_replaced(argv, name, tmp_path, capsys):
    """Issue 52.4: the user's results.json, runs.jsonl and manifest.json were replaced."""
    folder = _users_folder(tmp_path / "mine", name)
    source = _image_folder(tmp_path / "src")
    argv = [str(source) if a == "SOURCE" else a for a in argv]
    expect_clean_failure([*argv, "--out", str(folder)], capsys, mentions=[str(folder), "did not write"],
                         untouched=folder)
    assert sorted(p.name for p in folder.iterdir()) == [name]


def test_a_demo_marks_its_folder_before_any_file(tmp_path, monkeypatch):
    """The marker is written first, so a demo killed at once still owns its folder (and resumes)."""
    from robustvlm.experiments import EXPERIMENTS

    seen: list[list[str]] = []
    monkeypatch.setitem(EXPERIMENTS, "invariance", dataclasses.replace(
        EXPERIMENTS["invariance"], run=lambda plan, folder: seen.append(sorted(p.name for p in folder.iterdir()))))
    out = tmp_path / "demo"
    assert run_cli(["demo", "invariance", "--quick", "--out", str(out)]) == 0
    assert seen == [[MARKER_FILE]]
    assert run_cli(["demo", "invariance", "--quick", "--out", str(out)]) == 0  # its own folder: accepted


# ------------------------------------------------------------- 52.3, 52.14: output files


def test_convert_never_writes_through_a_link(tmp_path, capsys):
    """Issue 52.3: `convert --out` wrote through a dangling link; `--questions` had no check."""
    csv = ROOT / "docs" / "data" / "openclip_results.csv"
    for option in ("--out", "--questions"):
        link = tmp_path / f"link{option}"
        link.symlink_to(tmp_path / f"elsewhere{option}.csv")
        argv = ["robustness", "convert", str(csv), "--out", str(tmp_path / "a.csv"), option, str(link)]
        expect_clean_failure(argv, capsys, mentions=[str(link), "symbolic link"])
        assert not (tmp_path / f"elsewhere{option}.csv").exists() and not (tmp_path / "a.csv").exists()


def test_convert_on_a_full_disk_leaves_nothing_and_reruns(tmp_path, capsys, monkeypatch):
    """Issue 52.14: a full disk left a 0-byte CSV that refused the re-run, and the line advised
    `--resume`, which convert does not have. Issue 51: convert could not replace its own output."""
    import csv as csv_module

    source = ROOT / "docs" / "data" / "openclip_results.csv"
    out = tmp_path / "long.csv"
    argv = ["robustness", "convert", str(source), "--out", str(out), "--questions", str(tmp_path / "q.jsonl")]

    def full(self, rows):
        raise OSError(errno.ENOSPC, "No space left on device")

    with monkeypatch.context() as patch:
        patch.setattr(csv_module.DictWriter, "writerows", full)
        line = expect_clean_failure(argv, capsys, mentions=["No space left"])
    assert "--resume" not in line and "run the same command again" in line
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # no 0-byte CSV, no partial file
    assert run_cli(argv) == 0
    first = out.read_bytes()
    assert run_cli(argv) == 0 and out.read_bytes() == first  # its own output: replaced by the re-run
    (tmp_path / "mine.csv").write_text("mine")
    expect_clean_failure([*argv[:4], str(tmp_path / "mine.csv")], capsys, mentions=["not written by robustvlm"])
    assert (tmp_path / "mine.csv").read_text() == "mine"


# ------------------------------------------------------------- 52.5, 52.6: data fetch


@pytest.mark.parametrize("where", ["a-file", "current-folder", "root", "link-to-users-folder", "users-same-name"])
def test_data_fetch_to_gets_the_output_check(where, tmp_path, capsys, monkeypatch):
    """Issue 52.5: `--to FILE` was a FileExistsError traceback; `.`, `/` and a linked user folder
    received the files; a user's train-labels-idx1-ubyte.gz was replaced."""
    monkeypatch.chdir(_users_folder(tmp_path / "here", "notes.txt"))
    users = _users_folder(tmp_path / "users", "train-labels-idx1-ubyte.gz")
    (tmp_path / "link").symlink_to(users)
    (tmp_path / "a_file").write_text("mine")
    to = {"a-file": str(tmp_path / "a_file"), "current-folder": ".", "root": "/", "link-to-users-folder":
          str(tmp_path / "link"), "users-same-name": str(users)}[where]
    before = snapshot(tmp_path)
    expect_clean_failure(["data", "fetch", "fashion-mnist", "--to", to, "--url", "file:///nowhere/"], capsys,
                         mentions=["--to", to])
    assert snapshot(tmp_path) == before
    assert not Path("/train-labels-idx1-ubyte.gz").exists()


@pytest.mark.parametrize("url", ["notaurl", f"http://user:{KEY}@127.0.0.1:{{port}}/", f"http://127.0.0.1:{{port}}/?key={KEY}",
                                 f"http://127.0.0.1:{{port}}/{KEY}/"],
                         ids=["not-a-url", "key-in-user-info", "key-in-query", "key-in-path"])
def test_data_fetch_url_is_checked_before_any_request(url, tmp_path, capsys):
    """Issue 52.6: `notaurl` was a ValueError traceback; a key in user-info went out in the request
    line and Host header, `?key=` went to the mirror."""
    with LoggingProxy(status=404, reason="Not Found") as mirror:  # stands in for the mirror itself
        url = url.format(port=mirror.port)
        line = expect_clean_failure(["data", "fetch", "fashion-mnist", "--to", str(tmp_path / "f"), "--url", url],
                                    capsys, mentions=["--url"])
    assert mirror.requests == [] and KEY not in line
    assert not (tmp_path / "f").exists()


def test_a_damaged_mirror_file_is_one_line_and_leaves_no_part_file(tmp_path, capsys):
    """Issue 52.6: a mirror file whose compressed bytes are damaged was a zlib.error traceback and
    left a `.part` file."""
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    data = gzip.compress(np.random.default_rng(0).bytes(2000) * 3)  # compressible: the damage hits deflate codes
    for name in ("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz", "t10k-images-idx3-ubyte.gz",
                 "t10k-labels-idx1-ubyte.gz"):
        (mirror / name).write_bytes(data[:30] + b"\xff" * 40 + data[70:])
    with pytest.raises(zlib.error):
        gzip.decompress((mirror / "train-images-idx3-ubyte.gz").read_bytes())  # the damage this test is about
    to = tmp_path / "fetched"
    expect_clean_failure(["data", "fetch", "fashion-mnist", "--to", str(to), "--url", mirror.as_uri() + "/"],
                         capsys, mentions=["train-images-idx3-ubyte.gz", "checksum"])
    assert sorted(p.name for p in to.iterdir()) == [MARKER_FILE]  # no .part, no damaged file


# ------------------------------------------------------------- 52.7, 52.8: data corrupt


def _corrupt(source: Path, out: Path, *extra: str) -> list[str]:
    return ["data", "corrupt", str(source), "--out", str(out), "--corruptions", "gaussian_noise,contrast",
            "--severities", "1,3", *extra]


@needs_corruptions
@pytest.mark.parametrize("stop", ["killed", "full-disk"])
def test_data_corrupt_resumes_per_domain_and_class(stop, tmp_path, capsys, monkeypatch):
    """Issue 52.7: a killed run (or one stopped by a full disk), run again as it was, was refused
    ("holds files robustvlm did not write": manifest.json came only at the end), and the error
    advised a `--resume` the command lacks. Now it continues: the classes and domains finished are
    not written again, and the suite equals an uninterrupted one byte for byte."""
    from robustvlm.data import corrupted_suite

    source = _image_folder(tmp_path / "src", classes=("bag", "coat", "shoe"))
    assert run_cli(_corrupt(source, tmp_path / "whole")) == 0
    real_save, calls, stopped = corrupted_suite.save_png, [], []

    def save(picture, path):
        calls.append(path)
        if len(calls) == 11 and not stopped:  # clean (6 pictures), gaussian_noise-1: bag, coat, then shoe
            stopped.append(path)
            raise KeyboardInterrupt if stop == "killed" else OSError(errno.ENOSPC, "No space left on device")
        real_save(picture, path)

    monkeypatch.setattr(corrupted_suite, "save_png", save)
    out = tmp_path / "suite"
    assert run_cli(_corrupt(source, out)) == (130 if stop == "killed" else 2)
    err = capsys.readouterr().err
    assert "--resume" not in err and "run the same command again" in err, err
    calls.clear()
    assert run_cli(_corrupt(source, out)) == 0
    assert len(calls) == 5 * 6 - 10  # all but clean (6) and gaussian_noise-1: bag and coat (4)
    whole, resumed = snapshot(tmp_path / "whole"), snapshot(out)
    domains = [k for k in whole if k.endswith(".png")]
    assert len(domains) == 30 and {k: resumed[k] for k in domains} == {k: whole[k] for k in domains}
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["pictures_per_class"] == {"bag": 2, "coat": 2, "shoe": 2}
    expect_clean_failure(_corrupt(source, out, "--seed", "1"), capsys, mentions=["seed"])  # other settings


def _png_header_only(path: Path, width: int, height: int) -> Path:
    """A PNG whose header claims width x height (pixels never decoded before the size check)."""
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    chunk = lambda kind, body: (struct.pack(">I", len(body)) + kind + body  # noqa: E731
                                + struct.pack(">I", zlib.crc32(kind + body) & 0xFFFFFFFF))
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", zlib.compress(b"\x00" * 16))
                     + chunk(b"IEND", b""))
    return path


@needs_corruptions
@pytest.mark.parametrize("side", [10000, 15000], ids=["10000px", "decompression-bomb-15000px"])
def test_a_picture_too_large_is_one_line_or_a_counted_skip(side, tmp_path, capsys):
    """Issue 52.8: 10000x10000 warned, then failed with a memory error traceback; 15000x15000 was
    a DecompressionBombError traceback."""
    source = _image_folder(tmp_path / "src")
    big = _png_header_only(source / "coat" / "huge.png", side, side)
    expect_clean_failure(_corrupt(source, tmp_path / "o"), capsys, mentions=[str(big), "resize"])
    assert run_cli(_corrupt(source, tmp_path / "o", "--skip-bad")) == 0
    assert "1 bad pictures skipped" in capsys.readouterr().out
    assert json.loads((tmp_path / "o" / "manifest.json").read_text())["pictures_per_class"] == {"bag": 2, "coat": 2}
    skipped = [json.loads(line) for line in (tmp_path / "o" / "skipped.jsonl").read_text().splitlines()]
    assert [s["file"] for s in skipped] == [str(big)]


@needs_corruptions
def test_two_pictures_of_one_name_are_refused(tmp_path, capsys):
    """Issue 52.8: x.png and x.jpg in one class both became x.png (one lost; the manifest said 3)."""
    source = _image_folder(tmp_path / "src", classes=("bag",))
    Image.open(source / "bag" / "0.png").save(source / "bag" / "0.jpg")
    expect_clean_failure(_corrupt(source, tmp_path / "o"), capsys, mentions=["0.jpg", "0.png", "rename"])
    assert not (tmp_path / "o").exists()


@needs_corruptions
@pytest.mark.parametrize(("option", "value"), [("--severities", "1,1"), ("--corruptions", ","),
                                               ("--corruptions", "fog,fog")], ids=["severity-twice", "no-corruption",
                                                                                   "corruption-twice"])
def test_repeated_or_empty_corruption_options_are_refused(option, value, tmp_path, capsys):
    source = _image_folder(tmp_path / "src")
    expect_clean_failure(["data", "corrupt", str(source), "--out", str(tmp_path / "o"), option, value], capsys,
                         mentions=[option])
    assert not (tmp_path / "o").exists()


# ------------------------------------------------------------- 52.9, 52.10: the network, behind a proxy


KEY_LIKE = {
    "eval-model": ["eval", "--model", KEY, "--data", "{tasks}", "--out", "{tmp}/o1"],
    "eval-served-model": ["eval", "--model", f"openai:{KEY}", "--base-url", "http://served.example/v1",
                          "--data", "{tasks}", "--out", "{tmp}/o2"],
    "mc-eval-served-model": ["mc", "eval", "--model", f"openai:{KEY}", "--base-url", "http://served.example/v1",
                             "--benchmark", "{bench}", "--out", "{tmp}/o3"],
    "mc-build-text-encoder": ["mc", "build", "--data", "{domains}", "--out", "{tmp}/q1.jsonl", "--distractors",
                              "text", "--text-encoder", KEY],
    "mc-build-vision-model": ["mc", "build", "--data", "{domains}", "--out", "{tmp}/q2.jsonl", "--distractors",
                              "visual", "--vision-model", KEY],
    "data-check-hf": ["data", "check", f"hf:{KEY}"],
    "data-check-hf-org": ["data", "check", f"hf:someorg/{KEY}"],
    "eval-base-url-key": ["eval", "--model", "openai:m", "--base-url", f"http://served.example/v1?key={KEY}",
                          "--data", "{tasks}", "--out", "{tmp}/o4"],
    "data-fetch-url": ["data", "fetch", "fashion-mnist", "--to", "{tmp}/f", "--url", f"http://u:{KEY}@mirror.example/"],
}
#: The harness's own check that requests do pass the proxy: hub names that must reach it (issue 52.10:
#: behind a proxy answering 502, `eval` was an httpx ProxyError traceback and `data check hf:...` exited 1
#: with an indented bad-record line and no `error:` line).
REACHING = {
    "eval-hub-model": ["eval", "--model", "HuggingFaceTB/SmolVLM-256M-Instruct", "--data", "{tasks}", "--out",
                       "{tmp}/o5"],
    "data-check-hf-unreachable": ["data", "check", "hf:someorg/somedata"],
}


@pytest.fixture(scope="module")
def behind_a_proxy(tasks_data, domains_suite, tmp_path_factory) -> dict[str, dict]:
    """Every case of KEY_LIKE and REACHING run in one fresh process (`cli_cases_worker`), hub online,
    every request sent through a logging proxy answering 502: {case: its exit code, output, the
    proxy's log while it ran, and its folder}."""
    tmp = tmp_path_factory.mktemp("behind_a_proxy")
    bench = tmp / "bench.jsonl"
    assert run_cli(["mc", "build", "--data", str(domains_suite / "shapes"), "--out", str(bench), "--k", "3"]) == 0
    cases = {name: [a.format(tasks=tasks_data, domains=domains_suite / "shapes", bench=bench, tmp=tmp / name)
                    for a in argv] for name, argv in {**KEY_LIKE, **REACHING}.items()}
    (tmp / "cases.json").write_text(json.dumps(cases), encoding="utf-8")
    with LoggingProxy() as proxy:
        env = proxy.environment()
        env.update(HF_HUB_OFFLINE="0", HF_DATASETS_OFFLINE="0", TRANSFORMERS_OFFLINE="0", HF_HOME=str(tmp / "hf"),
                   OPENAI_API_KEY="not-a-key", PYTHONPATH=os.pathsep.join(sys.path))
        done = subprocess.run([sys.executable, str(Path(__file__).parents[1] / "helpers" / "cli_cases_worker.py"),
                               str(tmp / "cases.json"), str(proxy.port)], env=env, cwd=tmp, capture_output=True,
                              text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    results = {row["case"]: row for row in map(json.loads, done.stdout.splitlines())}
    case = None
    for request in proxy.requests:
        if request.startswith("SENTINEL "):
            case = request.split()[1]
            results[case]["requests"] = []
        else:
            results[case]["requests"].append(request)
    for name in results:
        results[name]["folder"] = tmp / name
    return results


def _one_error_line(result: dict) -> str:
    err = result["err"]
    errors = [line for line in err.splitlines() if line.startswith("error:") or ": error:" in line]
    assert result["code"] in (1, 2) and len(errors) == 1 and "Traceback" not in err, err[-3000:]
    return errors[0]


@pytest.mark.slow
@pytest.mark.parametrize("case", list(KEY_LIKE), ids=list(KEY_LIKE))
def test_a_key_like_name_never_reaches_the_network(case, behind_a_proxy):
    """Issue 52.9: `mc build --text-encoder sk-...` made 7 hub connections, `data check hf:sk-...`
    made 2, `eval --model openai:sk-... --base-url ...` sent the name in 10 requests. Each such
    option, given a planted key, makes no connection at all (each request would pass the proxy,
    as the REACHING cases show) and the key is neither printed nor written."""
    result = behind_a_proxy[case]
    _one_error_line(result)
    assert result["requests"] == [], result["requests"]
    assert KEY not in result["out"] + result["err"] and "key" in result["err"].lower()
    for path in result["folder"].rglob("*") if result["folder"].exists() else ():
        assert not path.is_file() or KEY.encode() not in path.read_bytes(), path


@pytest.mark.slow
@pytest.mark.parametrize("case", list(REACHING), ids=list(REACHING))
def test_a_hub_behind_a_failing_proxy_is_one_error_line(case, behind_a_proxy):
    """Issue 52.10: behind a proxy answering 502, one `error:` line naming the model or dataset; the
    proxy's log shows the requests were made."""
    result = behind_a_proxy[case]
    line = _one_error_line(result)
    assert result["requests"] and all("huggingface.co" in r for r in result["requests"]), result["requests"]
    assert REACHING[case][2] in line


@pytest.mark.parametrize("failure", ["proxy-502", "tls", "timeout", "dns"])
def test_every_kind_of_hub_failure_is_one_line(failure, tasks_data, tmp_path, capsys, monkeypatch):
    """Issue 52.10, in process: each kind of failure the hub client raises while a model loads."""
    import httpx2
    import transformers

    raised = {"proxy-502": httpx2.ProxyError("502 Bad Gateway"),
              "tls": httpx2.ConnectError("[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed"),
              "timeout": httpx2.ReadTimeout("The read operation timed out"),
              "dns": httpx2.ConnectError("[Errno -3] Temporary failure in name resolution")}[failure]

    def fail(*args, **kwargs):
        raise raised

    for loader in ("AutoConfig", "AutoProcessor", "AutoModelForImageTextToText"):
        monkeypatch.setattr(getattr(transformers, loader), "from_pretrained", fail)
    import huggingface_hub.constants

    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setenv("HTTPS_PROXY", "http://127.0.0.1:9")  # the reach check is left to the client
    expect_clean_failure(["eval", "--model", "someorg/some-vlm", "--data", str(tasks_data), "--out",
                          str(tmp_path / "o")], capsys, mentions=["someorg/some-vlm", "cannot be reached"])


# ------------------------------------------------------------- 52.11-13, 52.15: small ones


def test_an_empty_seed_list_is_refused_at_once(tmp_path, capsys):
    """Issue 52.11: `demo ladder --quick --seeds ''` ran 18 s, then ZeroDivisionError."""
    expect_clean_failure(["demo", "ladder", "--quick", "--seeds", "", "--out", str(tmp_path / "o")], capsys,
                         mentions=["--seeds", "names nothing"])
    assert not (tmp_path / "o").exists()


def test_a_huge_integer_is_refused_at_once(tmp_path, capsys):
    """Issue 52.12: `zoo probe-recall --steps 99999999999999999999` was an OverflowError traceback."""
    expect_clean_failure(["zoo", "probe-recall", "--fresh-depth", "2", "--steps", "99999999999999999999",
                          "--out", str(tmp_path / "o")], capsys, mentions=["--steps", "out of range"])


@pytest.mark.parametrize("where", ["dangling-link", "root"])
def test_configs_copy_refuses_a_dangling_link_and_the_root(where, tmp_path, capsys):
    """Issue 52.13: a dangling link was a FileExistsError traceback; `/` wrote /erm_tasks.yaml."""
    (tmp_path / "link").symlink_to(tmp_path / "nowhere")
    target = str(tmp_path / "link") if where == "dangling-link" else "/"
    existed = Path("/erm_tasks.yaml").exists()
    expect_clean_failure(["configs", "copy", "erm_tasks", target], capsys, mentions=[target])
    assert not (tmp_path / "nowhere").exists() and Path("/erm_tasks.yaml").exists() == existed


def test_every_synopsis_of_the_commands_page_is_one_the_parser_takes():
    """Issue 52.15: docs/reference/commands.md showed `robustvlm demo --quick key=value`, which the
    command refuses. Each synopsis's command must exist, and take overrides where it shows them."""
    from robustvlm.cli import build_parser
    from robustvlm.cli.options import Parser

    def command_of(words: list[str]) -> tuple[list[str], argparse.ArgumentParser]:
        parser: argparse.ArgumentParser = build_parser()
        path: list[str] = []
        for word in words:
            subs = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
            if not subs or word not in subs[0].choices:
                break
            parser, path = subs[0].choices[word], [*path, word]
        return path, parser

    page = (ROOT / "docs" / "reference" / "commands.md").read_text(encoding="utf-8")
    synopses = re.findall(r"^\| `(robustvlm [^`]+)`", page, flags=re.MULTILINE)
    assert len(synopses) >= 20
    for synopsis in synopses:
        path, parser = command_of(synopsis.split()[1:])
        assert path and isinstance(parser, Parser), synopsis
        if "key=value" in synopsis:
            assert parser.get_default("overrides") is not None or any(
                a.dest == "overrides" for a in parser._actions), f"{synopsis}: the command takes no key=value"
