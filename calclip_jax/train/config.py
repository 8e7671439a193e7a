"""Static configuration of the update step: everything the jitted step closes over."""

from __future__ import annotations

import dataclasses

from calclip_jax.fp8 import PrecisionRecipe
from calclip_jax.rl.calibration import CalibrationConfig
from calclip_jax.rl.presets import RLPreset


@dataclasses.dataclass(frozen=True)
class UpdateConfig:
    """Built by `config.build_run_spec` from the run config (no defaults of its own)."""

    recipe: PrecisionRecipe  # the trainer's precision
    rl: RLPreset  # the resolved RL preset (clip, loss aggregation, KL, correction)
    calibration: CalibrationConfig
    temperature: float  # the sampler's: log-probs are of softmax(logits / temperature)

    def __post_init__(self) -> None:
        if not self.temperature > 0:
            raise ValueError(f"temperature must be > 0 (the sampling temperature), got {self}")
        if self.calibration.enabled:
            PrecisionRecipe.preset(self.calibration.shadow_precision)  # validates the name

    @property
    def shadow_recipe(self) -> PrecisionRecipe:
        """Precision of the calibration reference forwards (BF16 by default)."""
        return PrecisionRecipe.preset(self.calibration.shadow_precision)
