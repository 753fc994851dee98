"""A fine-tuned `final/` folder of every tiny family (LoRA merged and full) loads with stock
transformers in a process that never imports robustvlm, and answers as robustvlm's own loading
does; a video-capable family's folder carries its video processor settings, whatever robustvlm
built in memory without torchvision (`models.image_only`).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from PIL import Image
from transformers.utils import is_torchvision_available
from transformers.video_processing_utils import BaseVideoProcessor

from robustvlm.config import validate_config
from robustvlm.model_ref import ModelRef
from robustvlm.models.chat import ChatPrompt, encode_chats
from robustvlm.models.generate import generate_batch
from robustvlm.models.image_only import VIDEO_CONFIG_FILE
from robustvlm.models.loading import load_vlm
from robustvlm.models.tiny_families import VLM_FAMILIES
from robustvlm.workflows.finetune.train import train

HELPER = Path(__file__).resolve().parents[1] / "helpers" / "stock_load.py"
KINDS = list(VLM_FAMILIES)
VIDEO_KINDS = [kind for kind, family in VLM_FAMILIES.items() if family.video_processor]
PROMPT, NEW_TOKENS = "What colour is the shape?", 8
# the one error stock AutoProcessor may raise here: a video processor class needing torchvision
NO_TORCHVISION = re.compile(r"\s*(\w+VideoProcessor) requires the Torchvision library but it was not found")


@pytest.fixture(scope="session")
def final_folders(tmp_path_factory) -> Callable[[str], dict[str, Path]]:
    """`final_folders(kind)`: {"lora": final/, "full": final/} of two-step `train` runs of "tiny:<kind>"."""
    built: dict[str, dict[str, Path]] = {}

    def get(kind: str) -> dict[str, Path]:
        if kind not in built:
            root = tmp_path_factory.mktemp(f"stock-{kind}")
            built[kind] = {trainable: train(validate_config({
                "model": {"name": f"tiny:{kind}", "trainable": trainable,
                          "tiny": {"hidden_size": 32, "vocab_size": 320}},
                "data": {"benchmark": "spurious", "n_per_env": 4},
                "train": {"steps": 2, "lr": 3e-3, "batch_size": 4, "cpu_threads": 1},
                "eval": {"max_per_env": 1, "max_new_tokens": 2},
            }), root / trainable, progress=False).final_dir for trainable in ("lora", "full")}
        return built[kind]

    return get


def robustvlm_answer(folder: Path, image: Path) -> tuple[str, torch.Tensor]:
    """robustvlm's own loading and greedy generation (no repetition penalty) of the prompt, and
    the logits of the first answer token."""
    model, processor = load_vlm(ModelRef.folder(folder))
    messages = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": PROMPT}]}]
    batch = encode_chats(processor, [ChatPrompt(messages, [Image.open(image).convert("RGB")])])
    with torch.no_grad():
        logits = model.eval()(**batch).logits[0, -1]
    return generate_batch(model, processor, batch, max_new_tokens=NEW_TOKENS, repetition_penalty=1.0)[0], logits


def stock_answers(folders: list[Path], image: Path) -> list[dict]:
    """stock_load.py's report per folder, from a fresh process without robustvlm on its path."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run([sys.executable, str(HELPER), str(image), PROMPT, str(NEW_TOKENS), *map(str, folders)],
                          capture_output=True, text=True, env={**env, "HF_HUB_OFFLINE": "1"}, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


@pytest.mark.slow
@pytest.mark.parametrize("kind", KINDS)
def test_final_folder_loads_and_answers_with_stock_transformers(kind, final_folders, tmp_path):
    folders = final_folders(kind)
    image = tmp_path / "shape.png"
    picture = Image.new("RGB", (64, 64), "white")
    picture.paste((200, 30, 30), (16, 16, 48, 48))
    picture.save(image)
    reports = stock_answers(list(folders.values()), image)
    assert len(reports) == len(folders)
    family = VLM_FAMILIES[kind]
    for (trainable, folder), stock in zip(folders.items(), reports):
        where = f"{kind} {trainable}"
        assert not stock["robustvlm_imported"], where
        assert stock["model"] == family.model_class.__name__, where
        if family.video_processor and not is_torchvision_available():
            match = NO_TORCHVISION.match(stock["processor_error"] or "")
            assert match and match[1] == family.video_processor, f"{where}: {stock['processor_error']}"
        else:
            assert stock["processor_error"] is None, f"{where}: {stock['processor_error']}"
        answer, logits = robustvlm_answer(folder, image)
        assert stock["answer"] == answer, where  # "" where both stop at once: the logits still compare
        ids, values = zip(*stock["top_logits"])
        assert list(ids) == logits.topk(5).indices.tolist(), where
        torch.testing.assert_close(torch.tensor(values), logits[list(ids)], rtol=0, atol=1e-4)


@pytest.mark.parametrize("kind", KINDS)
def test_saved_processor_carries_its_video_processor_settings(kind, tiny_vlms, tmp_path):
    model, processor = tiny_vlms(kind)
    processor.save_pretrained(tmp_path)
    video_processor = VLM_FAMILIES[kind].video_processor
    assert (tmp_path / VIDEO_CONFIG_FILE).is_file() == (video_processor is not None)
    if video_processor is None:
        return
    # found where stock transformers looks, naming the family's class, with the model's geometry
    settings, _ = BaseVideoProcessor.get_video_processor_dict(str(tmp_path))
    assert settings["video_processor_type"] == video_processor
    image_settings = json.loads((tmp_path / "processor_config.json").read_text())["image_processor"]
    assert {k: settings[k] for k in image_settings if k != "image_processor_type"} == {
        k: v for k, v in image_settings.items() if k != "image_processor_type"}
    if kind.startswith("qwen"):
        vision = model.config.vision_config
        assert (settings["patch_size"], settings["merge_size"], settings["temporal_patch_size"]) == (
            vision.patch_size, vision.spatial_merge_size, vision.temporal_patch_size)


@pytest.mark.skipif(is_torchvision_available(), reason="processors load whole where torchvision is installed")
def test_a_checkpoints_own_video_settings_are_saved_again(tiny_vlms, tmp_path):
    """A hub-like folder's video config (here with settings no image processor implies) survives
    robustvlm's loading without torchvision and saving; a folder without one (saved by an earlier
    robustvlm) gets the settings its image processor implies, the class left to the model type."""
    model, processor = tiny_vlms("qwen2_vl")
    original, copy, legacy, legacy_copy = (tmp_path / name for name in ("hub", "copy", "legacy", "legacy_copy"))
    for folder in (original, legacy):
        model.save_pretrained(folder)
        processor.save_pretrained(folder)
    own = {"video_processor_type": "Qwen2VLVideoProcessor", "fps": 2.0, "max_frames": 77, "patch_size": 8,
           "merge_size": 2, "temporal_patch_size": 2, "size": {"shortest_edge": 4096, "longest_edge": 8192}}
    (original / VIDEO_CONFIG_FILE).write_text(json.dumps(own))
    (legacy / VIDEO_CONFIG_FILE).unlink()
    for source, target in ((original, copy), (legacy, legacy_copy)):
        _, loaded = load_vlm(ModelRef.folder(source))
        loaded.save_pretrained(target)
    assert json.loads((copy / VIDEO_CONFIG_FILE).read_text()) == own
    implied = json.loads((legacy_copy / VIDEO_CONFIG_FILE).read_text())
    assert "video_processor_type" not in implied and implied["patch_size"] == model.config.vision_config.patch_size
