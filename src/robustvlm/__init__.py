"""robustvlm: measure and improve how vision-language models hold up under distribution shift."""

__version__ = "0.1.0"
