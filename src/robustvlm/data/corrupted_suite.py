"""A corruption suite for any image data: ImageNet-C's corruptions at five severities
(`data.corruptions`) applied to every picture of an image folder.

    SOURCE/CLASS/*.{png,jpg,jpeg,bmp}      any class-per-folder image set (each side >= 32 px)
 -> OUT/clean/CLASS/NAME.png                 the pictures as RGB PNGs (the reference domain)
    OUT/<corruption>-<severity>/CLASS/NAME.png
    OUT/manifest.json

The layout is a domain suite (DOMAIN/CLASS/*.png, as `data synth` writes them), so `mc build`,
`icl eval` and the robustness workflows read it; picture NAME of a class is the same source picture
in every domain (paired). A picture's random draws are seeded by (seed, corruption, severity,
class, picture), so a suite is reproducible and a domain does not depend on the others. Each
domain folder is written under a temporary name and renamed when complete; a rerun skips the
finished ones (a killed run resumes).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from PIL import Image, UnidentifiedImageError

from robustvlm.data.corruptions import COMMON, SEVERITIES, VALIDATION, corrupt
from robustvlm.data.synth.writer import save_png
from robustvlm.errors import ConfigError, DataError
from robustvlm.runs import atomic_folder

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp")


def source_pictures(source: Path) -> dict[str, list[Path]]:
    """{class folder name: its picture files, sorted}; a ConfigError when there are none."""
    if not source.is_dir():
        raise ConfigError(f"corruption suite: {source} is not a folder of class folders")
    classes = {
        d.name: sorted(f for f in d.iterdir() if f.suffix.lower() in IMAGE_SUFFIXES)
        for d in sorted(source.iterdir()) if d.is_dir() and not d.name.startswith(".")
    }
    classes = {name: files for name, files in classes.items() if files}
    if not classes:
        raise ConfigError(f"corruption suite: {source} holds no CLASS/*.png (or .jpg) pictures")
    return classes


def read_picture(path: Path) -> Image.Image:
    """The picture at `path` as RGB (a DataError naming the file when it cannot be read)."""
    try:
        with Image.open(path) as img:
            return img.convert("RGB")
    except (UnidentifiedImageError, OSError) as err:
        raise DataError(f"cannot read the picture: {err}", str(path)) from err


def picture_seed(seed: int, corruption: str, severity: int, class_index: int, index: int) -> int:
    """The seed of one picture's corruption draws (a 32-bit integer)."""
    name_index = (*COMMON, *VALIDATION).index(corruption)
    return int(np.random.SeedSequence([seed, name_index, severity, class_index, index]).generate_state(1)[0])


def write_corrupted_suite(source: Path, out: Path, *, corruptions: Sequence[str] = COMMON,
                          severities: Sequence[int] = SEVERITIES, seed: int = 0) -> Path:
    """Write the suite of the module doc and return OUT/manifest.json."""
    classes = source_pictures(source)
    pictures = {name: [read_picture(f) for f in files] for name, files in classes.items()}
    for name, files in classes.items():
        for f, picture in zip(files, pictures[name]):
            if min(picture.size) < 32:
                raise DataError(f"ImageNet-C corruptions need pictures of at least 32x32 px, got "
                                f"{picture.size[0]}x{picture.size[1]}", str(f))
    out.mkdir(parents=True, exist_ok=True)
    domains = ["clean", *(f"{c}-{s}" for c in corruptions for s in severities)]
    for domain in domains:
        if (out / domain).is_dir():
            continue  # finished by an earlier run
        with atomic_folder(out / domain) as tmp:
            for class_index, (name, files) in enumerate(classes.items()):
                (tmp / name).mkdir(parents=True)
                for i, (f, picture) in enumerate(zip(files, pictures[name])):
                    if domain != "clean":
                        corruption, severity = domain.rsplit("-", 1)
                        picture = corrupt(picture, corruption, int(severity),
                                          picture_seed(seed, corruption, int(severity), class_index, i))
                    save_png(picture, tmp / name / f"{f.stem}.png")
    manifest = {"benchmark": "corrupted", "source": str(source), "seed": seed, "layout": "DOMAIN/CLASS/NAME.png",
                "corruptions": list(corruptions), "severities": list(severities), "domains": domains,
                "classes": list(classes), "pictures_per_class": {n: len(f) for n, f in classes.items()},
                "paired": "picture NAME of a class is the same source picture in every domain",
                "definitions": "ImageNet-C (Hendrycks & Dietterich 2019) via imagecorruptions 1.1.2"}
    path = out / "manifest.json"
    path.write_text(json.dumps(manifest, indent=2), encoding="utf-8")
    return path
