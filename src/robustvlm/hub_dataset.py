"""A Hugging Face hub dataset named as a data path, parsed once: `hf:NAME[:CONFIG]`.

    hf:MMInstruction/VL-RewardBench     dataset NAME, its default config
    hf:sdfss1/RMHackBench:CONFIG        dataset NAME, hub config CONFIG

A data path that does not start with `hf:` is a local file or folder (`HubDataset.parse` gives
None). `HubDataset.parse` is the only place that reads the prefix (tests/test_identifiers.py greps
the sources for any other); `config/` asks it whether a path is on the hub and `data.loaders`
loads the value through `datasets.load_dataset`. Plain text in, plain values out: no network,
no import beyond the standard library, so that configs may use it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

PREFIX = "hf:"
"""What starts a data path naming a hub dataset."""


@dataclass(frozen=True)
class HubDataset:
    """A dataset on the Hugging Face hub.

    Attributes:
        name: the dataset's hub id (`org/name`), as `datasets.load_dataset` takes it.
        config: the hub config (subset) to load; None for the dataset's default.
    """

    name: str
    config: str | None = None

    @classmethod
    def parse(cls, path: str | Path) -> HubDataset | None:
        """The dataset `path` names (`hf:NAME[:CONFIG]`, CONFIG after the first ':' past NAME;
        an empty CONFIG is none), or None for a local path (a Path, or text without `hf:`)."""
        if not isinstance(path, str) or not path.startswith(PREFIX):
            return None
        name, _, config = path[len(PREFIX):].partition(":")
        return cls(name, config or None)

    def with_config(self, config: str | None) -> HubDataset:
        """The same dataset with hub config `config`."""
        return HubDataset(self.name, config)

    def __str__(self) -> str:
        """The data path naming it: `parse(str(dataset)) == dataset`."""
        return f"{PREFIX}{self.name}" + (f":{self.config}" if self.config else "")
