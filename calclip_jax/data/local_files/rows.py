"""Reading prompt rows from a file: the prompt, the reference answer and an optional system
message, each from the field its knob names; every row checked, the first bad one named."""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Callable, Iterator
from typing import Any

from calclip_jax.data.local_files.errors import DataFileError
from calclip_jax.data.local_files.jsonl import jsonl_records
from calclip_jax.data.local_files.parquet import parquet_records

READERS: dict[str, Callable[[str], Iterator[tuple[int, dict[str, Any]]]]] = {
    ".jsonl": jsonl_records,
    ".parquet": parquet_records,
}


@dataclasses.dataclass(frozen=True)
class FieldNames:
    """Which field of a row holds what; `system` is optional in every row."""

    prompt: str = "prompt"
    answer: str = "answer"
    system: str | None = "system"


@dataclasses.dataclass(frozen=True)
class PromptRow:
    """One row: prompt, reference answer, system message ("" when none), and where it was read."""

    prompt: str
    answer: str
    system: str
    line: int


def _text(path: str, line: int, field: str, value: Any, *, required: bool, number: bool) -> str:
    """A field's value as text: a string, or (`number`: for answers) a finite number (3 -> "3")."""
    if value is None:
        if required:
            raise DataFileError.at(path, line, f"field {field!r} is missing")
        return ""
    if isinstance(value, str):
        if required and not value.strip():
            raise DataFileError.at(path, line, f"field {field!r} is empty")
        return value
    is_number = isinstance(value, (int, float)) and not isinstance(value, bool)
    if number and is_number and math.isfinite(value):
        return str(value)
    raise DataFileError.at(
        path, line, f"field {field!r} must be a string, got {type(value).__name__} {value!r}"
    )


def read_prompt_rows(path: str | os.PathLike[str], fields: FieldNames) -> list[PromptRow]:
    """Every row of `path` (.jsonl; .parquet with pyarrow); DataFileError at the first bad one."""
    path = os.fspath(path)
    reader = READERS.get(os.path.splitext(path)[1].lower())
    if reader is None:
        raise DataFileError.at(path, None, f"unknown file type; supported: {sorted(READERS)}")
    if not os.path.isfile(path):
        raise DataFileError.at(path, None, "no such file")
    rows = []
    for line, record in reader(path):
        prompt, answer = record.get(fields.prompt), record.get(fields.answer)
        system = None if fields.system is None else record.get(fields.system)
        rows.append(
            PromptRow(
                prompt=_text(path, line, fields.prompt, prompt, required=True, number=False),
                answer=_text(path, line, fields.answer, answer, required=True, number=True),
                system=_text(path, line, str(fields.system), system, required=False, number=False),
                line=line,
            )
        )
    if not rows:
        raise DataFileError.at(path, None, "no rows")
    return rows
