"""Question counts of standard evaluation sets, for results files that give accuracies only
(open_clip's table, clip_benchmark's JSON): a model's accuracy interval and any resampling of
its questions need the count.

A count comes from the file where it has one, else from the user (`--n-questions BENCH=N`,
for a split other than the standard one), else from `STANDARD_SIZES` (by the benchmark's
name, spelled as any of the tools spells it);
a benchmark in use with none of the three is an error naming it. Only sets whose evaluation
split has one well-known size are listed (the test or validation split the tools evaluate).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from robustvlm.errors import DataError

#: canonical name -> (questions, the split counted, other spellings)
STANDARD_SIZES: dict[str, tuple[int, str, tuple[str, ...]]] = {
    "ImageNet 1k": (50_000, "validation", ("imagenet", "imagenet1k", "imagenet-1k", "ilsvrc2012")),
    "ImageNet v2": (10_000, "matched-frequency", ("imagenetv2", "imagenet-v2", "imagenet_v2")),
    "ImageNet Sketch": (50_889, "all", ("imagenet_sketch", "imagenet-sketch", "sketch")),
    "ImageNet-R": (30_000, "all", ("imagenet-r", "imagenet_r", "imagenet-rendition")),
    "ImageNet-A": (7_500, "all", ("imagenet-a", "imagenet_a")),
    "ImageNet-O": (2_000, "all", ("imagenet-o", "imagenet_o")),
    "ObjectNet": (18_574, "the 113 classes shared with ImageNet", ("objectnet",)),
    "Camelyon17": (85_054, "WILDS test", ("wilds/camelyon17", "camelyon17")),
    "CIFAR-10": (10_000, "test", ("cifar10", "vtab/cifar10")),
    "CIFAR-100": (10_000, "test", ("cifar100", "vtab/cifar100")),
    "MNIST": (10_000, "test", ("mnist",)),
    "STL-10": (8_000, "test", ("stl10",)),
    "SVHN": (26_032, "test", ("svhn", "vtab/svhn")),
    "Food-101": (25_250, "test", ("food101",)),
    "GTSRB": (12_630, "test", ("gtsrb",)),
    "Oxford-IIIT Pet": (3_669, "test", ("pets", "vtab/pets")),
    "Oxford Flowers-102": (6_149, "test", ("flowers", "vtab/flowers")),
    "Stanford Cars": (8_041, "test", ("cars",)),
    "FGVC Aircraft": (3_333, "test", ("fgvc_aircraft",)),
    "Describable Textures": (1_880, "test", ("dtd", "vtab/dtd")),
    "Country211": (21_100, "test", ("country211",)),
    "Rendered SST2": (1_821, "test", ("renderedsst2",)),
    "PatchCamelyon": (32_768, "test", ("pcam", "vtab/pcam")),
}


def _key(name: str) -> str:
    """A benchmark name without case, punctuation or a `wds/` prefix: "ImageNet-R" = "imagenet_r"."""
    return re.sub(r"[^a-z0-9]", "", name.lower().removeprefix("wds/"))


_CANONICAL: dict[str, str] = {
    _key(spelling): name for name, (_, _, others) in STANDARD_SIZES.items() for spelling in (name, *others)
}


def standard_size(bench: str) -> int | None:
    """The number of questions of the standard set `bench` names (None when it is not listed)."""
    name = _CANONICAL.get(_key(bench))
    return STANDARD_SIZES[name][0] if name else None


def same_benchmark(a: str, b: str) -> bool:
    """Whether two benchmark names are one set: equal, or two spellings of one standard set
    ("imagenet1k" and "ImageNet 1k", "wds/imagenet-r" and "ImageNet-R")."""
    return a == b or (_CANONICAL.get(_key(a)) is not None and _CANONICAL.get(_key(a)) == _CANONICAL.get(_key(b)))


def fill_counts(rows: Iterable[dict], benches: Iterable[str], user: Mapping[str, int], source: str) -> None:
    """Give every row of `benches` whose file gave no count one: the user's (`user`: bench ->
    questions; it names a split the table does not), else the standard table's; set its "n_from".
    Rows of other benchmarks, and rows whose score is no accuracy over a counted set (they carry
    `measure`: open_clip's mean per-class recall columns), are left as they are. DataError naming
    the benchmark when neither knows it."""
    wanted = set(benches)
    for row in rows:
        if row["bench"] not in wanted or row["n"] is not None or row.get("measure"):
            continue
        given = next((n for bench, n in user.items() if same_benchmark(bench, row["bench"])), None)
        if given is not None:
            row["n"], row["n_from"] = given, "user"
            continue
        size = standard_size(row["bench"])
        if size is None:
            raise DataError(f"no question count for bench {row['bench']!r}: the file gives none and it is not a "
                            f"standard set; give it with --n-questions '{row['bench']}=N'", source, row["line"])
        row["n"], row["n_from"] = size, "table"
