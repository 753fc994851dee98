"""`robustvlm data check`: load a dataset, collect every bad record instead of stopping at the first."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from robustvlm.data.environments import env_counts, format_env_counts
from robustvlm.data.loaders import LoadOptions, read_examples
from robustvlm.data.records import Example
from robustvlm.errors import DataError
from robustvlm.hub_dataset import HubDataset


@dataclass
class CheckReport:
    """What `check_dataset` found: the good examples' counts and one DataError per bad record."""

    examples: list[Example] = field(default_factory=list)
    errors: list[DataError] = field(default_factory=list)

    @property
    def counts(self) -> dict[str, dict[str, int]]:
        """Per environment: examples per split, OOD examples and the total (see `env_counts`)."""
        return env_counts(self.examples)

    @property
    def n_ok(self) -> int:
        return len(self.examples)

    @property
    def ok(self) -> bool:
        return not self.errors

    def format(self) -> str:
        """The counts table, then a summary line and one line per bad record."""
        lines = [format_env_counts(self.examples), ""]
        lines.append(f"{self.n_ok} good example(s), {len(self.errors)} bad record(s)")
        lines += [f"  {error}" for error in self.errors]
        return "\n".join(lines)


def check_dataset(path: str | Path, **load_kwargs: Any) -> CheckReport:
    """Load `path` like `load_examples(path, **load_kwargs)`, collecting every bad record
    (`load_kwargs`: fields of `loaders.LoadOptions`).

    A file that cannot be read at all (not JSON) is reported as one error; a missing input
    raises DataError naming it, and invalid options (an unknown format, a missing `image_root`)
    raise ConfigError: neither is a bad record.
    `on_bad_record`, `skip_log` and `verbose` do not apply.
    """
    if HubDataset.parse(path) is None and not Path(path).exists():
        raise DataError("data file or directory not found", str(path))
    report = CheckReport()
    try:
        report.examples = read_examples(path, report.errors.append, LoadOptions(**load_kwargs))
    except DataError as error:
        report.errors.append(error)
    return report
