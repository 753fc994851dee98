"""`robustvlm demo invariance`: the linear unit tests of invariance. `experiment.py`: its plan and
`Experiment`; `run.py`: the sweep; `results.py`: its typed results; `report.py`: its report and
tables; `figures.py`: its figures of the Results pages (`python -m robustvlm.figures`)."""
