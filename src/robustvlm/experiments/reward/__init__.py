"""`robustvlm demo reward`: shortcut-aware reward models. `experiment.py`: its plan and `Experiment`;
`run.py`: the demo on the fine-tuned tiny policy; `zoo.py`: the `--zoo` reward ladder; the ladder's
rungs `linear_rung.py` and `frozen_rung.py`; `paired.py`: the pair-by-pair comparison of two losses.
Its results (`report.reward_results`, `reward.ladder_results`) and tables (`report.reward_demo`,
`report.reward_zoo`) stay below: `report.figures` reads them; its matrices run through
`workflows.reward.matrix` (`robustvlm rm matrix`)."""
