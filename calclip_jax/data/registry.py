"""Task registry: tasks register by name; every module in `calclip_jax.data.tasks` is loaded."""

from __future__ import annotations

import dataclasses
import importlib
import pkgutil
from typing import Any, TypeVar

from calclip_jax.data.task import Task

TaskT = TypeVar("TaskT", bound=type[Task])

_TASKS: dict[str, type[Task]] = {}


def register_task(cls: TaskT) -> TaskT:
    """Class decorator: registers a Task subclass under `cls.name`."""
    if not cls.name:
        raise ValueError(f"{cls.__qualname__} must set a class attribute `name`")
    old = _TASKS.get(cls.name)
    if old is not None and (old.__module__, old.__qualname__) != (cls.__module__, cls.__qualname__):
        raise ValueError(f"task {cls.name!r} is already registered by {old.__qualname__}")
    _TASKS[cls.name] = cls
    return cls


def _load_task_modules() -> None:
    package = importlib.import_module("calclip_jax.data.tasks")
    for module in pkgutil.iter_modules(package.__path__):
        importlib.import_module(f"{package.__name__}.{module.name}")


def list_tasks() -> list[str]:
    """Names of all registered tasks."""
    _load_task_modules()
    return sorted(_TASKS)


def get_task(name: str, **knobs: Any) -> Task:
    """Builds the task registered as `name` with the given knobs (ValueError names bad ones)."""
    _load_task_modules()
    if name not in _TASKS:
        raise ValueError(f"unknown task {name!r}; registered tasks: {sorted(_TASKS)}")
    cls = _TASKS[name]
    allowed = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(knobs) - allowed)
    if unknown:
        raise ValueError(f"task {name!r} has no knob(s) {unknown}; knobs: {sorted(allowed)}")
    return cls(**knobs)
