"""The invariance ladder's rungs as typed values (`experiments.ladder.run`).

A rung is what a model of the ladder reads: `pixels` (the IRM paper's MLP on the pixels), a
frozen vision tower's features (`tower`, with its model) or a generative VLM trained on the
answer tokens (`vlm`, with its training mode and model). Its `id` is how results.json, runs.jsonl,
predictions.jsonl and the report name it (`pixels`, `tower:tiny:clip`, `vlm:head:tiny:idefics3`);
`Rung.parse` is the one reader of an id, and `parse_cell` of a summary cell "source/id", for files
read back.
"""

from __future__ import annotations

from dataclasses import dataclass

from robustvlm.model_ref import ModelRef

PIXELS = "pixels"
TOWER = "tower"
VLM = "vlm"
KINDS = (PIXELS, TOWER, VLM)
MODES = ("head", "lora", "full")
"""A VLM rung's training modes (`experiments.ladder.vlm`)."""
SEP = ":"


@dataclass(frozen=True)
class Rung:
    """One rung: its `kind` (`KINDS`), the `model` a tower or VLM rung reads (None for pixels)
    and a VLM rung's training `mode` (`MODES`; "" for the others). ValueError for any other
    combination."""

    kind: str
    model: ModelRef | None = None
    mode: str = ""

    def __post_init__(self) -> None:
        wants_model, wants_mode = self.kind != PIXELS, self.kind == VLM
        if (self.kind not in KINDS or (self.model is not None) != wants_model
                or (self.mode not in MODES if wants_mode else self.mode != "")):
            raise ValueError(f"not a ladder rung: kind {self.kind!r}, model {self.model!r}, mode {self.mode!r} "
                             f"(a rung is {PIXELS}, {TOWER} with a model, or {VLM} with a model and one of {MODES})")

    @classmethod
    def pixels(cls) -> Rung:
        return cls(PIXELS)

    @classmethod
    def tower(cls, model: ModelRef) -> Rung:
        return cls(TOWER, model)

    @classmethod
    def vlm(cls, mode: str, model: ModelRef) -> Rung:
        return cls(VLM, model, mode)

    @property
    def id(self) -> str:
        """`pixels`, `tower:<model name>` or `vlm:<mode>:<model name>`."""
        return SEP.join([self.kind, *((self.mode,) if self.mode else ()), *((self.model.name,) if self.model else ())])

    def __str__(self) -> str:
        return self.id

    @classmethod
    def parse(cls, rung_id: str) -> Rung:
        """The rung `id` names; ValueError naming it when it names none."""
        kind, _, rest = rung_id.partition(SEP)
        mode, _, model = rest.partition(SEP) if kind == VLM else ("", "", rest)
        try:
            return cls(kind, ModelRef.from_record(model) if model else None, mode)
        except ValueError:
            raise ValueError(f"{rung_id!r} is not a ladder rung: a rung is {PIXELS}, {TOWER}:<model> or "
                             f"{VLM}:<{'|'.join(MODES)}>:<model>") from None


Cell = tuple[str, Rung]
"""(a source of `data.colored_mnist`, a rung): what the ladder trains its methods on."""


def cell_id(source: str, rung: Rung) -> str:
    """A cell as summaries key it: "source/rung id" (e.g. "fashion/tower:tiny:clip")."""
    return f"{source}/{rung.id}"


def parse_cell(cell: str) -> Cell:
    """(source, rung) of a summary cell "source/rung id"; ValueError naming it otherwise."""
    source, slash, rung = cell.partition("/")
    if not slash:
        raise ValueError(f"{cell!r} is not a ladder cell: a cell is <source>/<rung>")
    return source, Rung.parse(rung)
