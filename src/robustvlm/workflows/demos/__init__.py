"""The built-in demos: the fine-tuning study, accuracy on the line, the reward models, the linear
invariance unit tests and the invariance ladder."""
