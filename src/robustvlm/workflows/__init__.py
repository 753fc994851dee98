"""End-to-end runs of the commands: the layer that strings data, models, training, evaluation, analysis
and reports together for each command. `cli/` parses arguments and calls one function here per subcommand.

Grouped by system (a multi-run command's `--dry-run` plan and `--smoke` stand-in live beside it):
  finetune/  train, evaluate, study (+ study_dry_run, study_smoke), sweep (+ sweep_dry_run,
             sweep_smoke), envs_infer
  measure/   mc_build, robustness, task_signal (+ task_signal_data), icl, diagnose
  reward/    train, evaluate, matrix (+ matrix_dry_run, matrix_smoke), sample, score, bon
  embed/     train, evaluate
Shared by several groups: plan_configs.py (the multi-run commands' typed configs), run_plan.py
(their printed `--dry-run` plans), launchers.py (the one job runner) and mc_eval.py (`mc eval`'s
scoring of many models on multiple-choice benchmarks, which embed eval, task-signal and the demos
reuse). The demos, which string these together, are the layer above (`robustvlm.experiments`).
The groups are layered too (`tests/test_layers.py`): a group imports only the shared
modules and the groups below it."""
