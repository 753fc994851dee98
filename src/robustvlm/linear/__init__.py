"""Linear models trained through the objective classes: the linear unit tests of invariance."""
