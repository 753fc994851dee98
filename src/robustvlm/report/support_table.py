"""The architecture support table of docs/reference/architectures.md, generated from
`models.support` (never typed by hand).

Each cell is "tested" (tests/models/test_conformance.py runs it on the tiny model of that
architecture) or "no (n)" with its reason n below the table (the same test checks the command
stops with that reason). The table sits between `<!-- figure:support -->` markers.

    python -m robustvlm.report.support_table docs/reference/architectures.md
"""

from __future__ import annotations

import sys

from robustvlm.model_ref import ModelRef
from robustvlm.models.support import ARCHITECTURES, NOT_SUPPORTED, WORKFLOW_CAPABILITIES, supports
from robustvlm.report.figure_blocks import update
from robustvlm.report.tables import markdown_table

NAME = "support"


def support_table() -> str:
    """The markdown table (architecture x capability) and the numbered reasons of its gaps."""
    reasons: list[str] = []
    rows = []
    for kind, label in ARCHITECTURES.items():
        cells = []
        for capability in WORKFLOW_CAPABILITIES:
            if supports(kind, capability):
                cells.append("tested")
                continue
            reason = NOT_SUPPORTED[kind][capability]
            if reason not in reasons:
                reasons.append(reason)
            cells.append(f"no ({reasons.index(reason) + 1})")
        rows.append([f"{label} `{ModelRef.tiny(kind).name}`", *cells])
    table = markdown_table(["architecture", *WORKFLOW_CAPABILITIES], rows)
    notes = [f"({i}) {reason}." for i, reason in enumerate(reasons, start=1)]
    legend = [f"- {capability}: {command}" for capability, command in WORKFLOW_CAPABILITIES.items()]
    return "\n\n".join([table, *(["\n".join(notes)] if notes else []), "Columns:", "\n".join(legend)])


def main(argv: list[str]) -> int:
    """`DOC`: rewrite DOC's support table."""
    if len(argv) != 1:
        print(__doc__.strip().splitlines()[-1], file=sys.stderr)
        return 2
    update(argv[0], NAME, support_table())
    print(f"{argv[0]}: figure {NAME} from robustvlm.models.support")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
