"""Static configuration of the update step: everything the jitted step closes over."""

from __future__ import annotations

import dataclasses

from calclip_jax.fp8 import PrecisionRecipe
from calclip_jax.rl.calibration import CalibrationConfig
from calclip_jax.rl.presets import RLPreset, get_preset


@dataclasses.dataclass(frozen=True)
class UpdateConfig:
    """Built by `config.build_run_spec` for runs; tests build it directly."""

    recipe: PrecisionRecipe = dataclasses.field(
        default_factory=lambda: PrecisionRecipe.preset("bf16")
    )  # trainer precision
    rl: RLPreset = dataclasses.field(default_factory=lambda: get_preset("grpo"))
    calibration: CalibrationConfig = dataclasses.field(default_factory=CalibrationConfig)
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
