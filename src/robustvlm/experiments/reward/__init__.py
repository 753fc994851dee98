"""`robustvlm demo reward`: shortcut-aware reward models. `experiment.py`: its plan and `Experiment`;
`run.py`: the demo on the fine-tuned tiny policy; `zoo.py`: the `--zoo` reward ladder; the ladder's
rungs `linear_rung.py` and `frozen_rung.py`; `paired.py`: the pair-by-pair comparison of two losses;
`results.py`: its typed results; `report.py` and `zoo_report.py`: its reports and tables;
`figures.py`: its figures of the Results pages, those of its `rm matrix` follow-ups too. The rungs'
results it shares with `robustvlm rm matrix` (`reward.ladder_results`) stay below, with
`workflows.reward.matrix`."""
