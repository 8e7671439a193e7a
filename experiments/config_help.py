"""What `--help` of experiments.train and experiments.sweep lists: the config families
(configs/*.py) with the arms, phases or options each takes after `:`, and the config groups
(the run config's sections and their knobs, for `--config.<group>.<knob>=<value>`)."""

from __future__ import annotations

import importlib
import inspect
import textwrap
from pathlib import Path
from types import ModuleType

from ml_collections import ConfigDict

from calclip_jax.config import base_config

CONFIGS_DIR = Path(__file__).resolve().parent.parent / "configs"
NOT_FAMILIES = ("__init__", "arms")


def _modules() -> dict[str, ModuleType]:
    names = sorted(p.stem for p in CONFIGS_DIR.glob("*.py") if p.stem not in NOT_FAMILIES)
    return {name: importlib.import_module(f"configs.{name}") for name in names}


def family_args(module: ModuleType) -> tuple[str, list[str]] | None:
    """(what follows `:`, its choices) of a config file: a train family's arms (its get_config
    takes an `arm` of configs/arms.py), a study's phases or a sweep's options; None for neither."""
    get_config = getattr(module, "get_config", None)
    if get_config is not None and "arm" in inspect.signature(get_config).parameters:
        from configs.arms import ARMS

        return "arm", sorted(ARMS)
    if hasattr(module, "PHASES"):
        return "phase", sorted(module.PHASES)
    if hasattr(module, "OPTIONS"):
        return "options, comma-separated", list(module.OPTIONS)
    return None


def _summary(module: ModuleType) -> str:
    return (module.__doc__ or "").strip().split("\n\n")[0].replace("\n", " ")


def _wrap(text: str, indent: str = "    ", hanging: str = "") -> str:
    return textwrap.fill(text, 100, initial_indent=indent, subsequent_indent=indent + hanging)


def families_text(kind: str) -> str:
    """The config files of `kind` ("train": families with arms; "sweep": sweep configs)."""
    lines = []
    for name, module in _modules().items():
        args = family_args(module)
        if args is None or (args[0] == "arm") != (kind == "train"):
            continue
        what, choices = args
        lines += [f"  configs/{name}.py[:<{what}>]", _wrap(_summary(module))]
        if what != "arm":
            lines.append(_wrap(f"{what}: {', '.join(choices)}"))
    if kind == "train":
        from configs.arms import ARMS

        lines += ["  arms (any family above, configs/arms.py):", _wrap(", ".join(sorted(ARMS)))]
    return "\n".join(lines)


def groups_text() -> str:
    """The config groups and their knobs (`--config.<group>.<knob>=<value>`)."""
    lines = []
    for group, value in base_config().items():
        if isinstance(value, ConfigDict):
            lines.append(_wrap(f"{group}: {', '.join(value.keys())}", "  ", hanging="    "))
        else:
            lines.append(f"  {group}")
    return "\n".join(lines)


def catalogue(kind: str) -> str:
    """The --help text after the module docstring of experiments.train ("train") or
    experiments.sweep ("sweep": its configs, then the train families a sweep's `base` names)."""
    train = f"Config families (--config=<file>[:<arm>]):\n{families_text('train')}\n"
    groups = f"Config groups (--config.<group>.<knob>=<value>):\n{groups_text()}\n"
    if kind == "train":
        return f"\n{train}\n{groups}"
    sweep = f"Sweep configs (--config=<file>[:<arg>]):\n{families_text('sweep')}\n"
    train = train.replace("Config families", "Train families (a sweep's `base`)")
    groups = groups.replace("--config.<group>.<knob>=<value>", "keys of arm and common overrides")
    return f"\n{sweep}\n{train}\n{groups}"
