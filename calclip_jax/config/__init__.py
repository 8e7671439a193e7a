"""The run config: one schema (defaults), its ConfigDict form, and the resolved run spec."""

from calclip_jax.config.config_dict import ConfigError, base_config, parse, to_config_dict
from calclip_jax.config.devices import check_devices
from calclip_jax.config.schema import (
    EvalConfig,
    LogConfig,
    MeshConfig,
    ModelSizes,
    RLOverrides,
    RolloutConfig,
    RunConfig,
    SFTConfig,
    TaskConfig,
    TrainConfig,
)
from calclip_jax.config.spec import RunSpec, UpdateConfig, build_run_spec, resolved_record

__all__ = [
    "ConfigError",
    "EvalConfig",
    "LogConfig",
    "MeshConfig",
    "ModelSizes",
    "RLOverrides",
    "RolloutConfig",
    "RunConfig",
    "RunSpec",
    "SFTConfig",
    "TaskConfig",
    "TrainConfig",
    "UpdateConfig",
    "base_config",
    "build_run_spec",
    "check_devices",
    "parse",
    "resolved_record",
    "to_config_dict",
]
