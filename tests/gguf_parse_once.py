"""Tests that read the shipped GGUF through transformers (the oracle) and through calclip_jax
share one parse of it: the `gguf` package's reader parses every metadata field in Python (5.5 s
for SmolLM2-135M-Instruct on a 2-core CPU), and transformers' loader parses the file for its
config and again for its weights (three times for the model). Both sides read the same read-only
reader object, as both would build an identical one from the same file."""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import Iterator
from typing import Any

import pytest


@functools.cache
def _parsed(path: str, reader_class: type) -> Any:
    return reader_class(path)


@contextlib.contextmanager
def one_parse_per_file() -> Iterator[None]:
    """Within the block, `gguf.GGUFReader(path)` in read mode returns the test session's one
    reader of that file."""
    import gguf

    real = gguf.GGUFReader

    def reader(path: str | os.PathLike[str], mode: str = "r") -> Any:
        return _parsed(os.path.realpath(path), real) if mode == "r" else real(path, mode)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(gguf, "GGUFReader", reader)
        yield
