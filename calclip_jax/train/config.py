"""Static configuration of the train step: optimizer, calibration, and the step as a whole."""

from __future__ import annotations

import dataclasses
from typing import Any

from calclip_jax.fp8 import PrecisionPolicy
from calclip_jax.rl.calibration import UPPER_RULES
from calclip_jax.rl.presets import RLPreset, get_preset

SCHEDULES = ("constant", "cosine", "linear")


@dataclasses.dataclass(frozen=True)
class OptimConfig:
    learning_rate: float = 1e-5  # peak learning rate
    schedule: str = "constant"  # constant | cosine | linear (decay after warmup)
    warmup_steps: int = 0  # linear warmup from 0
    decay_steps: int = 1000  # total steps of the cosine / linear decay
    weight_decay: float = 0.0  # AdamW decoupled weight decay
    b1: float = 0.9
    b2: float = 0.999
    eps: float = 1e-8
    grad_clip_norm: float = 1.0  # global-norm clipping (0 = off)

    def __post_init__(self) -> None:
        if self.schedule not in SCHEDULES:
            raise ValueError(f"optim.schedule={self.schedule!r}; allowed {list(SCHEDULES)}")
        if self.learning_rate <= 0:
            raise ValueError(f"optim.learning_rate must be > 0, got {self.learning_rate}")


@dataclasses.dataclass(frozen=True)
class CalibrationConfig:
    """Calibrated Clipping inside the train step (RESEARCH.md section 2)."""

    enabled: bool = False  # off: no shadow forward is traced at all
    period: int = 1  # K: recalibrate every K train steps (1 = every step)
    ema: float = 0.5  # bounds <- ema * previous + (1 - ema) * new, on calibration steps
    upper_rule: str = "balance"  # balance | quantile | scaled | fixed
    upper_max: float | None = None  # cap on the upper bound (None: 1 + 2 * eps_high)
    shadow_precision: str = "bf16"  # precision preset of the reference (shadow) forwards

    def __post_init__(self) -> None:
        if self.upper_rule not in UPPER_RULES:
            raise ValueError(
                f"calibration.upper_rule={self.upper_rule!r}; allowed {list(UPPER_RULES)}"
            )
        if self.period < 1:
            raise ValueError(f"calibration.period must be >= 1, got {self.period}")
        if not 0.0 <= self.ema < 1.0:
            raise ValueError(f"calibration.ema must be in [0, 1), got {self.ema}")

    @property
    def shadow_policy(self) -> PrecisionPolicy:
        return PrecisionPolicy.preset(self.shadow_precision)


@dataclasses.dataclass(frozen=True)
class StepConfig:
    """Everything static the jitted train step closes over."""

    policy: PrecisionPolicy = dataclasses.field(
        default_factory=lambda: PrecisionPolicy.preset("bf16")
    )  # trainer precision
    rl: RLPreset = dataclasses.field(default_factory=lambda: get_preset("grpo"))
    calibration: CalibrationConfig = dataclasses.field(default_factory=CalibrationConfig)
    optim: OptimConfig = dataclasses.field(default_factory=OptimConfig)

    @classmethod
    def from_dicts(cls, policy: Any, rl: Any, calibration: Any, optim: Any) -> StepConfig:
        return cls(
            policy=policy if isinstance(policy, PrecisionPolicy)
            else PrecisionPolicy.from_config(policy),
            rl=rl if isinstance(rl, RLPreset) else RLPreset.from_dict(dict(rl)),
            calibration=calibration if isinstance(calibration, CalibrationConfig)
            else CalibrationConfig(**dict(calibration)),
            optim=optim if isinstance(optim, OptimConfig) else OptimConfig(**dict(optim)),
        )
