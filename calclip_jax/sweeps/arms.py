"""A sweep config's arms as dotted overrides: common < arm < seed, seeds expanded."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ml_collections import ConfigDict

from calclip_jax.config import ConfigError
from calclip_jax.workdir.seed_names import seeded_name


def flatten_overrides(node: Any, prefix: str = "") -> dict[str, Any]:
    """{"a": {"b": 1}, "c.d": 2} -> {"a.b": 1, "c.d": 2} (ConfigDicts and dicts)."""
    if isinstance(node, ConfigDict):
        node = node.to_dict()
    if not isinstance(node, Mapping):
        return {prefix: node}
    out: dict[str, Any] = {}
    for key, value in node.items():
        out.update(flatten_overrides(value, f"{prefix}.{key}" if prefix else str(key)))
    return out


def expand_arms(sweep: ConfigDict) -> dict[str, dict[str, Any]]:
    """Arm name -> merged dotted overrides (common < arm < seed), seeds expanded."""
    arms = sweep.get("arms")
    if not arms:
        raise ConfigError("sweep config: `arms` is missing or empty")
    common = flatten_overrides(sweep.get("common") or {})
    seeds = list(sweep.get("seeds") or [])
    expanded: dict[str, dict[str, Any]] = {}
    for name in arms:
        if not name or "/" in name or name.startswith("."):
            raise ConfigError(f"sweep config: bad arm name {name!r}")
        overrides = {**common, **flatten_overrides(arms[name])}
        if not seeds:
            expanded[name] = overrides
        for seed in seeds:
            expanded[seeded_name(name, seed)] = {**overrides, "seed": int(seed)}
    return expanded
