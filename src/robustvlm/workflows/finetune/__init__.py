"""Fine-tuning with the invariance objectives: one training run, its evaluation, studies (methods x
seeds), sweeps and their dry runs, environments inferred from data."""
