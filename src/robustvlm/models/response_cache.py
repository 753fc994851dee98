"""A persistent cache of served-model replies, shared by every run on this machine.

Keyed by the sha256 of the request (its route and JSON body, which holds the model name and
every parameter; images are in it as data URLs): a re-run into a new folder, a `--resume` and
another command asking the same thing send nothing that was already answered. The folder is
`$ROBUSTVLM_CACHE`, else `~/.cache/robustvlm`; the file is one SQLite database (WAL mode, so
concurrent runs may read and write it). A reply is stored as soon as it arrives. No header,
hence no API key, is ever part of a key or a value.
"""

from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import threading
from pathlib import Path
from typing import Any

from robustvlm.errors import ConfigError

CACHE_ENV = "ROBUSTVLM_CACHE"
CACHE_FILE = "responses.sqlite"


def cache_dir() -> Path:
    """The user cache folder: $ROBUSTVLM_CACHE, else ~/.cache/robustvlm."""
    return Path(os.environ.get(CACHE_ENV) or Path.home() / ".cache" / "robustvlm")


def request_key(route: str, body: dict[str, Any]) -> str:
    """sha256 (hex) of a request's route and canonical JSON body."""
    return hashlib.sha256(json.dumps([route, body], sort_keys=True).encode("utf-8")).hexdigest()


class ResponseCache:
    """Replies by request key, in `folder/responses.sqlite` (default `cache_dir()`); thread-safe."""

    def __init__(self, folder: str | Path | None = None):
        folder = Path(folder) if folder is not None else cache_dir()
        self.path = folder / CACHE_FILE
        try:
            folder.mkdir(parents=True, exist_ok=True)
            self.db = sqlite3.connect(self.path, check_same_thread=False, timeout=30.0)
            self.db.execute("PRAGMA journal_mode=WAL")
            self.db.execute("CREATE TABLE IF NOT EXISTS replies (key TEXT PRIMARY KEY, reply TEXT NOT NULL)")
            self.db.commit()
        except (OSError, sqlite3.Error) as exc:
            raise ConfigError(
                f"cannot open the response cache {self.path} ({exc}); set {CACHE_ENV} to a writable "
                "folder or turn the cache off with --no-cache"
            ) from exc
        self.lock = threading.Lock()

    def get(self, key: str) -> dict[str, Any] | None:
        """The stored reply of `key`, or None."""
        with self.lock:
            row = self.db.execute("SELECT reply FROM replies WHERE key = ?", (key,)).fetchone()
        return None if row is None else json.loads(row[0])

    def put(self, key: str, reply: dict[str, Any]) -> None:
        """Store (or replace) the reply of `key`, committed at once."""
        with self.lock:
            self.db.execute("INSERT OR REPLACE INTO replies (key, reply) VALUES (?, ?)", (key, json.dumps(reply)))
            self.db.commit()

    def close(self) -> None:
        with self.lock:
            self.db.close()
