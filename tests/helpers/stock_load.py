"""Load saved model folders with stock transformers alone and answer one prompt greedily, as a
colleague without robustvlm would (robustvlm is blocked from being imported).

usage: python stock_load.py IMAGE PROMPT MAX_NEW_TOKENS FOLDER...

Prints one JSON object per folder, one a line: "answer" (the greedy reply, stripped),
"top_logits" ([token id, logit] of the 5 likeliest first tokens), "processor_error" (what plain
AutoProcessor.from_pretrained raised, or null), and the classes that loaded. Where AutoProcessor
fails (a video processor that needs torchvision), the processor loads without its video
processor: the three-line subclass of docs/guides/saved-models.md, its image processor loaded
directly by its own class.
"""

from __future__ import annotations

import importlib.abc
import json
import sys
from pathlib import Path


class _BlockRobustVLM(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "robustvlm" or name.startswith("robustvlm."):
            raise ImportError(f"this process must not import robustvlm (asked for {name})")
        return None


sys.meta_path.insert(0, _BlockRobustVLM())

import torch  # noqa: E402
import transformers  # noqa: E402
from PIL import Image  # noqa: E402
from transformers import AutoModelForImageTextToText, AutoProcessor  # noqa: E402


def image_only_processor(folder: Path):
    """The folder's processor class without its video processor (docs/guides/saved-models.md)."""
    processor_class = getattr(transformers, json.loads((folder / "processor_config.json").read_text())["processor_class"])

    class ImageOnly(processor_class):
        @classmethod
        def get_attributes(cls):
            return ["image_processor", "tokenizer"]

    return ImageOnly.from_pretrained(folder)


def answer(path: Path, image: str, prompt: str, max_new_tokens: int) -> dict:
    """What loading `path` gives (module doc)."""
    try:
        processor, error = AutoProcessor.from_pretrained(path), None
    except ImportError as exc:
        processor, error = image_only_processor(path), str(exc)
    model = AutoModelForImageTextToText.from_pretrained(path)
    messages = [{"role": "user", "content": [{"type": "image"}, {"type": "text", "text": prompt}]}]
    text = processor.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    inputs = processor(text=[text], images=[[Image.open(image).convert("RGB")]], return_tensors="pt")
    with torch.no_grad():
        top = torch.topk(model(**inputs).logits[0, -1], 5)
    out = model.generate(**inputs, do_sample=False, max_new_tokens=max_new_tokens)
    reply = processor.batch_decode(out[:, inputs["input_ids"].shape[1]:], skip_special_tokens=True)[0]
    return {
        "answer": reply.strip(), "processor_error": error,
        "top_logits": [[int(i), float(v)] for v, i in zip(top.values, top.indices)],
        "processor": type(processor).__mro__[1 if error else 0].__name__,
        "image_processor": type(processor.image_processor).__name__, "model": type(model).__name__,
        "robustvlm_imported": any(name.split(".")[0] == "robustvlm" for name in sys.modules),
    }


if __name__ == "__main__":
    image, prompt, max_new_tokens, *folders = sys.argv[1:]
    for folder in folders:
        print(json.dumps(answer(Path(folder), image, prompt, int(max_new_tokens))))
