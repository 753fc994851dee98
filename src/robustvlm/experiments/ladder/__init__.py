"""`robustvlm demo ladder`: the invariance ladder. `experiment.py`: its options and `Experiment`;
`plan.py`: its one typed plan and presets; `rung.py`: a rung as a value; `run.py`: the run; `vlm.py`:
its VLM rungs; `zero_shot.py`: the pretrained VLMs' zero-shot scores; `trace.py`: one run traced
step by step (`python -m robustvlm.experiments.ladder.trace`); `readings.py` and `paired.py`: the
readings of its runs and their paired tests; `results.py`: its typed results; `report.py` and
`paired_report.py`: its report and tables; `figures.py`: its figures of the Results pages."""
