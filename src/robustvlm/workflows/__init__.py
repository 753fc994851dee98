"""End-to-end runs: the only layer that strings data, models, training, evaluation, analysis and
reports together. `cli/` parses arguments and calls one function here per subcommand."""
