"""robustvlm.analysis: pure functions from numbers to numbers (no file or model I/O).

- `stats`: Clopper-Pearson and bootstrap intervals, paired bootstrap tests, seed summaries.
- `accuracy_on_the_line`: probit/logit transforms, accuracy-on-the-line fits, bootstrap bands,
  effective robustness.
- `simulate`: the Gaussian location model whose heads fall on a probit line of predicted
  slope (docs/robustness_theory.md).
"""
