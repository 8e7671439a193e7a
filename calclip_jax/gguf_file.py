"""One parsed GGUF file per process, shared by the config, tokenizer and weight readers.

The `gguf` package's reader parses every metadata field in Python when it opens a file: 5.5 s for
SmolLM2-135M-Instruct (its 49,152-token vocabulary and 48,900 merges) on a 2-core CPU. A run
needs the file's config, tokenizer and weights, so it opened the same file four times. The
reader is read-only (a memory map in mode "r"), so one instance serves every caller; a file
rewritten or replaced (another size, modification time or inode) is parsed afresh.
"""

from __future__ import annotations

import functools
import os
from pathlib import Path
from typing import Any


def import_gguf() -> Any:
    """The `gguf` module, or an ImportError saying what to install."""
    try:
        import gguf
    except ImportError as err:
        raise ImportError(
            "reading a GGUF file needs the `gguf` package: pip install 'calclip_jax[llm]'"
        ) from err
    return gguf


def open_gguf(path: str | os.PathLike[str]) -> Any:
    """The `gguf.GGUFReader` of `path`, parsed once per process while the file is unchanged."""
    resolved = Path(path).resolve()
    stat = resolved.stat()
    return _parsed(str(resolved), (stat.st_size, stat.st_mtime_ns, stat.st_ino))


@functools.lru_cache(maxsize=4)
def _parsed(path: str, version: tuple[int, int, int]) -> Any:
    del version  # in the key only: a rewritten file misses the cache
    return import_gguf().GGUFReader(path)
