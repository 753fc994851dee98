"""`robustvlm demo --kernels avx2`: the same code and seeds on other float kernels (a second machine
on one box), and the machine record saying which kernels ran."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from robustvlm.cli import main
from robustvlm.machine import KERNEL_SETS, KERNEL_VARIABLES, kernel_environment, vector_flags

ROOT = Path(__file__).resolve().parents[1]
AVX512 = "avx512f" in vector_flags()
needs_avx512 = pytest.mark.skipif(not AVX512, reason="the CPU has no AVX-512: AVX2 kernels are its own kernels")
PROBE = """
import json, torch
from robustvlm.machine import machine_record
g = torch.Generator().manual_seed(0)
a, b = torch.randn(64, 257, generator=g), torch.randn(257, 63, generator=g)
values = [*(a @ b).sum(1).tolist(), *torch.softmax(a, 1).sum(0).tolist(), *torch.tanh(a).sum(0).tolist()]
print(json.dumps({"values": values, "machine": machine_record()}))
"""


def _probe(kernels: str) -> dict:
    env = {**kernel_environment(kernels), "PYTHONPATH": str(ROOT / "src")}
    done = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, check=True)
    return json.loads(done.stdout)


@needs_avx512
def test_avx2_kernels_change_float_digits_and_the_record_says_which_ran():
    native, avx2 = _probe("native"), _probe("avx2")
    assert native["machine"]["kernels"] == "native" and native["machine"]["torch"]["capability"] == "AVX512"
    assert avx2["machine"]["kernels"] == "avx2" and avx2["machine"]["torch"]["capability"] == "AVX2"
    assert avx2["machine"]["kernels_env"] == KERNEL_SETS["avx2"]
    changed = sum(x != y for x, y in zip(native["values"], avx2["values"]))
    assert 0 < changed < len(native["values"])  # rounding moves, the numbers stay the same to ~6 digits
    assert all(abs(x - y) <= 1e-4 * max(1.0, abs(x)) for x, y in zip(native["values"], avx2["values"]))


def test_the_option_reruns_the_command_on_those_kernels_once_torch_is_loaded(monkeypatch, tmp_path):
    for name in KERNEL_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    calls = []
    monkeypatch.setattr(subprocess, "run", lambda cmd, env, check: calls.append((cmd, env))
                        or subprocess.CompletedProcess(cmd, 3))
    argv = ["demo", "reward", "--quick", "--kernels", "avx2", "--out", str(tmp_path / "out")]
    assert main(argv) == 3  # the new process's exit status
    [(cmd, env)] = calls
    assert cmd == [sys.executable, "-m", "robustvlm", *argv]
    assert {k: env[k] for k in KERNEL_VARIABLES} == KERNEL_SETS["avx2"]
    assert not (tmp_path / "out").exists()  # this process ran nothing


def test_the_option_sets_the_variables_in_process_before_torch_loads(monkeypatch, tmp_path):
    for name in KERNEL_VARIABLES:
        monkeypatch.setenv(name, "placeholder")  # restored after the test
    monkeypatch.delitem(sys.modules, "torch")
    ran = {}
    from robustvlm.experiments import EXPERIMENTS

    monkeypatch.setattr(type(EXPERIMENTS["reward"]), "execute",
                        lambda self, plan, out: ran.update({k: os.environ.get(k) for k in KERNEL_VARIABLES}))
    assert main(["demo", "reward", "--quick", "--kernels", "avx2", "--out", str(tmp_path / "o")]) == 0
    assert ran == KERNEL_SETS["avx2"]
    assert main(["demo", "reward", "--quick", "--kernels", "native", "--out", str(tmp_path / "o")]) == 0
    assert ran == dict.fromkeys(KERNEL_VARIABLES)


def _floats(value, path=""):
    """{json path: float} of every float in a results.json."""
    if isinstance(value, dict):
        return {k: v for key, item in value.items() for k, v in _floats(item, f"{path}/{key}").items()}
    if isinstance(value, list):
        return {k: v for i, item in enumerate(value) for k, v in _floats(item, f"{path}/{i}").items()}
    return {path: value} if isinstance(value, float) else {}


@needs_avx512
@pytest.mark.slow
@pytest.mark.e2e
def test_demo_reward_quick_on_avx2_kernels_moves_its_figures_digits(tmp_path):
    """The issue's measurement: same code, data and seeds, other kernels, other float digits."""
    runs = {}
    for kernels in ("native", "avx2"):
        out = tmp_path / kernels
        subprocess.run([sys.executable, "-m", "robustvlm", "demo", "reward", "--quick", "--kernels", kernels,
                        "--out", str(out)], env={**os.environ, "PYTHONPATH": str(ROOT / "src")}, check=True,
                       capture_output=True)
        runs[kernels] = json.loads((out / "results.json").read_text())
    assert runs["avx2"]["machine"]["kernels"] == "avx2" and runs["avx2"]["machine"]["torch"]["capability"] == "AVX2"
    assert runs["native"]["machine"]["torch"]["capability"] == "AVX512"
    native, avx2 = (_floats({k: v for k, v in r.items() if k not in ("machine", "seconds")}) for r in runs.values())
    assert native.keys() == avx2.keys()
    assert any(native[k] != avx2[k] for k in native)
