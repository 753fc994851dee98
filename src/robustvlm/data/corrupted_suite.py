"""A corruption suite for any image data: ImageNet-C's corruptions at five severities
(`data.corruptions`) applied to every picture of an image folder.

    SOURCE/CLASS/*.{png,jpg,jpeg,bmp}      any class-per-folder image set (each side >= 32 px)
 -> OUT/clean/CLASS/NAME.png                 the pictures as RGB PNGs (the reference domain)
    OUT/<corruption>-<severity>/CLASS/NAME.png
    OUT/manifest.json

The layout is a domain suite (DOMAIN/CLASS/*.png, as `data synth` writes them), so `mc build`,
`icl eval` and the robustness workflows read it; picture NAME of a class is the same source picture
in every domain (paired), so two pictures of a class may not share a NAME (`x.png` and `x.jpg`). A
picture's random draws are seeded by (seed, corruption, severity, class, picture), so a suite is
reproducible and a domain does not depend on the others.

Every picture is checked before any work: readable, each side >= 32 px and at most MAX_PIXELS
pixels (ImageNet-C's corruptions hold several float copies of a picture; a 10000x10000 one needs
gigabytes, and Pillow refuses larger ones as decompression bombs), else a DataError naming the file,
or, with `skip_bad`, it is left out and listed in OUT/skipped.jsonl (counted in the manifest).

The folder is claimed as every command's run folder is (`runs.claim_run_folder`, its settings in
config.resolved.yaml), always resuming: the same command run again continues a killed run (or one
stopped by a full disk), while other settings are refused naming the keys. Each class of a domain
is written under a temporary name and renamed when complete, inside `.<domain>-partial/`, which is
renamed to `<domain>` when its last class is done; a rerun skips finished domains and classes.
"""

from __future__ import annotations

import hashlib
import json
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image, UnidentifiedImageError

from robustvlm.data.corruptions import COMMON, SEVERITIES, VALIDATION, corrupt
from robustvlm.data.synth.writer import save_png
from robustvlm.errors import ConfigError, DataError
from robustvlm.runs import atomic_folder, claim_run_folder, write_jsonl

IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp")
MIN_SIDE = 32
MAX_PIXELS = 4096 * 4096


def source_pictures(source: Path) -> dict[str, list[Path]]:
    """{class folder name: its picture files, sorted}; a ConfigError when there are none, a
    DataError naming both files when two pictures of a class would get one output NAME."""
    if not source.is_dir():
        raise ConfigError(f"corruption suite: {source} is not a folder of class folders")
    classes = {
        d.name: sorted(f for f in d.iterdir() if f.suffix.lower() in IMAGE_SUFFIXES)
        for d in sorted(source.iterdir()) if d.is_dir() and not d.name.startswith(".")
    }
    classes = {name: files for name, files in classes.items() if files}
    if not classes:
        raise ConfigError(f"corruption suite: {source} holds no CLASS/*.png (or .jpg) pictures")
    for files in classes.values():
        seen: dict[str, Path] = {}
        for f in files:
            if f.stem in seen:
                raise DataError(f"{seen[f.stem].name} and {f.name} would both be written as {f.stem}.png; "
                                "rename one of them", str(f))
            seen[f.stem] = f
    return classes


def read_picture(path: Path) -> Image.Image:
    """The picture at `path` as RGB: a DataError naming the file when it cannot be read, when a
    side is under MIN_SIDE px or when it holds more than MAX_PIXELS (checked from its header,
    before its pixels are decoded)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", Image.DecompressionBombWarning)
            with Image.open(path) as img:
                width, height = img.size
                if width * height > MAX_PIXELS:
                    raise DataError(f"{width}x{height} px is more than ImageNet-C's corruptions can hold in memory "
                                    f"(at most {MAX_PIXELS:,} pixels): resize it first", str(path))
                picture = img.convert("RGB")
    except Image.DecompressionBombError as err:
        raise DataError(f"too large to read ({err}): resize it first", str(path)) from None
    except (UnidentifiedImageError, OSError, SyntaxError, ValueError) as err:
        raise DataError(f"cannot read the picture: {err}", str(path)) from None
    if min(picture.size) < MIN_SIDE:
        raise DataError(f"ImageNet-C corruptions need pictures of at least {MIN_SIDE}x{MIN_SIDE} px, got "
                        f"{picture.size[0]}x{picture.size[1]}", str(path))
    return picture


def picture_seed(seed: int, corruption: str, severity: int, class_index: int, index: int) -> int:
    """The seed of one picture's corruption draws (a 32-bit integer)."""
    name_index = (*COMMON, *VALIDATION).index(corruption)
    return int(np.random.SeedSequence([seed, name_index, severity, class_index, index]).generate_state(1)[0])


def _fingerprint(classes: dict[str, list[Path]]) -> str:
    """SHA-256 of every picture's class, name and size: a rerun on a changed source is refused."""
    lines = (f"{name}/{f.name}:{f.stat().st_size}\n" for name, files in classes.items() for f in files)
    return hashlib.sha256("".join(lines).encode("utf-8")).hexdigest()


def _checked(classes: dict[str, list[Path]], skip_bad: bool) -> tuple[dict[str, list[int]], list[dict[str, str]]]:
    """({class: indices of its usable pictures}, [skipped {file, why}]): every picture is read once
    (and let go); a bad one is a DataError unless `skip_bad`."""
    kept: dict[str, list[int]] = {}
    skipped: list[dict[str, str]] = []
    for name, files in classes.items():
        kept[name] = []
        for i, f in enumerate(files):
            try:
                read_picture(f)
            except DataError as err:
                if not skip_bad:
                    raise
                skipped.append({"file": str(f), "why": str(err)})
                continue
            kept[name].append(i)
    return kept, skipped


#: The domain of the source pictures as they are.
CLEAN = "clean"
#: The name of a corruption domain pooled over types in its id (`mean-<severity>`).
POOLED = "mean"


@dataclass(frozen=True)
class CorruptionDomain:
    """A corruption domain: corruption `type` at `severity` (id `<type>-<severity>`, as `data
    corrupt` names it), or with `type` None every type's questions at `severity` pooled (id
    `mean-<severity>`). `parse` reads an id back (results.json's `corruptions` keys)."""

    severity: int
    type: str | None = None

    @property
    def pooled(self) -> bool:
        return self.type is None

    @property
    def id(self) -> str:
        return f"{self.type or POOLED}-{self.severity}"

    @classmethod
    def parse(cls, domain_id: str) -> CorruptionDomain:
        """The domain `domain_id` names; ValueError naming it when it names none."""
        name, _, severity = domain_id.rpartition("-")
        if not name or not severity.isdigit():
            raise ValueError(f"{domain_id!r} is not a corruption domain: <type>-<severity> or {POOLED}-<severity>")
        return cls(int(severity), None if name == POOLED else name)



def write_corrupted_suite(source: Path, out: Path, *, corruptions: Sequence[str] = COMMON,
                          severities: Sequence[int] = SEVERITIES, seed: int = 0, skip_bad: bool = False) -> Path:
    """Write the suite of the module doc and return OUT/manifest.json."""
    classes = source_pictures(source)
    settings = {"source": str(source.resolve()), "pictures": _fingerprint(classes), "corruptions": list(corruptions),
                "severities": list(severities), "seed": seed, "skip_bad": skip_bad}
    kept, skipped = _checked(classes, skip_bad)
    if not any(kept.values()):
        raise DataError("every picture is unusable (each was skipped)", str(source))
    claim_run_folder(out, settings, command="data corrupt", resume=True)
    write_jsonl(out / "skipped.jsonl", skipped)
    corrupted = [CorruptionDomain(s, c) for c in corruptions for s in severities]
    domains = [CLEAN, *(c.id for c in corrupted)]
    for name, domain in zip(domains, [None, *corrupted]):
        if not (out / name).is_dir():  # else finished by an earlier run
            _write_domain(out, domain, classes, kept, seed)
    manifest = {"benchmark": "corrupted", "source": str(source), "seed": seed, "layout": "DOMAIN/CLASS/NAME.png",
                "corruptions": list(corruptions), "severities": list(severities), "domains": domains,
                "classes": list(classes), "pictures_per_class": {n: len(kept[n]) for n in classes},
                "skipped": len(skipped),
                "paired": "picture NAME of a class is the same source picture in every domain",
                "definitions": "ImageNet-C (Hendrycks & Dietterich 2019) via imagecorruptions 1.1.2"}
    path = out / "manifest.json"
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(manifest, indent=2), encoding="utf-8")
    tmp.replace(path)
    return path


def _write_domain(out: Path, domain: CorruptionDomain | None, classes: dict[str, list[Path]],
                  kept: dict[str, list[int]], seed: int) -> None:
    """Write one domain (None: the clean pictures) class by class into `.<domain>-partial/`
    (finished classes kept from an earlier run), then rename it to `<domain>`."""
    folder = domain.id if domain is not None else CLEAN
    partial = out / f".{folder}-partial"
    partial.mkdir(exist_ok=True)
    for class_index, (name, files) in enumerate(classes.items()):
        if (partial / name).is_dir():
            continue
        with atomic_folder(partial / name) as tmp:
            tmp.mkdir()
            for i in kept[name]:
                picture = read_picture(files[i])
                if domain is not None and domain.type is not None:
                    picture = corrupt(picture, domain.type, domain.severity,
                                      picture_seed(seed, domain.type, domain.severity, class_index, i))
                save_png(picture, tmp / f"{files[i].stem}.png")
    partial.rename(out / folder)
