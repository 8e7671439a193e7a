"""Named arms: override sets selected with `--config=configs/<family>.py:<arm>`."""

from __future__ import annotations

from ml_collections import ConfigDict

GRANULARITIES = ("tensor", "delayed", "channel", "block", "mx")


def _fp8(granularity: str, calibrate: bool, tis: bool = True) -> dict:
    return {
        "rollout.precision": f"fp8_{granularity}",
        "train.precision": f"fp8_{granularity}",
        "correction.mode": "token_tis" if tis else "none",
        "calibration.enabled": calibrate,
    }


ARMS: dict[str, dict] = {
    "bf16": {"rollout.precision": "bf16", "train.precision": "bf16"},
    "fp8_rollout": {"rollout.precision": "fp8_block", "train.precision": "bf16"},
    **{f"fp8_{g}_tis": _fp8(g, calibrate=False) for g in GRANULARITIES},
    **{f"fp8_{g}_tis_calib": _fp8(g, calibrate=True) for g in GRANULARITIES},
    **{f"fp8_{g}_notis": _fp8(g, calibrate=False, tis=False) for g in GRANULARITIES},
}


def apply_overrides(config: ConfigDict, overrides: dict) -> ConfigDict:
    """Sets dotted keys ("train.precision") on `config`; an unknown key raises naming it."""
    for dotted, value in overrides.items():
        *parents, leaf = dotted.split(".")
        node = config
        for name in parents:
            if name not in node:
                raise KeyError(f"config has no key {dotted!r}")
            node = node[name]
        if leaf not in node:
            raise KeyError(f"config has no key {dotted!r}")
        node[leaf] = value
    return config


def apply_arm(config: ConfigDict, arm: str | None) -> ConfigDict:
    """Applies the named arm ("" or None: none)."""
    if not arm:
        return config
    if arm not in ARMS:
        raise ValueError(f"unknown arm {arm!r}; allowed: {sorted(ARMS)}")
    return apply_overrides(config, ARMS[arm])
