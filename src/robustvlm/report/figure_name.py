"""A figure's name as a value: the kind of table it is and, for a figure shown more than once,
the tag that tells its blocks apart.

A Results page's block `<!-- figure:NAME -->` names its figure `KIND` or `KIND:TAG`: `ladder`,
`ladder-zoo-oracle:rebuilt`, `icl-defined-labels:llava-clip-m` (`figures.write`). The kind
picks how the table is made (`figures.registry.FIGURES`), its picture (`figures.images`) and
its experiment (`report.figure_sources`); the tag (everything after the first ':') names which
run's results it shows. `FigureName.parse` is the only place that reads that text
(tests/test_identifiers.py greps for any other).
"""

from __future__ import annotations

from dataclasses import dataclass

from robustvlm.errors import ConfigError

#: what separates a figure's kind from its tag
TAG_SEPARATOR = ":"


@dataclass(frozen=True)
class FigureName:
    """`kind` (a key of `figures.registry.FIGURES`) and `tag` (None for an untagged figure)."""

    kind: str
    tag: str | None = None

    @classmethod
    def parse(cls, text: str) -> FigureName:
        """`KIND` or `KIND:TAG` (the tag is all after the first ':'); ConfigError naming `text`
        when the kind or a tag after ':' is empty."""
        kind, separator, tag = text.partition(TAG_SEPARATOR)
        if not kind or (separator and not tag):
            raise ConfigError(f"not a figure name: {text!r} (expected NAME or NAME{TAG_SEPARATOR}TAG)")
        return cls(kind, tag if separator else None)

    def __str__(self) -> str:
        """The name as written in a figure block: `parse(str(name)) == name`."""
        return self.kind if self.tag is None else f"{self.kind}{TAG_SEPARATOR}{self.tag}"

    @property
    def file_stem(self) -> str:
        """The name in a file name, every ':' a '-': `rm-seeds:cue70` -> `rm-seeds-cue70`."""
        return str(self).replace(TAG_SEPARATOR, "-")
