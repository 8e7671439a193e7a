"""Recipe-driven matmuls: pick the f32, bf16 or FP8 path from ``TensorPrecision``s.

Only the parameter matmuls (projections, MLP, lm_head) are recipe-controlled; the attention
score/value matmuls are not (models keep them in bf16/f32).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax.numpy as jnp
from jax import lax

from calclip_jax.fp8.dot import fp8_dot_general
from calclip_jax.fp8.recipe import PrecisionRecipe, TensorPrecision
from calclip_jax.fp8.vocabulary import MATMUL_ROLES


def matmul_precisions(
    recipe: PrecisionRecipe, role: str = "dense"
) -> tuple[TensorPrecision, TensorPrecision, TensorPrecision]:
    """(activations, weights, gradients) precisions of a matmul with ``role`` "dense"/"lm_head".

    For "lm_head", ``recipe.lm_head`` sets both operands; the gradient uses ``recipe.gradients``
    when lm_head is FP8, else lm_head's own dtype.
    """
    if role not in MATMUL_ROLES:
        raise ValueError(f"role={role!r} is not allowed; choose one of {list(MATMUL_ROLES)}")
    if role == "dense":
        return recipe.activations, recipe.weights, recipe.gradients
    head = recipe.lm_head
    return head, head, recipe.gradients if head.is_fp8 else head


def recipe_dot_general(
    lhs: jnp.ndarray,
    rhs: jnp.ndarray,
    dimension_numbers: Any,
    lhs_prec: TensorPrecision,
    rhs_prec: TensorPrecision,
    grad_prec: TensorPrecision,
    **fp8_kwargs: Any,
) -> jnp.ndarray:
    """float32 ``dot_general``: float32 at HIGHEST (plain autodiff) if both operands are fp32,
    else ``fp8_dot_general`` (``fp8_kwargs`` go there): float8 GEMMs for FP8 operands, bf16 GEMMs
    with float32 accumulation, forward and backward, for bf16 ones."""
    if not (lhs_prec.dtype == rhs_prec.dtype == "fp32"):
        return fp8_dot_general(
            lhs,
            rhs,
            dimension_numbers,
            lhs_prec=lhs_prec,
            rhs_prec=rhs_prec,
            grad_prec=grad_prec,
            **fp8_kwargs,
        )
    return lax.dot_general(
        lhs.astype(jnp.float32),
        rhs.astype(jnp.float32),
        dimension_numbers,
        precision=lax.Precision.HIGHEST,
        preferred_element_type=jnp.float32,
    )


def plain_dot_operands(
    lhs_prec: TensorPrecision, rhs_prec: TensorPrecision
) -> tuple[Any, lax.Precision | None]:
    """(operand dtype, precision) of a matmul without an FP8 operand: float32 at HIGHEST if both
    operands are fp32, else bfloat16 at the default precision (float32 accumulation both ways)."""
    if lhs_prec.dtype == "fp32" and rhs_prec.dtype == "fp32":
        return jnp.float32, lax.Precision.HIGHEST
    return jnp.bfloat16, None


def _parse_einsum(eqn: str, lhs_ndim: int, rhs_ndim: int) -> tuple[Any, tuple[int, ...]]:
    """Dimension numbers and output permutation of a two-operand einsum without repeats/ellipsis."""
    ins, out = eqn.replace(" ", "").split("->")
    a, b = ins.split(",")
    if len(a) != lhs_ndim or len(b) != rhs_ndim or "." in eqn:
        raise ValueError(f"einsum {eqn!r} does not match operand ranks {lhs_ndim}, {rhs_ndim}")
    if len(set(a)) != len(a) or len(set(b)) != len(b) or any(c not in a + b for c in out):
        raise ValueError(f"unsupported einsum {eqn!r}")
    batch = [c for c in a if c in b and c in out]
    contract = [c for c in a if c in b and c not in out]
    if any(c not in out for c in a + b if c not in contract):
        raise ValueError(f"einsum {eqn!r}: summing a non-shared index is not supported")
    dn = (
        (tuple(a.index(c) for c in contract), tuple(b.index(c) for c in contract)),
        (tuple(a.index(c) for c in batch), tuple(b.index(c) for c in batch)),
    )
    result = batch + [c for c in a if c not in b] + [c for c in b if c not in a]
    return dn, tuple(result.index(c) for c in out)


def recipe_einsum(
    eqn: str, x: jnp.ndarray, w: jnp.ndarray, recipe: PrecisionRecipe, role: str = "dense"
) -> jnp.ndarray:
    """Two-operand einsum (activation ``x``, weight ``w``) under the recipe; float32 out.

    Stateless: delayed scaling falls back to current (per-tensor) scaling, for operands and
    gradients alike (use ``RecipeDense`` for real delayed scaling).
    """
    act, wgt, grad = (_stateless(p) for p in matmul_precisions(recipe, role))
    dn, perm = _parse_einsum(eqn, x.ndim, w.ndim)
    out = recipe_dot_general(x, w, dn, act, wgt, grad)
    return jnp.transpose(out, perm)


def _stateless(prec: TensorPrecision) -> TensorPrecision:
    if prec.is_delayed:
        return dataclasses.replace(prec, scaling="current")
    return prec
