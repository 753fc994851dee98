"""Measuring models under shift: multiple-choice benchmarks (build, evaluate), accuracy-on-the-line
fits and the task-signal study, in-context evaluation and failure diagnosis."""
