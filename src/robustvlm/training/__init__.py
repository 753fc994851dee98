"""robustvlm.training: the one training loop, the task interface, checkpoints, samplers, launching."""
