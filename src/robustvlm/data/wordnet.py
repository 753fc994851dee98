"""WordNet 3.0 from disk (Debian's `wordnet-base`, no download) and class-to-class tree distances.

The Debian package puts the dictionary files under /usr/share/wordnet (another folder can be set
with the environment variable ROBUSTVLM_WORDNET_DIR). NLTK's `WordNetCorpusReader` reads them with
two adjustments: the package lacks the small `lexnames` file (the 45 lexicographer file names,
fixed in WordNet 3.0, supplied here), and no mapping to another WordNet version is built (that
would look for NLTK's downloaded copy).

NLTK (the [wordnet] extra) is imported only when WordNet is opened, so importing this module (as
`tools/docs_reference.py` and every command's import chain do) works without it.
"""

from __future__ import annotations

import io
import os
import re
import warnings
from collections import deque
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import IO, TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from nltk.corpus.reader.wordnet import Synset, WordNetCorpusReader

from robustvlm.errors import ConfigError, DataError

DEFAULT_WORDNET_DIR = Path("/usr/share/wordnet")
REQUIRED_FILES = ("index.noun", "data.noun", "noun.exc", "data.adj", "index.adj")
WORDNET_ID = re.compile(r"n(\d{8})")  # ImageNet-style synset id: "n" + 8-digit noun offset

# lexnames(5WN) of WordNet 3.0, in file-number order.
LEXNAMES = (
    "adj.all adj.pert adv.all noun.Tops noun.act noun.animal noun.artifact noun.attribute "
    "noun.body noun.cognition noun.communication noun.event noun.feeling noun.food noun.group "
    "noun.location noun.motive noun.object noun.person noun.phenomenon noun.plant "
    "noun.possession noun.process noun.quantity noun.relation noun.shape noun.state "
    "noun.substance noun.time verb.body verb.change verb.cognition verb.communication "
    "verb.competition verb.consumption verb.contact verb.creation verb.emotion verb.motion "
    "verb.perception verb.possession verb.social verb.stative verb.weather adj.ppl"
).split()


@lru_cache(maxsize=1)
def _disk_reader_class() -> type[WordNetCorpusReader]:
    """NLTK's reader over a bare WordNet 3.0 dict folder (see the module docstring); defined on
    first use so that NLTK is imported only then."""
    from nltk.corpus.reader.wordnet import WordNetCorpusReader

    class DiskWordNetReader(WordNetCorpusReader):
        def open(self, file: str) -> IO[str]:
            if file == "lexnames" and not (Path(self.root.path) / file).is_file():
                return io.StringIO("".join(f"{i:02d}\t{name}\t0\n" for i, name in enumerate(LEXNAMES)))
            return super().open(file)

        def map_wn(self, version: str = "wordnet") -> None:
            return None

    return DiskWordNetReader


def wordnet_dir() -> Path:
    """The WordNet dict folder: $ROBUSTVLM_WORDNET_DIR, else /usr/share/wordnet."""
    return Path(os.environ.get("ROBUSTVLM_WORDNET_DIR") or DEFAULT_WORDNET_DIR)


def wordnet_available(root: str | Path | None = None) -> bool:
    """True when the WordNet dict files are present under `root` (default `wordnet_dir()`)."""
    folder = Path(root) if root is not None else wordnet_dir()
    return all((folder / name).is_file() for name in REQUIRED_FILES)


@lru_cache(maxsize=2)
def open_wordnet(root: str | Path | None = None) -> WordNetCorpusReader:
    """WordNet read from disk (about 2 s the first time, then cached)."""
    folder = Path(root) if root is not None else wordnet_dir()
    if not wordnet_available(folder):
        raise ConfigError(
            f"WordNet 3.0 files not found under {folder}: install Debian's package wordnet-base "
            "(apt-get install wordnet-base) or set ROBUSTVLM_WORDNET_DIR to a WordNet dict folder"
        )
    import nltk.data

    resolved = str(folder.resolve())
    if resolved not in nltk.data.path:
        nltk.data.path.append(resolved)  # NLTK only opens corpora under its data paths
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="The multilingual functions")
        return _disk_reader_class()(resolved, None)


def is_wordnet_id(class_name: str) -> bool:
    """True for an ImageNet-style noun synset id such as "n02084071"."""
    return WORDNET_ID.fullmatch(class_name) is not None


def class_synset(class_name: str, wn: WordNetCorpusReader) -> Synset:
    """The noun synset of a class: its WordNet id ("n02084071"), else its name's first noun sense.

    Names are looked up as lemmas, in the order of `lemma_candidates` ("golden retriever" ->
    golden_retriever.n.01's lemma; "t-shirt" with its hyphen; "ankle boot", which WordNet lacks,
    by its head noun "boot"). Raises DataError naming the class when it has no synset.
    """
    match = WORDNET_ID.fullmatch(class_name)
    if match:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # NLTK warns, then returns None, for unknown offsets
            synset = wn.synset_from_pos_and_offset("n", int(match.group(1)))
        if synset is None:
            raise DataError(f"class {class_name!r}: no WordNet noun synset has this id")
        return synset
    for lemma in lemma_candidates(class_name):
        senses = wn.synsets(lemma, pos="n")
        if senses:
            return senses[0]
    raise DataError(f"class {class_name!r} has no WordNet noun synset; rename it or give its WordNet id")


def lemma_candidates(class_name: str) -> list[str]:
    """The WordNet lemmas a class name is looked up as, first match wins: the words joined by "_"
    (hyphens too), then with its hyphens kept ("t-shirt"), then its head noun, the last word of
    a compound ("ankle boot" -> "boot"; English compounds put the head last)."""
    words = re.split(r"[\s-]+", class_name.strip())
    candidates = ["_".join(words), re.sub(r"\s+", "_", class_name.strip())]
    if len(words) > 1:
        candidates.append(words[-1])
    return list(dict.fromkeys(candidates))


def ancestor_depths(synset: Synset) -> dict[Synset, int]:
    """Every hypernym (and instance hypernym) ancestor of `synset`, itself included, with the
    number of edges on the shortest upward path to it."""
    depths: dict[Synset, int] = {}
    queue = deque([(synset, 0)])
    while queue:
        node, depth = queue.popleft()
        if node in depths:
            continue
        depths[node] = depth
        queue.extend((parent, depth + 1) for parent in node.hypernyms() + node.instance_hypernyms())
    return depths


def tree_distances(class_names: Sequence[str], wn: WordNetCorpusReader | None = None) -> np.ndarray:
    """Shortest-path distances (edges) between the classes' synsets in the hypernym tree.

    The distance of two synsets is the minimum over their common ancestors of the sum of both
    depths below it. Returns a symmetric float array [C, C]; inf where no common ancestor.
    """
    wn = wn if wn is not None else open_wordnet()
    depths = [ancestor_depths(class_synset(name, wn)) for name in class_names]
    distances = np.zeros((len(depths), len(depths)))
    for i, a in enumerate(depths):
        for j in range(i + 1, len(depths)):
            b = depths[j]
            common = a.keys() & b.keys()
            distances[i, j] = distances[j, i] = min((a[s] + b[s] for s in common), default=np.inf)
    return distances
