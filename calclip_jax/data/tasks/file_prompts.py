"""Bring your own data: prompts and reference answers read from a local JSONL (or parquet) file.

Each row's fields are named by knobs (`prompt_field`, `answer_field`, optional `system_field`).
The test split is a second file (`test_path`) or, without one, the rows whose prompt hashes into
the first `test_fraction` of the hash range (deterministic, disjoint by prompt). The file's
content hash is part of the data knobs, so the tfds cache (`config_name`) and the SFT cache follow
the file's bytes, not its name. Every row is checked when the task is built: a bad file fails
before anything compiles, naming the file, the line and the field.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import os
import random
import re
from fractions import Fraction
from typing import Any, ClassVar

from calclip_jax.data.example import Example
from calclip_jax.data.local_files import (
    DataFileError,
    FieldNames,
    PromptRow,
    content_sha256,
    read_prompt_rows,
)
from calclip_jax.data.registry import register_task
from calclip_jax.data.rewards import answers as read
from calclip_jax.data.rewards.builtin import BUILTIN_REWARDS
from calclip_jax.data.task import SPLITS, Task, is_test_prompt, verifier_knob
from calclip_jax.data.verify import VerifyResult, garbled_result

# the built-in answer checks the task's own verifier may use, and how each reads an answer
ANSWER_READERS = {
    "exact": lambda text: text.strip() or None,
    "last_integer": read.last_integer,
    "last_number": read.last_number,
    "boxed": read.last_boxed,
}


@register_task
@dataclasses.dataclass(frozen=True, kw_only=True)
class FilePromptsTask(Task):
    """Rows of `path` as examples, in file order; `num_train` / `num_test` None keep them all.

    Its own verifier (`verifier`, one of ANSWER_READERS' built-in checks; `tolerance` for
    last_number) gives `correct`, reward 1 or 0 (+ `format_reward`); a response without EOS or
    without a readable answer is garbled. `task.reward` replaces the reward, not `correct`.
    """

    name: ClassVar[str] = "file"
    stores_system: ClassVar[bool] = True

    path: str = ""  # the train rows (.jsonl; .parquet with pyarrow); also the test rows by hash
    test_path: str | None = None  # the test rows; None -> a hash split of `path`
    test_fraction: float = 0.1  # without test_path: the share of the hash range that is test
    prompt_field: str = "prompt"
    answer_field: str = "answer"
    system_field: str | None = "system"  # optional per row; "" or absent -> no system turn
    num_train: int | None = None  # at most this many train rows (None: all)
    num_test: int | None = None  # at most this many test rows (None: all)
    verifier: str = verifier_knob("last_number")  # one of ANSWER_READERS
    tolerance: float = verifier_knob(1e-6)  # last_number: |x - ref| <= tol * max(1, |ref|)

    def __post_init__(self) -> None:
        for knob in ("num_train", "num_test"):
            value = getattr(self, knob)
            if value is not None and value < 0:
                raise ValueError(f"{self.name}: {knob} must be >= 0 or None, got {value}")
        if not self.path:
            raise ValueError("file: knob `path` (a .jsonl or .parquet file) is required")
        if not 0.0 < self.test_fraction < 1.0:
            raise ValueError(f"file: test_fraction must be in (0, 1), got {self.test_fraction}")
        if not (math.isfinite(self.tolerance) and self.tolerance >= 0):
            raise ValueError(f"file: tolerance must be finite and >= 0, got {self.tolerance}")
        if self.verifier not in ANSWER_READERS:
            raise ValueError(
                f"file: verifier must be one of {sorted(ANSWER_READERS)}, got {self.verifier!r}"
            )
        for path in self._paths():
            if not os.path.isfile(path):
                raise DataFileError.at(path, None, "no such file")
        self.examples("train")  # reads and checks every row now, before anything compiles

    @property
    def fields(self) -> FieldNames:
        return FieldNames(self.prompt_field, self.answer_field, self.system_field)

    def data_knobs(self) -> dict[str, Any]:
        """The knobs and each file's content hash: the tfds and SFT caches follow the bytes."""
        knobs = super().data_knobs()
        knobs["content_sha256"] = [content_sha256(p) for p in self._paths()]
        return knobs

    def _paths(self) -> tuple[str, ...]:
        return (self.path,) if self.test_path is None else (self.path, self.test_path)

    def examples(self, split: str) -> list[Example]:
        if split not in SPLITS:
            raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
        key = tuple(sorted(self.data_knobs().items(), key=lambda kv: kv[0]))
        return list(_file_splits(self, repr(key))[split])

    @property
    def alphabet(self) -> str:
        """Every character of prompts, answers and system messages (for a character tokenizer),
        and the line break a system message is joined with."""
        text = "".join(
            ex.system + ex.prompt + ex.answer for split in SPLITS for ex in self.examples(split)
        )
        return "".join(dict.fromkeys(text + "\n"))

    def sample(self, rng: random.Random) -> Example:
        """A random train row (examples are read, not generated)."""
        return rng.choice(self.examples("train"))

    def verify(self, example: Example, response: str, *, finished: bool = True) -> VerifyResult:
        parsed = ANSWER_READERS[self.verifier](response)
        if not finished or parsed is None:
            return garbled_result()
        check = BUILTIN_REWARDS[self.verifier]
        kwargs = {"tol": self.tolerance} if self.verifier == "last_number" else {}
        score = check(
            [response], [example.answer], prompts=[example.prompt], finished=[True], **kwargs
        )
        correct = score[0] == 1.0
        value = parsed if isinstance(parsed, (int, Fraction)) else None
        return VerifyResult(float(correct) + self.format_reward, correct, False, value)


def _example(row: PromptRow) -> Example:
    return Example(prompt=row.prompt, answer=row.answer, numbers=(), target=0, system=row.system)


def _is_integer(text: str) -> bool:
    return re.fullmatch(r"-?[0-9]+", text.strip()) is not None


# the reference answers each verifier can compare with, and what they must be
ANSWER_KINDS = {
    "last_integer": (_is_integer, "an integer"),
    "last_number": (lambda text: read.as_number(text) is not None, "a number"),
}


def _check_answers(task: FilePromptsTask, path: str, rows: list[PromptRow]) -> None:
    """Every reference answer is one the verifier can compare with (a number for last_number)."""
    if task.verifier not in ANSWER_KINDS:
        return
    ok, kind = ANSWER_KINDS[task.verifier]
    for row in rows:
        if not ok(row.answer):
            raise DataFileError.at(
                path,
                row.line,
                f"field {task.answer_field!r} is {row.answer!r}, not {kind}, as "
                f"verifier={task.verifier!r} needs",
            )


@functools.lru_cache(maxsize=8)
def _file_splits(task: FilePromptsTask, key: str) -> dict[str, tuple[Example, ...]]:
    """The splits of `task`; `key` (its data knobs with the content hashes) keys the cache."""
    del key
    rows = {path: read_prompt_rows(path, task.fields) for path in task._paths()}
    for path, file_rows in rows.items():
        _check_answers(task, path, file_rows)
    if task.test_path is None:
        train = [r for r in rows[task.path] if not is_test_prompt(r.prompt, task.test_fraction)]
        test = [r for r in rows[task.path] if is_test_prompt(r.prompt, task.test_fraction)]
    else:
        train, test = rows[task.path], rows[task.test_path]
    out = {}
    for split, split_rows, limit in (
        ("train", train, task.num_train),
        ("test", test, task.num_test),
    ):
        if not split_rows and limit != 0:
            raise DataFileError.at(
                task.path if split == "train" or task.test_path is None else task.test_path,
                None,
                f"no {split} rows (the hash split puts a prompt in test with probability "
                f"test_fraction={task.test_fraction}); add rows or set test_path",
            )
        out[split] = tuple(_example(r) for r in split_rows[:limit])
    return out
