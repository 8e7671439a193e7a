"""tfds builders (array_record, no TensorFlow) for registered tasks, and reading them back.

Each task gets a registered builder `calclip_<task name>`; the knobs travel as the task object and
name the builder config (`Task.config_name()`), so data lands in
`data_dir/calclip_<task>/<config_name>/1.0.0/`. Examples are written in generation order
(shuffling disabled), so a split read back equals `task.examples(split)`.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
from collections.abc import Iterator, Sequence
from typing import Any, overload

import numpy as np
import tensorflow_datasets as tfds

from calclip_jax.data.example import Example
from calclip_jax.data.task import SPLITS, Task
from calclip_jax.filelock import file_lock

CUSTOM_CONFIG_NOTICE = "Using custom data configuration"  # tfds: every config is ours


class _DropCustomConfigNotice(logging.Filter):
    """Drops tfds's per-builder "Using custom data configuration" warning, nothing else."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith(CUSTOM_CONFIG_NOTICE)


logging.getLogger("absl").addFilter(_DropCustomConfigNotice())


class TaskBuilder(tfds.core.GeneratorBasedBuilder, skip_registration=True):
    """Generic builder; `builder_for` makes the per-task subclasses."""

    VERSION = tfds.core.Version("1.0.0")
    RELEASE_NOTES = {"1.0.0": "Initial release."}  # noqa: RUF012 (tfds class attribute)

    def __init__(self, *, task: Task, data_dir: str | os.PathLike[str], **kwargs: Any) -> None:
        self.task = task
        config = tfds.core.BuilderConfig(
            name=task.config_name(), description=json.dumps(task.data_knobs(), sort_keys=True)
        )
        super().__init__(
            data_dir=os.fspath(data_dir), config=config, file_format="array_record", **kwargs
        )

    def _info(self) -> tfds.core.DatasetInfo:
        return tfds.core.DatasetInfo(
            builder=self,
            description=f"calclip_jax task {self.task.name!r}, data knobs {self.task.data_knobs()}",
            features=tfds.features.FeaturesDict(
                {
                    "prompt": tfds.features.Text(),
                    "answer": tfds.features.Text(),
                    "numbers": tfds.features.Tensor(shape=(None,), dtype=np.int64),
                    "target": tfds.features.Scalar(dtype=np.int64),
                    **({"system": tfds.features.Text()} if self.task.stores_system else {}),
                }
            ),
            disable_shuffling=True,
        )

    def _log_download_bytes(self) -> None:
        """Silent: tfds prints "Downloading and preparing dataset", yet nothing is downloaded."""

    def _log_download_done(self) -> None:
        """Silent: tfds prints "downloaded and prepared" (the data is generated locally)."""

    def _split_generators(self, dl_manager: tfds.download.DownloadManager) -> dict[str, Any]:
        del dl_manager  # everything is generated locally
        return {split: self._generate_examples(split) for split in SPLITS}

    def _generate_examples(self, split: str) -> Iterator[tuple[int, dict[str, Any]]]:
        for index, example in enumerate(self.task.examples(split)):
            yield index, example.to_record(with_system=self.task.stores_system)


_BUILDER_CLASSES: dict[str, type[TaskBuilder]] = {}


def builder_for(task: Task, data_dir: str | os.PathLike[str]) -> TaskBuilder:
    """The tfds builder of `task` (not yet prepared: call `download_and_prepare()`)."""
    cls = _BUILDER_CLASSES.get(task.name)
    if cls is None:
        class_name = "Calclip" + "".join(part.title() for part in task.name.split("_"))
        cls = type(class_name, (TaskBuilder,), {"name": f"calclip_{task.name}"})
        _BUILDER_CLASSES[task.name] = cls
    return cls(task=task, data_dir=data_dir)


class ExampleSource(Sequence[Example]):
    """Random access to a prepared split: `len(source)`, `source[i] -> Example`."""

    def __init__(self, data_source: Any) -> None:
        self._source = data_source

    def __len__(self) -> int:
        return len(self._source)

    @overload
    def __getitem__(self, index: int) -> Example: ...
    @overload
    def __getitem__(self, index: slice) -> list[Example]: ...
    def __getitem__(self, index: int | slice) -> Example | list[Example]:
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(len(self)))]
        if not -len(self) <= index < len(self):
            raise IndexError(index)
        return Example.from_record(self._source[index % len(self)])


@contextlib.contextmanager
def _no_tfds_progress_bars() -> Iterator[None]:
    """tfds's "Generating splits" / "Shuffling" bars off (a split takes well under a second)."""
    tqdm_utils = tfds.core.utils.tqdm_utils
    was_on = getattr(tqdm_utils, "_active", True)
    tfds.display_progress_bar(False)
    try:
        yield
    finally:
        tfds.display_progress_bar(was_on)


def load_split(
    task: Task, split: str, data_dir: str | os.PathLike[str], *, prepare: bool = True
) -> ExampleSource:
    """Reads `split` of `task` from `data_dir` (tfds array_record), building it first if absent."""
    if split not in SPLITS:
        raise ValueError(f"split must be one of {SPLITS}, got {split!r}")
    if prepare:  # one process builds; concurrent runs (parallel sweep arms) wait, then read
        lock = os.path.join(os.fspath(data_dir), f".{task.name}.lock")
        with file_lock(lock), _no_tfds_progress_bars():
            builder_for(task, data_dir).download_and_prepare()
    # a builder made now sees the prepared dataset (one made before the wait would not)
    return ExampleSource(builder_for(task, data_dir).as_data_source(split=split))
