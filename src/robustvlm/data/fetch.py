"""`robustvlm data fetch fashion-mnist`: download Fashion-MNIST's four IDX files and check each
by checksum before it is kept.

A file is kept when its MD5 is Zalando's published one (the `.gz` files of the official mirror,
the checksums torchvision also checks) or when the SHA-256 of its unzipped bytes is that of the
data (measured on Debian's `dataset-fashion-mnist` copy, which recompresses the same bytes, so
its `.gz` MD5s differ). Each file is written to `NAME.part` and renamed into place only once
checked, so a killed fetch leaves no half file under a final name; files already there and
correct are not downloaded again. `urllib` reads http(s):// and file:// alike, so a local mirror
works offline (`--url file:///mnt/mirror/`). A mirror URL is checked before any request
(`checked_mirror_url`): http(s):// with a host, or file://, and never credentials (the rule of every
served command, `redact.check_url`). Written on the standard library: the four files need no
download framework.
"""

from __future__ import annotations

import gzip
import hashlib
import shutil
import urllib.error
import urllib.request
import zlib
from pathlib import Path
from urllib.parse import urlsplit

from robustvlm.errors import ConfigError, DataError, MissingDataSource
from robustvlm.redact import check_url, holds_credentials

#: Zalando's own copy of the files (the project's repository; MIT licence)
FASHION_URL = "https://raw.githubusercontent.com/zalandoresearch/fashion-mnist/master/data/fashion/"
#: name -> (MD5 of the published .gz, SHA-256 of the unzipped bytes)
FASHION_CHECKSUMS = {
    "train-images-idx3-ubyte.gz": ("8d4fb7e6c68d591d4c3dfef9ec88bf0d",
                                   "c59f468a2f672dc815687fe0f83887768d799fd8a3f3276145d20f83aa44d888"),
    "train-labels-idx1-ubyte.gz": ("25c81989df183df01b3e8a0aad5dffbe",
                                   "bad3541b69d912435c50bb6ba87bec294ff4f6a2e1246121d8633921760443d9"),
    "t10k-images-idx3-ubyte.gz": ("bef4ecab320f06d8554ea6380940ec79",
                                  "5b4141f0afbad91edebe8549f8fcffe087ea10ca49f1dbef5c9a5cd8815ce37b"),
    "t10k-labels-idx1-ubyte.gz": ("bb300cfdad3c16e7a12a480ee83cd310",
                                  "0402a96d92fd2663957122ceb108a494c5af83dab82d92729df917d7dec38c34"),
}


def _digest(path: Path, algorithm: str, unzip: bool = False) -> str:
    digest = hashlib.new(algorithm)
    with (gzip.open(path, "rb") if unzip else path.open("rb")) as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def checksum_ok(path: Path, name: str) -> bool:
    """Whether `path` is the file `name` of Fashion-MNIST (see the module doc)."""
    md5, content_sha256 = FASHION_CHECKSUMS[name]
    if _digest(path, "md5") == md5:
        return True
    try:
        return _digest(path, "sha256", unzip=True) == content_sha256
    except (OSError, EOFError, zlib.error):  # not gzip, cut short, or its compressed bytes damaged
        return False


def checked_mirror_url(url: str) -> str:
    """`url` when it may be a mirror's base URL: file://PATH, or an http(s):// URL that passes
    `redact.check_url` (a host, no user-info, no query, no key-like value); else a ConfigError
    that never repeats it (it may hold a key)."""
    if holds_credentials(url):
        raise ConfigError("--url holds credentials (user:key@, a key parameter or a key-like value): a mirror is "
                          "read without a key, and the URL would be sent in every request; give its plain address")
    if urlsplit(url).scheme == "file":
        return url
    try:
        return check_url(url)
    except ValueError as err:
        raise ConfigError(f"--url {err}; a mirror is file:///FOLDER/ or http(s)://HOST/PATH/") from None


def _download(url: str, target: Path) -> None:
    try:
        with urllib.request.urlopen(url, timeout=60) as response, target.open("wb") as out:
            shutil.copyfileobj(response, out)
    except (urllib.error.URLError, OSError, ValueError) as err:
        target.unlink(missing_ok=True)
        raise MissingDataSource(f"could not download {url}: {getattr(err, 'reason', err)}") from None


def fetch_fashion_mnist(folder: Path, base_url: str = FASHION_URL) -> list[tuple[str, bool]]:
    """Download the four files from `base_url` into `folder` and check each; returns
    [(name, downloaded)] (False: already there and correct). A file that fails its checksum is
    removed and reported as a DataError naming its URL; no `.part` file outlives a failure."""
    checked_mirror_url(base_url)
    folder.mkdir(parents=True, exist_ok=True)
    done = []
    for name in FASHION_CHECKSUMS:
        final = folder / name
        if final.is_file() and checksum_ok(final, name):
            done.append((name, False))
            continue
        url = base_url.rstrip("/") + "/" + name
        part = folder / (name + ".part")
        try:
            _download(url, part)
            if not checksum_ok(part, name):
                raise DataError("checksum mismatch: not Fashion-MNIST's file (nothing kept)", url)
            part.replace(final)
        finally:
            part.unlink(missing_ok=True)
        done.append((name, True))
    return done
