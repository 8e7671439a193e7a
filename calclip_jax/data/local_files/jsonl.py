"""JSON Lines: one JSON object per line; blank lines are skipped."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from calclip_jax.data.local_files.errors import DataFileError


def jsonl_records(path: str) -> Iterator[tuple[int, dict[str, Any]]]:
    """(1-based line number, object) of each non-blank line of `path`."""
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, start=1):
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except json.JSONDecodeError as err:
                raise DataFileError.at(path, number, f"invalid JSON ({err.msg})") from None
            if not isinstance(record, dict):
                raise DataFileError.at(
                    path, number, f"a line must be a JSON object, got {type(record).__name__}"
                )
            yield number, record
