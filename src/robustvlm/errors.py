"""Errors raised on bad input. The CLI turns them into one readable line, never a traceback."""

from __future__ import annotations


class RobustVLMError(Exception):
    """Base class for every error robustvlm reports to a user."""


class ConfigError(RobustVLMError):
    """A configuration file or override is invalid (names the key)."""


class DataError(RobustVLMError):
    """A dataset or record is invalid.

    Args:
        message: what is wrong.
        source: the file the record came from.
        record: the line number (1-based) or record id, when known.
    """

    def __init__(self, message: str, source: str | None = None, record: str | int | None = None):
        self.message = message
        self.source = source
        self.record = record
        where = ""
        if source is not None:
            where = f"{source}"
            if record is not None:
                where += f" [{record}]" if isinstance(record, str) else f":{record}"
            where += ": "
        super().__init__(f"{where}{message}")
