"""`generate_batch` moved to `robustvlm.models.generate` (generation is a model operation).

Kept only because `evaluation/runner.py` still imports it from here; delete this module once
runner.py imports `robustvlm.models.generate`.
"""

from robustvlm.models.generate import generate_batch

__all__ = ["generate_batch"]
