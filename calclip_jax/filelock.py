"""An inter-process lock on a file path (POSIX flock): one writer of a shared cache at a time."""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator


@contextlib.contextmanager
def file_lock(path: str) -> Iterator[None]:
    """Blocks until this process holds the exclusive lock `path` (created if missing)."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "a") as f:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f.fileno(), fcntl.LOCK_UN)
