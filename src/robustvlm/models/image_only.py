"""Processors of video-capable VLMs (Qwen2-VL, Qwen2.5-VL, Qwen3-VL, InternVL, LLaVA-OneVision)
without their video processor.

transformers' video processors need torchvision, which robustvlm does not depend on (there is
no CPU wheel of it here; the image processors have PIL backends). robustvlm never sends video,
so where torchvision is missing these processors are built and loaded without that part: a
subclass with the same class name whose only sub-processors are the image processor and the
tokenizer. transformers offers no switch for this, hence the subclass.

A folder such a processor saves still carries the video processor's settings, as
`video_preprocessor_config.json` (`video_processor_dict`: the original checkpoint's, or for a
processor built in memory the image processor's settings under the family's video processor
class, which is what transformers itself reads for a checkpoint without a video config). So the
folder names the real processor class and loads with plain `AutoProcessor.from_pretrained`
wherever transformers and torchvision are installed; without torchvision, AutoProcessor fails
there with transformers' "... requires the Torchvision library" ImportError, and this module
(or the three-line subclass in docs/guides/saved-models.md) loads it.
"""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path
from typing import Any

import transformers
from transformers import BaseImageProcessor, ProcessorMixin
from transformers.utils import is_torchvision_available
from transformers.video_processing_utils import BaseVideoProcessor

from robustvlm.errors import ConfigError

VIDEO = "video_processor"
VIDEO_CONFIG_FILE = "video_preprocessor_config.json"  # transformers' VIDEO_PROCESSOR_NAME


def needs_video_processor(processor_class: type[ProcessorMixin]) -> bool:
    """True when `processor_class` expects a video processor among its parts."""
    return VIDEO in processor_class.get_attributes()


@cache
def image_only(processor_class: type[ProcessorMixin]) -> type[ProcessorMixin]:
    """`processor_class` itself where torchvision is installed or it takes no video processor;
    otherwise its subclass without the video processor (same name; `__call__` with images and
    text works as the original's; `save_pretrained` also writes `video_processor_dict`)."""
    if is_torchvision_available() or not needs_video_processor(processor_class):
        return processor_class
    parts = [name for name in processor_class.get_attributes() if name != VIDEO]

    def save_pretrained(self: Any, save_directory: str | Path, *args: Any, **kwargs: Any) -> Any:
        if self.video_processor_dict is None:
            raise ConfigError(f"{type(self).__name__} without its video processor has no video processor "
                              f"settings to save (set video_processor_dict)")
        saved = processor_class.save_pretrained(self, save_directory, *args, **kwargs)
        text = json.dumps(self.video_processor_dict, indent=2, sort_keys=True) + "\n"
        (Path(save_directory) / VIDEO_CONFIG_FILE).write_text(text, encoding="utf-8")
        return saved

    return type(processor_class.__name__, (processor_class,), {
        "get_attributes": classmethod(lambda cls: list(parts)),
        "video_processor_dict": None,  # what save_pretrained writes as VIDEO_CONFIG_FILE
        "save_pretrained": save_pretrained,
        "__module__": __name__,
        "__doc__": f"{processor_class.__name__} without its video processor (torchvision is not installed).",
    })


def implied_video_config(image_processor: BaseImageProcessor, video_processor_type: str | None) -> dict[str, Any]:
    """The video processor settings of a processor built without one: the image processor's
    (patch and merge sizes, pixel bounds, normalisation), as transformers itself falls back to
    them for a checkpoint without a video config, under `video_processor_type` (e.g.
    "Qwen2VLVideoProcessor"; None: none named, and transformers picks the class by the model's
    `model_type`)."""
    settings = image_processor.to_dict()
    settings.pop("image_processor_type", None)
    return settings if video_processor_type is None else {**settings, "video_processor_type": video_processor_type}


def load_image_only_processor(location: str, **kwargs: Any) -> ProcessorMixin | None:
    """The processor of `location` loaded without its video processor (keeping the
    checkpoint's video processor settings, which it saves again; a folder without them gets
    those its image processor implies), or None when its class needs none (then AutoProcessor's
    failure had another cause)."""
    config, _ = ProcessorMixin.get_processor_dict(location, **kwargs)
    processor_class = getattr(transformers, str(config.get("processor_class")), None)
    if processor_class is None or not needs_video_processor(processor_class):
        return None
    processor: Any = image_only(processor_class).from_pretrained(location, **kwargs)
    try:
        processor.video_processor_dict, _ = BaseVideoProcessor.get_video_processor_dict(location, **kwargs)
    except OSError:  # a folder saved without them (by an earlier robustvlm)
        processor.video_processor_dict = implied_video_config(processor.image_processor, None)
    return processor
