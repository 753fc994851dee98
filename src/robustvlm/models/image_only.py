"""Processors of video-capable VLMs (Qwen2-VL, Qwen2.5-VL, Qwen3-VL, InternVL, LLaVA-OneVision)
without their video processor.

transformers' video processors need torchvision, which robustvlm does not depend on (there is
no CPU wheel of it here; the image processors have PIL backends). robustvlm never sends video,
so where torchvision is missing these processors are built and loaded without that part: a
subclass with the same class name (a folder it saves names the real class and loads anywhere
transformers can load it) whose only sub-processors are the image processor and the tokenizer.
transformers offers no switch for this, hence the subclass.
"""

from __future__ import annotations

from functools import cache
from typing import Any

import transformers
from transformers import ProcessorMixin
from transformers.utils import is_torchvision_available

VIDEO = "video_processor"


def needs_video_processor(processor_class: type[ProcessorMixin]) -> bool:
    """True when `processor_class` expects a video processor among its parts."""
    return VIDEO in processor_class.get_attributes()


@cache
def image_only(processor_class: type[ProcessorMixin]) -> type[ProcessorMixin]:
    """`processor_class` itself where torchvision is installed or it takes no video processor;
    otherwise its subclass without the video processor (same name; `__call__` with images and
    text works as the original's)."""
    if is_torchvision_available() or not needs_video_processor(processor_class):
        return processor_class
    parts = [name for name in processor_class.get_attributes() if name != VIDEO]
    return type(processor_class.__name__, (processor_class,), {
        "get_attributes": classmethod(lambda cls: list(parts)),
        "__module__": __name__,
        "__doc__": f"{processor_class.__name__} without its video processor (torchvision is not installed).",
    })


def load_image_only_processor(name_or_path: str, **kwargs: Any) -> ProcessorMixin | None:
    """The processor of `name_or_path` loaded without its video processor, or None when its
    class needs none (then AutoProcessor's failure had another cause)."""
    config, _ = ProcessorMixin.get_processor_dict(name_or_path, **kwargs)
    processor_class = getattr(transformers, str(config.get("processor_class")), None)
    if processor_class is None or not needs_video_processor(processor_class):
        return None
    return image_only(processor_class).from_pretrained(name_or_path, **kwargs)
