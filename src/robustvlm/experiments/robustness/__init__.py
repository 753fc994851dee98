"""`robustvlm demo robustness`: accuracy on the line. `experiment.py`: its plan and `Experiment`;
`run.py`: the family of tiny models on real digits, with its report (`report.py`) and verdict
(`verdict.py`); `zoo.py` (+ `zoo_corruptions.py`): the `--zoo` variant over the model zoo, its
results and tables in `zoo_report.py`; `figures.py`: its figures of the Results pages."""
