"""Model names bound for the Hugging Face hub: never a key, and sent only to a hub that answers.

A model name that is not a local path and has no prefix robustvlm resolves itself (`tiny:`,
`zoo:`, `real:`, `openai:`: a hub repository id holds no colon) is sent to the hub inside request
URLs, and huggingface_hub prints those URLs in its retry lines. `checked_hub_name`:

- refuses a name that looks like a key or access token (`redact.looks_like_token`: `sk-...`,
  `hf_...`, long random strings), without repeating it, before anything is sent;
- tries one connection to the hub (`REACH_TIMEOUT_S`) the first time a hub name is used; when it
  fails, this process switches huggingface_hub to offline mode, so a model in the local cache
  still loads and any other fails at once with one error line, instead of five retries per file
  with exponential backoff (minutes). Behind a proxy (`HTTPS_PROXY`, `ALL_PROXY`) the check is
  left to huggingface_hub, which knows how to reach the hub through it.

Written by hand: huggingface_hub has no setting for its retry count, and no library decides
whether a name is a pasted key (`redact` does, for every message).
"""

from __future__ import annotations

import os
import socket
from pathlib import Path
from urllib.parse import urlsplit

import huggingface_hub.constants

from robustvlm.errors import ConfigError
from robustvlm.redact import looks_like_token, redacted_logger

REACH_TIMEOUT_S = 5.0
PROXY_VARIABLES = ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy")
_reached: set[str] = set()  # hosts that answered (an unreachable one turns offline mode on)


def is_hub_name(name: str) -> bool:
    """Whether `name` would be looked up on the hub: no local path of that name, no prefix."""
    return ":" not in name and not Path(name).expanduser().exists()


def checked_hub_name(name: str) -> str:
    """`name` unchanged; ConfigError when it is a hub name that looks like a key (not repeated),
    and offline mode when the hub cannot be reached (module doc)."""
    if not is_hub_name(name):
        return name
    if looks_like_token(name):
        raise ConfigError(
            "the model name looks like a key or access token, not a model (masked here, and not sent "
            "to the hub): give a hub name (org/model), a local folder, tiny:KIND or zoo:NAME; a key "
            "goes in an environment variable"
        )
    if not huggingface_hub.constants.HF_HUB_OFFLINE and not _hub_reachable():
        huggingface_hub.constants.HF_HUB_OFFLINE = True
    return name


def hub_error_line(name: str, error: BaseException) -> str:
    """One line for a model the hub could not give: the error's first line, and, when offline
    mode is on, that the hub cannot be reached (or is switched off) and the model is not cached."""
    first = (str(error).strip().splitlines() or [type(error).__name__])[0]
    if is_hub_name(name) and huggingface_hub.constants.HF_HUB_OFFLINE:
        return (f"model '{name}' is not in the local hub cache and the hub cannot be reached (offline, or "
                "HF_HUB_OFFLINE is set): name a local folder, or connect and run again")
    return first


def _hub_reachable() -> bool:
    """Whether one TCP connection to the hub's host succeeds (once per host that answers); True
    behind a proxy."""
    if any(os.environ.get(v) for v in PROXY_VARIABLES):
        return True
    parts = urlsplit(huggingface_hub.constants.ENDPOINT)
    host = parts.hostname or "huggingface.co"
    if host not in _reached:
        try:
            socket.create_connection((host, parts.port or 443), timeout=REACH_TIMEOUT_S).close()
        except OSError:
            return False
        _reached.add(host)
    return True


# huggingface_hub's retry lines carry the request URL, hence the model name: masked like every message.
redacted_logger("huggingface_hub.utils._http")
