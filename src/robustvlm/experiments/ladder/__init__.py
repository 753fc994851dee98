"""`robustvlm demo ladder`: the invariance ladder. `experiment.py`: its options and `Experiment`;
`run.py`: the ladder's plans and run; `vlm.py`: its VLM rungs; `zero_shot.py`: the pretrained VLMs'
zero-shot scores; `trace.py`: one run traced step by step (`python -m robustvlm.experiments.ladder.trace`).
Its results (`analysis.ladder_results`), readings (`analysis.ladder`, `analysis.ladder_paired`)
and tables (`report.ladder`, `report.ladder_paired`) stay below: `report.figures` reads them."""
