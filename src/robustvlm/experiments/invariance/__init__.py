"""`robustvlm demo invariance`: the linear unit tests of invariance. `experiment.py`: its plan and
`Experiment`; `run.py`: the sweep and its report. Its results (`linear.results`) and tables
(`report.invariance`) stay below: `report.figures` reads them."""
