"""Static configuration of the train step: optimizer, calibration, and the step as a whole."""

from __future__ import annotations

import dataclasses

from calclip_jax.fp8 import PrecisionRecipe
from calclip_jax.rl.calibration import CalibrationConfig
from calclip_jax.rl.presets import RLPreset, get_preset

SCHEDULES = ("constant", "cosine", "linear")


@dataclasses.dataclass(frozen=True)
class OptimConfig:
    learning_rate: float = 1e-5  # peak learning rate
    schedule: str = "constant"  # constant | cosine | linear (decay after warmup)
    warmup_updates: int = 0  # linear warmup from 0
    decay_updates: int = 1000  # total steps of the cosine / linear decay
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
class UpdateConfig:
    """Everything static the jitted train step closes over."""

    recipe: PrecisionRecipe = dataclasses.field(
        default_factory=lambda: PrecisionRecipe.preset("bf16")
    )  # trainer precision
    rl: RLPreset = dataclasses.field(default_factory=lambda: get_preset("grpo"))
    calibration: CalibrationConfig = dataclasses.field(default_factory=CalibrationConfig)
    optim: OptimConfig = dataclasses.field(default_factory=OptimConfig)
    temperature: float = 1.0  # the sampler's: log-probs are of softmax(logits / temperature)

    def __post_init__(self) -> None:
        if not self.temperature > 0:
            raise ValueError(f"temperature must be > 0 (the sampling temperature), got {self}")
        if self.calibration.enabled:
            PrecisionRecipe.preset(self.calibration.shadow_precision)  # validates the name

    @property
    def shadow_recipe(self) -> PrecisionRecipe:
        """Precision of the calibration reference forwards (BF16 by default)."""
        return PrecisionRecipe.preset(self.calibration.shadow_precision)
