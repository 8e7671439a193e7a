"""Named arms: override sets selected with `--config=configs/<family>.py:<arm>`."""

from __future__ import annotations

from ml_collections import ConfigDict

from calclip_jax.config.config_dict import ConfigError
from calclip_jax.fp8.vocabulary import FP8_PRESETS

# The <s> of the FP8 precision presets fp8_<s> (tensor, delayed, channel, block, mx): the arms
# fp8_<s>_tis, fp8_<s>_tis_calib and fp8_<s>_notis run preset fp8_<s>.
FP8_PRESET_SUFFIXES = tuple(name.removeprefix("fp8_") for name in FP8_PRESETS)


def _fp8(suffix: str, calibrate: bool, tis: bool = True) -> dict:
    return {
        "rollout.precision": f"fp8_{suffix}",
        "train.precision": f"fp8_{suffix}",
        "correction.mode": "token_tis" if tis else "none",
        "calibration.enabled": calibrate,
    }


ARMS: dict[str, dict] = {
    "bf16": {"rollout.precision": "bf16", "train.precision": "bf16"},
    "fp8_rollout": {"rollout.precision": "fp8_block", "train.precision": "bf16"},
    **{f"fp8_{s}_tis": _fp8(s, calibrate=False) for s in FP8_PRESET_SUFFIXES},
    **{f"fp8_{s}_tis_calib": _fp8(s, calibrate=True) for s in FP8_PRESET_SUFFIXES},
    **{f"fp8_{s}_notis": _fp8(s, calibrate=False, tis=False) for s in FP8_PRESET_SUFFIXES},
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
        raise ConfigError(f"unknown arm {arm!r}; allowed: {sorted(ARMS)}")
    return apply_overrides(config, ARMS[arm])
