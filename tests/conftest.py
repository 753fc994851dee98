"""Shared test settings: tiny models run fastest (and least noisily) on one CPU thread.

Tests are imported with `--import-mode=importlib` (pyproject), so test files in different
folders may share a name; the support modules in tests/helpers (stub judge server, toy tasks,
distributed workers) are importable by name because that folder is put on sys.path here.
"""

import os
import sys
from pathlib import Path

import torch

HELPERS = Path(__file__).resolve().parent / "helpers"
sys.path.insert(0, str(HELPERS))

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
torch.set_num_threads(1)
