"""Parquet files, read with pyarrow (optional: imported on first use)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from calclip_jax.data.local_files.errors import DataFileError

MISSING_PYARROW = "reading parquet needs pyarrow (pip install pyarrow), which is not installed"


def parquet_records(path: str) -> Iterator[tuple[int, dict[str, Any]]]:
    """(1-based row number, row as a dict) of each row of `path`."""
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise DataFileError.at(path, None, MISSING_PYARROW) from None
    try:
        table = pq.read_table(path)
    except Exception as err:  # pyarrow raises its own kinds for unreadable files
        raise DataFileError.at(path, None, f"unreadable parquet ({err})") from None
    yield from enumerate(table.to_pylist(), start=1)
