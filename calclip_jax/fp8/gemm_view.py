"""Canonical GEMM views of a ``dot_general``: every operand as [batch, rows, contraction].

``lax.dot_general(lhs, rhs, dn)`` equals ``bmk,bnk->bmn`` on the views ``lhs [B, M, K]`` and
``rhs [B, N, K]`` (B: the batch dims, M / N: each operand's free dims, K: the contraction dims,
each flattened), reshaped to dot_general's output order (batch, lhs free, rhs free). The backward
GEMMs are the same contraction on transposed views: ``dlhs [B, M, K] = g [B, M, N] . rhs^T
[B, K, N]`` and ``drhs [B, N, K] = g^T [B, N, M] . lhs^T [B, K, M]``. Scale groups of a quantized
view run along its last (contraction) axis, so each GEMM's scales factor out of its dot.
"""

from __future__ import annotations

import dataclasses
import math

import jax.numpy as jnp

DimensionNumbers = tuple[tuple[tuple[int, ...], tuple[int, ...]], tuple[tuple[int, ...], ...]]


@dataclasses.dataclass(frozen=True)
class OperandView:
    """How one operand of shape ``shape`` maps to its [batch, rows, contraction] view."""

    shape: tuple[int, ...]
    batch: tuple[int, ...]
    contract: tuple[int, ...]

    @property
    def free(self) -> tuple[int, ...]:
        taken = set(self.batch) | set(self.contract)
        return tuple(a for a in range(len(self.shape)) if a not in taken)

    @property
    def perm(self) -> tuple[int, ...]:
        return self.batch + self.free + self.contract

    def sizes(self) -> tuple[int, int, int]:
        """(batch, rows, contraction) sizes of the view."""
        return tuple(math.prod(self.shape[a] for a in axes) for axes in self._groups())

    def free_shape(self) -> tuple[int, ...]:
        return tuple(self.shape[a] for a in self.free)

    def batch_shape(self) -> tuple[int, ...]:
        return tuple(self.shape[a] for a in self.batch)

    def _groups(self) -> tuple[tuple[int, ...], ...]:
        return self.batch, self.free, self.contract

    def to_view(self, x: jnp.ndarray) -> jnp.ndarray:
        """``x`` (this operand) as [batch, rows, contraction]."""
        return jnp.transpose(x, self.perm).reshape(self.sizes())

    def from_view(self, v: jnp.ndarray) -> jnp.ndarray:
        """Inverse of ``to_view``: a [batch, rows, contraction] array back in ``shape``."""
        moved = v.reshape(tuple(self.shape[a] for a in self.perm))
        return jnp.transpose(moved, tuple(self.perm.index(a) for a in range(len(self.shape))))


def operand_views(
    lhs_shape: tuple[int, ...], rhs_shape: tuple[int, ...], dimension_numbers: DimensionNumbers
) -> tuple[OperandView, OperandView]:
    """The lhs and rhs views of ``dot_general(lhs, rhs, dimension_numbers)``."""
    (lc, rc), (lb, rb) = dimension_numbers
    for name, shape, axes in (("lhs", lhs_shape, lc + lb), ("rhs", rhs_shape, rc + rb)):
        if len(set(axes)) != len(axes) or any(not 0 <= a < len(shape) for a in axes):
            raise ValueError(f"{name} axes {axes} do not fit shape {shape}")
    for lhs_axes, rhs_axes in ((lc, rc), (lb, rb)):
        if [lhs_shape[a] for a in lhs_axes] != [rhs_shape[a] for a in rhs_axes]:
            raise ValueError(f"dot_general {dimension_numbers}: {lhs_shape} x {rhs_shape}")
    return OperandView(tuple(lhs_shape), tuple(lb), tuple(lc)), OperandView(
        tuple(rhs_shape), tuple(rb), tuple(rc)
    )


def output_shape(lhs: OperandView, rhs: OperandView) -> tuple[int, ...]:
    """dot_general's output shape: batch dims, lhs free dims, rhs free dims."""
    return lhs.batch_shape() + lhs.free_shape() + rhs.free_shape()


def normalize_dimension_numbers(dimension_numbers) -> DimensionNumbers:
    """Dimension numbers as tuples of Python ints (hashable, comparable)."""
    (lc, rc), (lb, rb) = dimension_numbers
    as_ints = lambda axes: tuple(int(a) for a in axes)
    return (as_ints(lc), as_ints(rc)), (as_ints(lb), as_ints(rb))
