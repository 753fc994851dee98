"""Multimodal reward models: training, pairwise evaluation, generalization matrices (and their dry
run), Best-of-N sampling, scoring and curves."""
