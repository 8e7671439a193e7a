"""A file's content hash, recomputed only when its size or modification time changes."""

from __future__ import annotations

import functools
import hashlib
import os

_CHUNK = 1 << 20


@functools.lru_cache(maxsize=32)
def _sha256(path: str, size: int, mtime_ns: int) -> str:
    del size, mtime_ns  # the cache key: a rewritten file is hashed again
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def content_sha256(path: str | os.PathLike[str]) -> str:
    """sha256 hex digest of the bytes of `path`."""
    real = os.path.realpath(path)
    stat = os.stat(real)
    return _sha256(real, stat.st_size, stat.st_mtime_ns)
