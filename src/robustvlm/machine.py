"""What measured a result: the machine, its float kernels, the package versions and the commit.

The same code, data and seeds give other float digits on another CPU (its vector units, its BLAS
and oneDNN kernels, its thread count), and training amplifies them; so every run's results.json
records `machine_record()` under the key `machine` (`write_results_json`), as does every other
measurement command's JSON result (`with_machine`), and a figure block shows it as one line
(`machine_line`).

The record (JSON-able):

- `cpu`: the CPU model (/proc/cpuinfo's `model name`, else `platform.processor()`), `vector`:
  its AVX2 / AVX-512 / AMX flags, `cores`: logical CPUs this process may use;
- `torch`: `capability` (the vector level torch's kernels dispatch to,
  `torch.backends.cpu.get_cpu_capability()`), `threads` (`torch.get_num_threads()`) and `blas`
  (torch's own BLAS, from its build settings); null when the run never loaded torch;
- `threads_env`: OMP_NUM_THREADS / MKL_NUM_THREADS / OPENBLAS_NUM_THREADS as set;
- `kernels`: "native", or the name of the forced kernel set (`KERNEL_SETS`, `--kernels`), and
  `kernels_env`: the variables that force it, as set;
- `blas`: the BLAS / OpenMP libraries loaded in this process (threadpoolctl: its API, version,
  architecture, threads), or numpy's build configuration where threadpoolctl is not installed;
- `versions`: python, torch, transformers, numpy, Pillow, robustvlm;
- `commit`: the git commit of the source checkout robustvlm runs from (with "+changes" when its
  src/ differs), null outside a checkout (then `versions.robustvlm` says which release).
"""

from __future__ import annotations

import json
import os
import platform
import re
import subprocess
import sys
from collections.abc import Mapping
from importlib import metadata
from pathlib import Path
from typing import Any

MACHINE_KEY = "machine"
"""The key of results.json that holds the record."""
KERNEL_SETS: dict[str, dict[str, str]] = {
    "native": {},
    "avx2": {"ATEN_CPU_CAPABILITY": "avx2", "MKL_ENABLE_INSTRUCTIONS": "AVX2", "ONEDNN_MAX_CPU_ISA": "AVX2"},
}
"""`--kernels NAME` -> the environment that makes torch, MKL and oneDNN use that kernel set: on an
AVX-512 CPU, "avx2" is a second machine on one box (other float rounding, same code and seeds).
The variables are read once, when torch first dispatches, so they must be set before it loads."""
KERNEL_VARIABLES = tuple(sorted({name for env in KERNEL_SETS.values() for name in env}))
THREAD_VARIABLES = ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")
PACKAGES = {"torch": "torch", "transformers": "transformers", "numpy": "numpy", "Pillow": "pillow",
            "robustvlm": "robustvlm"}
_VECTOR = re.compile(r"^(avx2|avx512\w*|amx\w*)$")


def cpu_model(cpuinfo: str | None = None) -> str:
    """The CPU's model name (`cpuinfo`: the text of /proc/cpuinfo, read when None)."""
    text = _cpuinfo() if cpuinfo is None else cpuinfo
    found = re.search(r"^model name\s*:\s*(.+)$", text, re.M)
    return found[1].strip() if found else (platform.processor() or platform.machine() or "unknown")


def vector_flags(cpuinfo: str | None = None) -> list[str]:
    """The AVX2 / AVX-512 / AMX flags of the first CPU in /proc/cpuinfo, sorted ([] elsewhere)."""
    text = _cpuinfo() if cpuinfo is None else cpuinfo
    found = re.search(r"^flags\s*:\s*(.+)$", text, re.M)
    return sorted(f for f in found[1].split() if _VECTOR.match(f)) if found else []


def forced_kernels(environ: Mapping[str, str] | None = None) -> str:
    """The kernel set `environ` (default: this process's) forces: "native" when none of the
    variables is set, a `KERNEL_SETS` name when they match one, else "custom"."""
    env = os.environ if environ is None else environ
    given = {name: env[name] for name in KERNEL_VARIABLES if name in env}
    return next((name for name, wanted in KERNEL_SETS.items() if wanted == given), "custom")


def kernel_environment(name: str, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """`environ` (default: this process's) with kernel set `name` forced: its variables set and
    the other sets' removed ("native" removes them all)."""
    env = {k: v for k, v in (os.environ if environ is None else environ).items() if k not in KERNEL_VARIABLES}
    return {**env, **KERNEL_SETS[name]}


def machine_record() -> dict[str, Any]:
    """What this process runs on (module doc); torch is read only when the run has loaded it."""
    return {
        "cpu": cpu_model(),
        "vector": vector_flags(),
        "cores": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count(),
        "torch": _torch() if "torch" in sys.modules else None,
        "threads_env": {name: os.environ[name] for name in THREAD_VARIABLES if name in os.environ},
        "kernels": forced_kernels(),
        "kernels_env": {name: os.environ[name] for name in KERNEL_VARIABLES if name in os.environ},
        "blas": _blas(),
        "versions": {"python": platform.python_version(), **{shown: _version(dist) for shown, dist in PACKAGES.items()}},
        "commit": source_commit(),
    }


def machine_line(record: Mapping[str, Any] | None) -> str:
    """The record as one line for a figure block ("not recorded" for results without one):
    CPU, vector level, threads, kernels, torch / numpy versions, BLAS, commit."""
    if not record:
        return "not recorded"
    vector = record.get("vector") or []
    level = "AVX-512" if any(f.startswith("avx512") for f in vector) else "AVX2" if "avx2" in vector else "no AVX2"
    torch = record.get("torch") or {}
    versions = record.get("versions") or {}
    parts = [str(record.get("cpu", "unknown CPU")), level]
    if torch:
        parts.append(f"{torch.get('threads')} threads")
    kernels = record.get("kernels", "native")
    parts.append(f"{kernels} kernels" + (f" (torch {torch['capability']})" if torch.get("capability") else ""))
    parts += [f"{name} {versions[name]}" for name in ("torch", "numpy") if versions.get(name)]
    parts += sorted({_blas_name(b) for b in record.get("blas") or []  # load order varies from run to run
                     if isinstance(b, Mapping) and b.get("user_api") == "blas"})
    if torch.get("blas"):
        parts.append(f"torch BLAS {torch['blas']}")
    parts.append(f"commit {record['commit']}" if record.get("commit") else f"robustvlm {versions.get('robustvlm')}")
    return ", ".join(parts)


def with_machine(content: Mapping[str, Any]) -> dict[str, Any]:
    """`content` with this process's `machine_record()` under `MACHINE_KEY` (replacing one
    already there): what a measurement command writes as its JSON result (icl_results.json,
    diagnosis.json, defined_labels.json, matrix.json, a zoo member's zoo_member.json, ...)."""
    return {**content, MACHINE_KEY: machine_record()}


def write_results_json(folder: str | Path, results: Mapping[str, Any]) -> Path:
    """Write `results` as `folder`/results.json with this process's `machine_record()` under
    `MACHINE_KEY` (`with_machine`); returns the path."""
    path = Path(folder) / "results.json"
    path.write_text(json.dumps(with_machine(results), indent=2) + "\n", encoding="utf-8")
    return path


def source_commit() -> str | None:
    """The short commit of the git checkout this package's source lies in ("+changes" appended
    when its src/ differs from it); None outside a checkout or without git."""
    root = Path(__file__).resolve().parents[2]
    if not (root / ".git").exists():
        return None
    try:
        commit = _git(root, "rev-parse", "--short=7", "HEAD")
        dirty = _git(root, "status", "--porcelain", "--", "src")
    except (OSError, subprocess.CalledProcessError):
        return None
    return commit + ("+changes" if dirty else "")


def _git(root: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, check=True).stdout.strip()


def _cpuinfo() -> str:
    try:
        return Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def _torch() -> dict[str, Any]:
    import torch

    found = re.search(r"BLAS_INFO=(\w+)", torch.__config__.show())
    return {"capability": torch.backends.cpu.get_cpu_capability(), "threads": torch.get_num_threads(),
            "blas": found[1] if found else None}


def _blas() -> list[dict[str, Any]]:
    """The BLAS and OpenMP libraries loaded in this process (threadpoolctl), else numpy's build
    configuration of its BLAS."""
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        import numpy

        config = numpy.show_config(mode="dicts") or {}
        blas = config.get("Build Dependencies", {}).get("blas", {})
        return [{"user_api": "blas", "internal_api": blas.get("name"), "version": blas.get("version"),
                 "source": "numpy build configuration"}]
    keep = ("user_api", "internal_api", "version", "architecture", "num_threads")
    return [{key: lib.get(key) for key in keep} for lib in threadpool_info()]


def _blas_name(lib: Mapping[str, Any]) -> str:
    arch = f" {lib['architecture']}" if lib.get("architecture") else ""
    return f"{lib.get('internal_api')} {lib.get('version')}{arch}"


def _version(dist: str) -> str | None:
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None
