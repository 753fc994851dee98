"""`robustvlm demo tasks`: the Dynamic BIRM paper's Table 1 in miniature. `experiment.py`: its plan
and `Experiment`; `run.py`: the packaged study it runs (`workflows.finetune.study`). Its results
(`analysis.study.StudyResults`) and report (`report.study_report`) stay below: `robustvlm study`
and `report.figures` read them too."""
