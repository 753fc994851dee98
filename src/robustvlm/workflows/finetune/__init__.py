"""Fine-tuning with the invariance objectives: one training run, its evaluation, studies (methods x
seeds), sweeps, their dry runs (the printed plan) and smoke runs, environments inferred from data."""
