"""The default demo (`robustvlm demo`, `make demo`): the invariance ladder's two clearest rungs
(`experiment.py`; it runs the ladder's `DEMO` plan, `experiments.ladder.run`)."""
