"""Model names bound for the Hugging Face hub: never a key, and sent only to a hub that answers.

A model name that is not a local path and has no prefix robustvlm resolves itself (`tiny:`,
`zoo:`, `real:`, `openai:`: a hub repository id holds no colon) is sent to the hub inside request
URLs, and huggingface_hub prints those URLs in its retry lines. `checked_hub_name`:

- refuses a name that looks like a key or access token (`redact.looks_like_token`: `sk-...`,
  `hf_...`, long random strings), without repeating it, before anything is sent; the same rule
  (`refuse_key_like`) guards every other name bound for the network: hub datasets (`hf:NAME`),
  text encoders and the model id a served model's requests carry;
- tries one connection to the hub (`REACH_TIMEOUT_S`) the first time a hub name is used; when it
  fails, this process switches huggingface_hub to offline mode, so a model in the local cache
  still loads and any other fails at once with one error line, instead of five retries per file
  with exponential backoff (minutes). Behind a proxy (`HTTPS_PROXY`, `ALL_PROXY`) the check is
  left to huggingface_hub, which knows how to reach the hub through it.

A hub failure of any kind (DNS, a proxy's 5xx, TLS, a timeout) reaches the loaders as an OSError or
as one of HUB_NETWORK_ERRORS (huggingface_hub's HTTP client's transport errors, no OSError), and
`hub_error_line` makes it one line.

Written by hand: huggingface_hub has no setting for its retry count, and no library decides
whether a name is a pasted key (`redact` does, for every message).
"""

from __future__ import annotations

import os
import socket
from pathlib import Path
from urllib.parse import urlsplit

import httpx2  # huggingface_hub's HTTP client: its transport errors (proxy, TLS, timeout) are no OSError
import huggingface_hub.constants

from robustvlm.redact import redacted_logger, refuse_key_like

REACH_TIMEOUT_S = 5.0
PROXY_VARIABLES = ("HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy")
_reached: set[str] = set()  # hosts that answered (an unreachable one turns offline mode on)
#: What a hub request raises when the hub cannot be reached other than as an OSError.
HUB_NETWORK_ERRORS: tuple[type[Exception], ...] = (httpx2.HTTPError,)


def is_hub_name(name: str) -> bool:
    """Whether `name` would be looked up on the hub: no local path of that name, no prefix."""
    return ":" not in name and not Path(name).expanduser().exists()


def checked_hub_name(name: str, what: str = "model name", *, reach: bool = True) -> str:
    """`name` unchanged; ConfigError when it is a hub name that looks like a key (not repeated),
    and, with `reach`, offline mode when the hub cannot be reached (module doc)."""
    if not is_hub_name(name):
        return name
    refuse_key_like(name, what, "a hub name (org/model), a local folder, tiny:KIND or zoo:NAME"
                    if what == "model name" else "a hub name (org/name) or a local folder")
    if reach and not huggingface_hub.constants.HF_HUB_OFFLINE and not _hub_reachable():
        huggingface_hub.constants.HF_HUB_OFFLINE = True
    return name


def hub_error_line(name: str, error: BaseException) -> str:
    """One line for a model the hub could not give: the error's first line, and, when offline
    mode is on, that the hub cannot be reached (or is switched off) and the model is not cached."""
    first = (str(error).strip().splitlines() or [type(error).__name__])[0]
    if is_hub_name(name) and huggingface_hub.constants.HF_HUB_OFFLINE:
        return (f"model '{name}' is not in the local hub cache and the hub cannot be reached (offline, or "
                "HF_HUB_OFFLINE is set): name a local folder, or connect and run again")
    if isinstance(error, HUB_NETWORK_ERRORS) and not isinstance(error, OSError):
        return (f"the hub cannot be reached ({type(error).__name__}: {first}): check the network or proxy "
                "(HTTPS_PROXY), or name a local folder")
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
