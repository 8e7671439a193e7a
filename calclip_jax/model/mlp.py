"""SwiGLU feed-forward block."""

from __future__ import annotations

import flax.linen as nn
import jax

from calclip_jax.fp8 import PolicyDense, PrecisionPolicy
from calclip_jax.model.config import ModelConfig


class MLP(nn.Module):
    """down_proj(silu(gate_proj(x)) * up_proj(x)); every matmul a PolicyDense."""

    config: ModelConfig
    policy: PrecisionPolicy

    @nn.compact
    def __call__(self, x_BTD: jax.Array) -> jax.Array:
        cfg, pol = self.config, self.policy
        gate_BTF = PolicyDense(cfg.d_ff, pol, name="gate_proj")(x_BTD)
        up_BTF = PolicyDense(cfg.d_ff, pol, name="up_proj")(x_BTD)
        return PolicyDense(cfg.d_model, pol, name="down_proj")(jax.nn.silu(gate_BTF) * up_BTF)
