"""``RecipeDense``: a Flax linen dense layer whose matmul precision comes from a recipe.

Params: ``kernel`` [in, out] and optional ``bias`` [out], identical for every recipe. A kernel
found in the ``PREQUANTIZED`` collection (the sampler's weight sync) replaces the param. Only
delayed scaling adds state, in the "fp8_meta" collection (per-tensor amax histories):
- ``x_amax_history`` / ``kernel_amax_history``: updated in the forward pass when the collection
  is mutable (``apply(..., mutable=["fp8_meta"])``); the scale at step t uses the history before t.
- ``grad_amax_history``: updated in the *backward* pass by the overwrite-with-gradient trick (as
  flax.linen.fp8_ops does): the gradient of the loss w.r.t. this leaf IS the new history.
  Differentiate w.r.t. the "fp8_meta" collection and build the next state with
  ``delayed.merge_fp8_meta(updated_meta, meta_grads)``. If a module is applied more than once
  under one gradient, the returned histories add up: use one differentiated call per step.
"""

from __future__ import annotations

from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp

from calclip_jax.fp8.delayed import init_history, scale_from_history, update_history
from calclip_jax.fp8.matmul import matmul_precisions, recipe_dot_general
from calclip_jax.fp8.prequantized import PREQUANTIZED, prequantized_dense
from calclip_jax.fp8.recipe import PrecisionRecipe, TensorPrecision

FP8_META = "fp8_meta"


class RecipeDense(nn.Module):
    """Dense layer ``x @ kernel (+ bias)`` with inputs [..., in]; float32 output."""

    features: int
    recipe: PrecisionRecipe
    role: str = "dense"  # one of vocabulary.MATMUL_ROLES
    use_bias: bool = False
    kernel_init: Any = nn.initializers.lecun_normal()
    bias_init: Any = nn.initializers.zeros_init()
    param_dtype: Any = jnp.float32

    def _delayed_scale(self, name: str, x: jnp.ndarray, prec: TensorPrecision) -> jnp.ndarray:
        hist = self.variable(FP8_META, name, init_history, prec.amax_history_len)
        amax = jax.lax.stop_gradient(jnp.max(jnp.abs(x.astype(jnp.float32))))
        scale = scale_from_history(
            hist.value,
            prec.jnp_dtype,
            reduce=prec.amax_reduce,
            margin=prec.margin,
            pow2_scale=prec.pow2_scale,
            fallback_amax=amax,
        )
        if self.is_mutable_collection(FP8_META) and not self.is_initializing():
            hist.value = update_history(hist.value, amax)
        return jax.lax.stop_gradient(scale)

    @nn.compact
    def __call__(self, x: jnp.ndarray) -> jnp.ndarray:
        act, wgt, grad = matmul_precisions(self.recipe, self.role)
        kwargs: dict[str, Any] = {}
        if act.is_delayed:
            kwargs["lhs_scale"] = self._delayed_scale("x_amax_history", x, act)
        if self.has_variable(PREQUANTIZED, "kernel"):
            kernel = self.get_variable(PREQUANTIZED, "kernel")
            return self._add_bias(prequantized_dense(x, kernel, act, kwargs.get("lhs_scale")))
        kernel = self.param(
            "kernel", self.kernel_init, (x.shape[-1], self.features), self.param_dtype
        )
        if wgt.is_delayed:
            kwargs["rhs_scale"] = self._delayed_scale("kernel_amax_history", kernel, wgt)
        if grad.is_delayed and (act.is_fp8 or wgt.is_fp8):
            hist = self.variable(FP8_META, "grad_amax_history", init_history, grad.amax_history_len)
            kwargs["grad_amax_history"] = hist.value
        elif grad.is_delayed:  # no FP8 operand: the gradient precision is unused
            grad = TensorPrecision(grad.dtype, "tensor")
        dn = (((x.ndim - 1,), (0,)), ((), ()))
        return self._add_bias(recipe_dot_general(x, kernel, dn, act, wgt, grad, **kwargs))

    def _add_bias(self, y: jnp.ndarray) -> jnp.ndarray:
        if not self.use_bias:
            return y
        bias = self.param("bias", self.bias_init, (self.features,), self.param_dtype)
        return y + bias.astype(jnp.float32)
