"""Run one training under `accelerate launch` (DDP, DeepSpeed ZeRO-2, ...) from a parent process.

A study trains in its own process by default. With a `launch` section it starts each training as
`python -m accelerate.commands.launch --config_file CONFIG [--num_processes N] -m robustvlm.cli
train RUN.yaml --out DIR --resume`, so the paper's ZeRO-2 / bf16 setup applies, and evaluates the
result itself afterwards. The child's output goes straight to the terminal.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from robustvlm.config import RunConfig
from robustvlm.errors import ConfigError, RobustVLMError
from robustvlm.runs import write_settings


class LaunchConfig(BaseModel):
    """How a study starts each training: an Accelerate config file and, optionally, processes."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    accelerate_config: str = Field(description="path of an `accelerate launch --config_file` YAML")
    num_processes: int | None = Field(None, ge=1, description="overrides the file's num_processes")


def launch_command(launch: LaunchConfig, run_config: Path, out_dir: Path) -> list[str]:
    """The argv that trains `run_config` into `out_dir` under `accelerate launch` (resuming)."""
    command = [sys.executable, "-m", "accelerate.commands.launch", "--config_file", launch.accelerate_config]
    if launch.num_processes is not None:
        command += ["--num_processes", str(launch.num_processes)]
    return command + ["-m", "robustvlm.cli", "train", str(run_config), "--out", str(out_dir), "--resume"]


def launched_train(cfg: RunConfig, out_dir: Path, launch: LaunchConfig) -> Path:
    """Train `cfg` into `out_dir` in a launched child process; returns `out_dir/final`.

    The run config is written next to `out_dir` as `<out_dir>.yaml`. Raises ConfigError for a
    missing Accelerate config and RobustVLMError (with the command) when the child fails.
    """
    if not Path(launch.accelerate_config).is_file():
        raise ConfigError(f"launch.accelerate_config: {launch.accelerate_config} not found")
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    run_config = out_dir.with_suffix(".yaml")
    write_settings(cfg, run_config)
    command = launch_command(launch, run_config, out_dir)
    code = subprocess.run(command, check=False).returncode
    final = out_dir / "final"
    if code != 0 or not final.is_dir():
        raise RobustVLMError(
            f"training into {out_dir} failed (exit status {code}); re-run the study to resume, or "
            f"run the command alone to see why: {' '.join(command)}"
        )
    return final
