"""robustvlm.evaluation: generation rows, the metrics registry, in-context evaluation, diagnosis."""
