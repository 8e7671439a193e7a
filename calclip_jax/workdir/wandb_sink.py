"""Optional Weights & Biases logging (`log.wandb_project`); wandb is not a dependency."""

from __future__ import annotations

import os
from collections.abc import Mapping
from types import ModuleType
from typing import Any

from calclip_jax.config import ConfigError

INSTALL_HINT = "log.wandb_project is set but wandb is not installed: pip install wandb, or unset it"


def require_wandb() -> ModuleType:
    """The wandb module; ConfigError naming the knob when it is not installed."""
    try:
        import wandb
    except ImportError as err:
        raise ConfigError(INSTALL_HINT) from err
    return wandb


class WandbSink:
    """One W&B run per process start, named after the workdir, with the run's config."""

    def __init__(self, project: str, workdir: str, config: Mapping[str, Any]) -> None:
        wandb = require_wandb()
        name = os.path.basename(os.path.abspath(workdir))
        self._run = wandb.init(project=project, name=name, dir=workdir, config=dict(config))

    def log(self, step: int, scalars: Mapping[str, float]) -> None:
        self._run.log(dict(scalars), step=step)

    def close(self) -> None:
        self._run.finish()
