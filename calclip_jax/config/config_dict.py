"""RunConfig <-> ml_collections.ConfigDict: the editable form families and the command line use.

`base_config()` is generated from the schema's defaults; an optional knob (`X | None`) becomes a
typed placeholder, so `--config.rl.eps_low=0.3` works while its default stays None.
`parse(config)` turns a ConfigDict (or its JSON dict) back into a validated RunConfig; every error
names the dotted key at fault.
"""

from __future__ import annotations

import dataclasses
import re
import types
import typing
from collections.abc import Collection, Mapping
from typing import Any

from ml_collections import ConfigDict, config_dict

from calclip_jax.config.schema import RunConfig


class ConfigError(ValueError):
    """A bad config value; the message starts with the dotted key."""


def _optional_type(hint: Any) -> type | None:
    """T for a `T | None` hint, else None."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(hint) if a is not type(None)]
        if len(args) == 1 and type(None) in typing.get_args(hint):
            return args[0]
    return None


def _section_dict(section: Any) -> ConfigDict:
    hints = typing.get_type_hints(type(section))
    node = ConfigDict()
    for field in dataclasses.fields(section):
        value, optional = getattr(section, field.name), _optional_type(hints[field.name])
        if value is None and optional is not None:
            node[field.name] = config_dict.placeholder(optional)
        elif isinstance(value, dict):
            node[field.name] = ConfigDict(value)
        else:
            node[field.name] = value
    return node


def base_config() -> ConfigDict:
    """Every knob at its default (the schema's), as a ConfigDict."""
    defaults = RunConfig()
    c = ConfigDict()
    for field in dataclasses.fields(defaults):
        value = getattr(defaults, field.name)
        c[field.name] = _section_dict(value) if dataclasses.is_dataclass(value) else value
    return c


def keyed_error(key: str, err: Exception, knobs: Collection[str]) -> ConfigError:
    """`err` as a ConfigError naming the dotted key: "<key>.<knob> must ..." when its message
    starts with a knob of section `key` (a "ClassName." prefix dropped), else "<key>: ..."."""
    message = str(err)
    first = re.split(r"[ =(]", message, maxsplit=1)[0]
    knob = first.rsplit(".", 1)[-1]
    if knob in knobs:
        return ConfigError(f"{key}.{knob}{message[len(first) :]}")
    return ConfigError(f"{key}: {message}")


# config.json sections a run writes beside its knobs: what it resolved (workdir.run_record.RESOLVED)
# and what its reruns changed (workdir.config_record.CHANGES_KEY, e.g. an extended run's steps)
RECORD_SECTIONS = ("resolved", "config_changes")


def _build(key: str, cls: type, values: Mapping[str, Any]) -> Any:
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(values) - known)
    if unknown:
        raise ConfigError(f"{key}: unknown keys {unknown}; allowed {sorted(known)}")
    try:
        return cls(**values)
    except (ValueError, TypeError) as err:
        raise keyed_error(key, err, known) from err


def parse(config: ConfigDict | Mapping[str, Any]) -> RunConfig:
    """The validated RunConfig of a ConfigDict (or of the same nested dict, e.g. config.json)."""
    values = config.to_dict() if isinstance(config, ConfigDict) else dict(config)
    for section in RECORD_SECTIONS:
        values.pop(section, None)
    hints = typing.get_type_hints(RunConfig)
    sections: dict[str, Any] = {}
    for field in dataclasses.fields(RunConfig):
        if field.name not in values:
            continue
        value = values.pop(field.name)
        cls = hints[field.name]
        sections[field.name] = (
            _build(field.name, cls, value) if dataclasses.is_dataclass(cls) else value
        )
    if values:
        raise ConfigError(f"unknown config sections {sorted(values)}")
    try:
        return RunConfig(**sections)
    except ValueError as err:
        raise ConfigError(str(err)) from err


def to_config_dict(run: RunConfig) -> ConfigDict:
    """A RunConfig as the ConfigDict `base_config` would be after setting its values."""
    c = base_config()
    for name, value in run.to_dict().items():
        if isinstance(value, dict) and name in c and isinstance(c[name], ConfigDict):
            for key, v in value.items():
                c[name][key] = ConfigDict(v) if isinstance(v, dict) else v
        else:
            c[name] = value
    return c
