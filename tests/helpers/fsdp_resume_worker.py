"""Run the toy regression task under FSDP2 on CPU (gloo), for training/test_loop.py's resume test.

Usage: torchrun --nproc_per_node 2 tests/helpers/fsdp_resume_worker.py OUT_DIR [--resume]

Accelerate turns its FSDP plugin on only on accelerators: on a CPU it silently falls back to
DDP. This harness forces FSDP2 by setting the distributed type in Accelerate's shared state (both
copies, as every later state lookup copies the shared one back), so the training loop's
save_state / load_state path runs with sharded model and optimizer states.
"""

import sys
from pathlib import Path

import torch
from accelerate import Accelerator
from accelerate.state import PartialState
from accelerate.utils import DistributedType, FullyShardedDataParallelPlugin

import robustvlm.training.loop as loop

sys.path.insert(0, str(Path(__file__).parent))
from toy_tasks import SETTINGS, TRAIN, RegressionTask  # noqa: E402


def fsdp2_accelerator(cfg, out_dir):
    plugin = FullyShardedDataParallelPlugin(
        fsdp_version=2, reshard_after_forward=True, state_dict_type="SHARDED_STATE_DICT"
    )
    accelerator = Accelerator(cpu=True, fsdp_plugin=plugin, project_dir=str(out_dir))
    for state in (PartialState._shared_state, accelerator.state.__dict__):
        state["distributed_type"] = DistributedType.FSDP
    accelerator.state.fsdp_plugin = plugin
    return accelerator


if __name__ == "__main__":
    torch.set_num_threads(1)
    loop.make_accelerator = fsdp2_accelerator
    out, resume = Path(sys.argv[1]), "--resume" in sys.argv
    task = RegressionTask()
    loop.run_training(task, TRAIN, out, settings=SETTINGS, resume=resume, progress=False)
    if PartialState().is_main_process:
        (out / "distributed_type.txt").write_text(PartialState().distributed_type.value)
