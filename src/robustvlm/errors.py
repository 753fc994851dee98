"""Errors raised on bad input. The CLI turns them into one readable line, never a traceback."""

from __future__ import annotations


class RobustVLMError(Exception):
    """Base class for every error robustvlm reports to a user."""


class ConfigError(RobustVLMError):
    """A configuration file or override is invalid (names the key)."""


class DataError(RobustVLMError):
    """A dataset or record is invalid.

    The message reads `SOURCE:LINE: [ID] message` when the line and the record id are known,
    `SOURCE:LINE: message` with the line alone and `SOURCE [ID]: message` with the id alone.

    Args:
        message: what is wrong.
        source: the file the record came from.
        record: the line number (1-based) or record id, when known.
        record_id: the record's id, when `record` is a line number.
    """

    def __init__(
        self,
        message: str,
        source: str | None = None,
        record: str | int | None = None,
        record_id: str | None = None,
    ):
        self.message = message
        self.source = source
        self.record = record
        self.record_id = record_id
        super().__init__(_located(message, source, record, record_id))


def _located(message: str, source: str | None, record: str | int | None, record_id: str | None) -> str:
    """`message` prefixed by where it happened (see DataError)."""
    if source is None:
        return message
    if isinstance(record, str):
        return f"{source} [{record}]: {message}"
    where = source if record is None else f"{source}:{record}"
    return f"{where}: {message}" if record_id is None else f"{where}: [{record_id}] {message}"


class MissingDataSource(RobustVLMError):
    """A real-image source (a package that ships the images) is not installed on this machine; the
    message says what to install. Nothing is downloaded. The CLI exits 1."""
