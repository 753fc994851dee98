"""Silence one known-spurious transformers warning, and nothing else.

transformers 5.x serialises a SigLIP config (`save_pretrained`, `repr`) by diffing it against a
default `SiglipTextConfig()`, whose own defaults (vocabulary 32,000; bos 49406, eos 49407) fail
its token-id check, so every SigLIP save logs "Model config: bos_token_id must be `None` or an
integer within the vocabulary (between 0 and 31999), got 49406" about a config nobody built
(`zoo build --quick` printed it; issue 46.8). The filter drops exactly those two messages; a
model whose own token ids are out of range is still warned about.
"""

from __future__ import annotations

import logging
import re

#: the two messages SiglipTextConfig's defaults produce against themselves
_SIGLIP_DEFAULTS = re.compile(r"Model config: (bos|eos)_token_id must be .* \(between 0 and 31999\), got 4940[67]\.")


class _SiglipDefaultsFilter(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return _SIGLIP_DEFAULTS.match(record.getMessage()) is None


def silence_siglip_default_token_warning() -> None:
    """Attach the filter to transformers' configuration logger (once)."""
    logger = logging.getLogger("transformers.configuration_utils")
    if not any(isinstance(f, _SiglipDefaultsFilter) for f in logger.filters):
        logger.addFilter(_SiglipDefaultsFilter())
