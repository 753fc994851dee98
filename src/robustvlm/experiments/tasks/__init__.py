"""`robustvlm demo tasks`: the Dynamic BIRM paper's Table 1 in miniature. `experiment.py`: its plan
and `Experiment`; `run.py`: the packaged study it runs (`workflows.finetune.study`); `figures.py`:
its figures of the Results pages. Its results (`analysis.study.StudyResults`) and report
(`report.study_report`) stay below: `robustvlm study` reads them too."""
