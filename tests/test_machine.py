"""The machine record of every run (`robustvlm.machine`), checked against independent reads."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy
import PIL
import pytest
import torch
import transformers

from robustvlm.machine import (
    KERNEL_SETS,
    MACHINE_KEY,
    cpu_model,
    forced_kernels,
    machine_line,
    machine_record,
    vector_flags,
    write_results_json,
)

ROOT = Path(__file__).resolve().parents[1]
CPUINFO = Path("/proc/cpuinfo")


def _first_cpu() -> dict[str, str]:
    """The first processor block of /proc/cpuinfo as {key: value}, read line by line."""
    block: dict[str, str] = {}
    for line in CPUINFO.read_text().splitlines():
        if not line.strip():
            if block:
                break
            continue
        key, _, value = line.partition(":")
        block[key.strip()] = value.strip()
    return block


@pytest.mark.skipif(not CPUINFO.is_file(), reason="no /proc/cpuinfo on this system")
def test_the_cpu_and_its_vector_flags_are_those_of_proc_cpuinfo():
    cpu = _first_cpu()
    record = machine_record()
    assert record["cpu"] == cpu["model name"]
    flags = set(cpu["flags"].split())
    assert set(record["vector"]) == {f for f in flags if f == "avx2" or f.startswith(("avx512", "amx"))}
    assert ("avx2" in flags) == ("avx2" in record["vector"])


def test_cpu_text_parsing_on_a_made_up_cpuinfo():
    text = "processor\t: 0\nmodel name\t: Made Up CPU 9000\nflags\t\t: fpu sse avx avx2 avx512f avx512vl amx_tile\n\n"
    assert cpu_model(text) == "Made Up CPU 9000"
    assert vector_flags(text) == ["amx_tile", "avx2", "avx512f", "avx512vl"]
    assert vector_flags("") == []


def test_torch_threads_versions_and_kernels_are_recorded(monkeypatch):
    before = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        record = machine_record()
        assert record["torch"]["threads"] == 1
        assert record["torch"]["capability"] == torch.backends.cpu.get_cpu_capability()
    finally:
        torch.set_num_threads(before)
    versions = record["versions"]
    assert (versions["torch"], versions["numpy"], versions["Pillow"], versions["transformers"]) == (
        torch.__version__, numpy.__version__, PIL.__version__, transformers.__version__)
    assert versions["python"] == ".".join(map(str, sys.version_info[:3]))
    for name in KERNEL_SETS["avx2"]:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    record = machine_record()
    assert record["kernels"] == "native" and record["kernels_env"] == {}
    assert record["threads_env"] == {"OMP_NUM_THREADS": "2"}
    json.dumps(record)  # JSON-able


def test_forced_kernels_names_the_set_the_environment_forces():
    assert forced_kernels({}) == "native"
    assert forced_kernels(dict(KERNEL_SETS["avx2"])) == "avx2"
    assert forced_kernels({"ATEN_CPU_CAPABILITY": "avx2"}) == "custom"  # MKL and oneDNN left native


def test_the_blas_comes_from_threadpoolctl_or_numpy_config(monkeypatch):
    threadpoolctl = pytest.importorskip("threadpoolctl")
    apis = {lib["internal_api"] for lib in threadpoolctl.threadpool_info() if lib["user_api"] == "blas"}
    assert {lib["internal_api"] for lib in machine_record()["blas"] if lib["user_api"] == "blas"} == apis
    monkeypatch.setitem(sys.modules, "threadpoolctl", None)  # as if not installed
    [blas] = machine_record()["blas"]
    assert blas["internal_api"] == numpy.show_config(mode="dicts")["Build Dependencies"]["blas"]["name"]


def test_the_commit_is_the_checkouts():
    if not (ROOT / ".git").exists():
        pytest.skip("not a git checkout")
    head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short=7", "HEAD"], capture_output=True,
                          text=True, check=True).stdout.strip()
    assert machine_record()["commit"].removesuffix("+changes") == head


def test_results_json_carries_the_record_under_one_key(tmp_path):
    path = write_results_json(tmp_path, {"quick": True, "score": 0.5})
    written = json.loads(path.read_text())
    assert path == tmp_path / "results.json"
    assert {k: v for k, v in written.items() if k != MACHINE_KEY} == {"quick": True, "score": 0.5}
    assert written[MACHINE_KEY]["cpu"] == machine_record()["cpu"]


def test_the_machine_line_is_one_line_naming_what_matters():
    record = {"cpu": "Made Up CPU", "vector": ["avx2", "avx512f"], "torch": {"capability": "AVX2", "threads": 2,
              "blas": "mkl"}, "kernels": "avx2", "blas": [{"user_api": "blas", "internal_api": "openblas",
              "version": "0.3.31", "architecture": "SkylakeX"}, {"user_api": "openmp", "internal_api": "openmp"}],
              "versions": {"torch": "2.13.0", "numpy": "2.4.6"}, "commit": "abc1234"}
    assert machine_line(record) == ("Made Up CPU, AVX-512, 2 threads, avx2 kernels (torch AVX2), torch 2.13.0, "
                                    "numpy 2.4.6, openblas 0.3.31 SkylakeX, torch BLAS mkl, commit abc1234")
    assert "\n" not in machine_line(machine_record())
    assert machine_line(None) == "not recorded"
