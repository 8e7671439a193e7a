"""GRPO and DAPO as named presets over the same pieces (advantages, loss, corrections).

`get_preset("dapo")` / `get_preset("grpo")`; override fields with `dataclasses.replace` or
`RLPreset.from_dict({**get_preset("dapo").to_dict(), "kl_beta": 0.01})`.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from calclip_jax.knob_rules import above, at_least, one_of, within
from calclip_jax.rl.corrections import CorrectionConfig
from calclip_jax.rl.losses import AGGREGATIONS, KL_ESTIMATORS, check_dual_clip


@dataclasses.dataclass(frozen=True)
class RLPreset:
    name: str
    agg: str = "token-mean"  # one of losses.AGGREGATIONS
    eps_low: float = 0.2  # lower clip 1 - eps_low
    eps_high: float = 0.2  # upper clip 1 + eps_high
    dual_clip_c: float | None = None  # dual-clip constant for A < 0: > 1, or None / 0 = off
    kl_beta: float = 0.0  # KL-to-reference coefficient (0 = no reference forward)
    kl_estimator: str = "k3"  # one of losses.KL_ESTIMATORS
    adv_normalize_std: bool = True  # GRPO: divide by the group std
    adv_eps: float = 1e-6  # added to the group std
    dynamic_sampling: bool = False  # DAPO: drop groups all correct or all wrong
    overlong_shaping: bool = False  # DAPO soft overlong punishment
    overlong_max_len: int = 20480  # L_max (DAPO paper); set to the run's max response length
    overlong_cache_len: int = 4096  # L_cache (DAPO paper)
    correction: CorrectionConfig = dataclasses.field(
        default_factory=CorrectionConfig
    )  # rollout-trainer mismatch correction

    def __post_init__(self) -> None:
        one_of(self, "agg", AGGREGATIONS)
        one_of(self, "kl_estimator", KL_ESTIMATORS)
        within(self, "eps_low", "(0, 1)")
        above(self, 0, "eps_high")
        at_least(self, 0, "kl_beta", "adv_eps")
        # c <= 1 would zero every A < 0 gradient; 0 (the config files' "off") becomes None
        object.__setattr__(self, "dual_clip_c", check_dual_clip(self.dual_clip_c))
        if isinstance(self.correction, dict):
            object.__setattr__(self, "correction", CorrectionConfig(**self.correction))

    @property
    def clip_bounds(self) -> tuple[float, float]:
        """The static PPO clip bounds (1 - eps_low, 1 + eps_high)."""
        return 1.0 - self.eps_low, 1.0 + self.eps_high

    def loss_kwargs(self) -> dict[str, Any]:
        """Keyword arguments of `ppo_policy_loss` fixed by this preset."""
        return {
            "eps_low": self.eps_low,
            "eps_high": self.eps_high,
            "dual_clip_c": self.dual_clip_c,
            "agg": self.agg,
            "kl_beta": self.kl_beta,
            "kl_estimator": self.kl_estimator,
        }

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> RLPreset:
        return cls(**d)


PRESETS: dict[str, RLPreset] = {
    "grpo": RLPreset(
        name="grpo", agg="seq-mean-token-mean", eps_low=0.2, eps_high=0.2, kl_beta=0.04
    ),
    "dapo": RLPreset(
        name="dapo",
        agg="token-mean",
        eps_low=0.2,
        eps_high=0.28,
        kl_beta=0.0,
        dynamic_sampling=True,
        overlong_shaping=True,
    ),
}


def get_preset(name: str) -> RLPreset:
    """Named preset ("grpo": seq-mean-token-mean, eps 0.2, KL k3 beta 0.04; "dapo")."""
    if name not in PRESETS:
        raise ValueError(f"preset must be one of {sorted(PRESETS)}, got {name!r}")
    return PRESETS[name]
