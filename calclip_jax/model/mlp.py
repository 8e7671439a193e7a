"""SwiGLU feed-forward block, and the fused gate/up kernel a float32 sampler runs it with."""

from __future__ import annotations

from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
from flax import traverse_util

from calclip_jax.fp8 import PrecisionRecipe, RecipeDense
from calclip_jax.model.config import ModelConfig

GATE_UP = "gate_up_proj"  # the fused kernel's module name: [D, 2F], gate and up columns interleaved


class MLP(nn.Module):
    """down_proj(silu(gate_proj(x)) * up_proj(x)); every matmul a RecipeDense. Given a
    `GATE_UP` kernel (`fuse_gate_up`) instead of gate_proj's and up_proj's, gate and up are one
    GEMM of twice the width.

    The block runs on the tokens as rows, x [N, D] (a free reshape of [B, T, D]): each weight
    gradient then contracts one axis, and XLA-CPU needs no transposed copy of the SiLU
    backward's output before it (on [B, T, F] it writes one per gate/up gradient, 22 ms each on
    the Tunix benchmark's update). The same values, bit for bit
    (`tests/model/test_model_mlp_rows.py`)."""

    config: ModelConfig
    recipe: PrecisionRecipe

    @nn.compact
    def __call__(self, x_BTD: jax.Array) -> jax.Array:
        cfg, pol = self.config, self.recipe
        x_ND = x_BTD.reshape(-1, x_BTD.shape[-1])  # tokens as rows: see the docstring
        if GATE_UP in self.variables.get("params", {}):
            gate_up_NF2 = RecipeDense(2 * cfg.d_ff, pol, name=GATE_UP)(x_ND)
            gate_up_NF2 = gate_up_NF2.reshape(-1, cfg.d_ff, 2)
            gate_NF, up_NF = gate_up_NF2[..., 0], gate_up_NF2[..., 1]
        else:
            gate_NF = RecipeDense(cfg.d_ff, pol, name="gate_proj")(x_ND)
            up_NF = RecipeDense(cfg.d_ff, pol, name="up_proj")(x_ND)
        out_ND = RecipeDense(cfg.d_model, pol, name="down_proj")(jax.nn.silu(gate_NF) * up_NF)
        return out_ND.reshape(x_BTD.shape)


def fuse_gate_up(params: Any) -> Any:
    """`params` with each MLP's gate_proj and up_proj kernels [D, F] replaced by one `GATE_UP`
    kernel [D, 2F]: column 2j is gate's j, 2j + 1 up's j, so a split of F (tensor parallelism,
    `sharding`) keeps each shard's gate and up columns together."""
    flat = traverse_util.flatten_dict(params)
    fused = {}
    for path, kernel in flat.items():
        if path[-3:] == ("mlp", "gate_proj", "kernel"):
            up = flat[(*path[:-2], "up_proj", "kernel")]
            d, f = kernel.shape
            fused[(*path[:-2], GATE_UP, "kernel")] = jnp.stack([kernel, up], -1).reshape(d, 2 * f)
        elif path[-3:] != ("mlp", "up_proj", "kernel"):
            fused[path] = kernel
    return traverse_util.unflatten_dict(fused)
