"""What of a URL or a setting may be stored or shown: keys come only from environment variables.

Every config dump (`config.resolved.yaml`), lock line (`run.lock`), log line and error the CLI
prints passes through here:

- `check_url` decides whether an endpoint URL may be used at all: an http:// or https:// scheme
  and a host, no user-info (`user:key@`), no query string or fragment (requests go to
  URL + route); a URL holding credentials (user-info, a query parameter named like one, a value
  that looks like a key) is refused with a reason that never repeats the URL;
- `check_variable_name` decides whether `api_key_env` names an environment variable, and
  refuses a value that looks like the key itself;
- `redact` masks in any text what looks like a secret (see `looks_like_token`), the user-info
  of URLs and the values of query parameters named like credentials; `redact_settings` does the
  same to every string of a settings mapping, and masks whole values under keys named like
  credentials (`api_key`, `token`, ...).

A value looks like a token when it carries a known key prefix (`sk-`, `hf_`, `ghp_`, `AKIA`, a
JWT, ...) or is a long random-looking run of letters and digits: 24 or more characters mixing
upper case, lower case and digits that change class at least 40% of the time (random base-62
keys do about 62% of the time; CamelCase words and model names about 25%). Lower-case hex (file
hashes) is not masked. Written by hand: no library decides both what to refuse and what to mask
in one place; detect-secrets scans files for commits, it does not filter a running program's
output.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import parse_qsl, urlsplit

MASK = "***"

#: Key prefixes of common services (case-sensitive), each followed by the key's body.
_PREFIXED = re.compile(
    r"(?<![A-Za-z0-9])(?:"
    r"(?:sk|rk|pk)[-_](?:live[-_]|test[-_]|proj[-_]|ant[-_])?[A-Za-z0-9_-]{8,}"
    r"|hf_[A-Za-z0-9]{8,}"
    r"|gh[pousr]_[A-Za-z0-9]{16,}|github_pat_[A-Za-z0-9_]{16,}"
    r"|glpat-[A-Za-z0-9_-]{16,}|xox[abposr]-[A-Za-z0-9-]{10,}"
    r"|gsk_[A-Za-z0-9]{16,}|r8_[A-Za-z0-9]{16,}|nvapi-[A-Za-z0-9_-]{16,}"
    r"|AKIA[0-9A-Z]{16}|AIza[0-9A-Za-z_-]{30,}"
    r"|eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"
    r")"
)
_RUN = re.compile(r"[A-Za-z0-9]{24,}")
#: Words that make a setting's or query parameter's name a credential's (`api_key`, `X-Api-Key`,
#: `access_token`, `sig`); plurals such as `max_tokens` are counts, not credentials.
_SECRET_WORDS = frozenset({
    "key", "apikey", "token", "accesstoken", "secret", "password", "passwd", "pwd", "credential",
    "credentials", "auth", "authorization", "bearer", "signature", "sig", "session", "cookie",
})
_WORD = re.compile(r"[A-Z]?[a-z0-9]+|[A-Z]+(?![a-z])")
_USERINFO = re.compile(r"(?<=://)[^/@\s?#]+@")
_QUERY_PARAM = re.compile(r"(?<=[?&;])([^=&;#\s]+)=([^&;#\s]*)")
_VARIABLE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _class_of(char: str) -> int:
    return 0 if char.isdigit() else 1 if char.islower() else 2


def _random_looking(run: str) -> bool:
    """A run of letters and digits that mixes all three classes and changes class often."""
    classes = [_class_of(c) for c in run]
    if len(set(classes)) < 3:
        return False
    changes = sum(a != b for a, b in zip(classes, classes[1:]))
    return changes >= 0.4 * (len(run) - 1)


def looks_like_token(text: str) -> bool:
    """Whether `text` holds something shaped like a key or access token (see the module doc)."""
    return bool(_PREFIXED.search(text)) or any(_random_looking(m) for m in _RUN.findall(text))


def secret_name(name: str) -> bool:
    """Whether a setting or query parameter called `name` would hold a credential (one of its
    words, split at `_`, `-`, `.` and case changes, is in `_SECRET_WORDS`)."""
    words = [w.lower() for w in _WORD.findall(name)]
    return "".join(words) in _SECRET_WORDS or any(w in _SECRET_WORDS for w in words)


def check_url(url: str) -> str:
    """`url` when it may serve as an endpoint's API root; else ValueError saying why, never
    repeating the URL (module doc)."""
    if holds_credentials(url):
        raise ValueError(
            "holds credentials (user:key@, a key parameter or a key-like value): they would be "
            "written to the run folder; put the key in an environment variable and give its NAME "
            "as api_key_env (--api-key-env)"
        )
    parts = urlsplit(url)
    try:
        parts.port  # noqa: B018 - raises ValueError on a port that is no number in 0-65535
    except ValueError:
        raise ValueError("has a port that is not a number from 0 to 65535") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError("must be an http:// or https:// URL with a host, e.g. http://localhost:8000/v1")
    if parts.query or parts.fragment:
        raise ValueError("must hold no query string or fragment: routes such as /chat/completions are appended to it")
    return url


def holds_credentials(url: str) -> bool:
    """Whether `url` carries user-info, a query parameter named like a credential or a key-like value."""
    authority = url.split("://", 1)[-1].split("/", 1)[0]  # also for a URL with no scheme
    query = urlsplit(url).query
    named = any(secret_name(name) for name, _ in parse_qsl(query, keep_blank_values=True))
    return "@" in authority or named or looks_like_token(url)


def refuse_key_like(name: str, what: str, instead: str) -> str:
    """`name` unchanged; a ConfigError that does not repeat it when it looks like a key or access
    token (`what`: "model name", "dataset name", ...; `instead`: what to give): the rule every name
    bound for the network (a hub model, dataset or text encoder, a served model's id) passes first."""
    if looks_like_token(name):
        from robustvlm.errors import ConfigError

        raise ConfigError(
            f"the {what} looks like a key or access token (masked here, and not sent anywhere): give "
            f"{instead}; a key goes in an environment variable"
        )
    return name


def check_variable_name(name: str) -> str:
    """`name` when it can name an environment variable and is not a key; else ValueError."""
    if not _VARIABLE_NAME.fullmatch(name) or looks_like_token(name):
        raise ValueError(
            "must be the NAME of an environment variable (letters, digits, _) that holds the key, "
            "not the key itself"
        )
    return name


def redact(text: str) -> str:
    """`text` with every token-like value, URL user-info and credential parameter value masked."""
    text = _USERINFO.sub(MASK + "@", text)
    text = _QUERY_PARAM.sub(lambda m: f"{m[1]}={MASK}" if secret_name(m[1]) else m[0], text)
    text = _PREFIXED.sub(MASK, text)
    return _RUN.sub(lambda m: MASK if _random_looking(m[0]) else m[0], text)


def redact_settings(value: Any, name: str = "") -> Any:
    """A copy of JSON-like settings with every string redacted and every non-empty value under a
    key named like a credential masked (`api_key_env`, which holds a variable's name, stays)."""
    if isinstance(value, Mapping):
        return {key: redact_settings(child, str(key)) for key, child in value.items()}
    if isinstance(value, list):
        return [redact_settings(child, name) for child in value]
    if name and name != "api_key_env" and secret_name(name) and value not in (None, "", False):
        return MASK
    return redact(value) if isinstance(value, str) else value


class RedactingFilter(logging.Filter):
    """A logging filter that redacts each record's message (attach with `redacted_logger`)."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg, record.args = redact(record.getMessage()), None
        return True


def redacted_logger(name: str) -> logging.Logger:
    """`logging.getLogger(name)` whose every record is redacted before any handler sees it."""
    logger = logging.getLogger(name)
    if not any(isinstance(f, RedactingFilter) for f in logger.filters):
        logger.addFilter(RedactingFilter())
    return logger
