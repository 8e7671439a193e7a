"""Sharding constraints on activations: the batch dimension over `BATCH_AXES`, features over
`tensor` where the Megatron pattern splits them.

The mesh is the one the program's inputs were placed on. Under `jax.jit`, an input with a
`NamedSharding` (explicit `in_shardings`, or a committed argument) carries its abstract mesh in
its abstract value, and every array computed from it inherits that mesh
(`jax.typeof(x).sharding.mesh`); a mesh set with `jax.set_mesh` counts too. With no mesh (one
device, NumPy or single-device inputs) `constrain` returns its argument untouched: the program
is the unconstrained one, bit for bit.

Invariant: a constraint never changes values, only where they live. Axes the mesh lacks, manual
axes (inside `shard_map`) and axes whose size does not divide the dimension are dropped, so any
shape is accepted on any mesh (a batch of 4 rows on 8 devices stays replicated).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import jax
from jax.sharding import NamedSharding
from jax.sharding import PartitionSpec as P

from calclip_jax.parallel.axes import BATCH_AXES, TENSOR_AXIS

BATCH: tuple[str, ...] = BATCH_AXES  # the batch (or token-row) dimension
TENSOR: str = TENSOR_AXIS  # a Megatron-split feature dimension (heads, MLP hidden, vocabulary)

Axes = str | Sequence[str] | None


def activation_mesh(x: jax.Array) -> jax.sharding.AbstractMesh | None:
    """The mesh `x` is computed on (its abstract value's, else the context's); None without one."""
    mesh = getattr(getattr(jax.typeof(x), "sharding", None), "mesh", None)
    if mesh is None or mesh.empty:
        mesh = jax.sharding.get_abstract_mesh()
    return None if mesh.empty else mesh


def batch_shards(x: jax.Array) -> int:
    """How many parts the batch axes of `x`'s mesh split a batch into (1 without a mesh)."""
    mesh = activation_mesh(x)
    return 1 if mesh is None else math.prod(dict(mesh.shape).get(a, 1) for a in BATCH_AXES)


def _fit(axes: Axes, dim: int, sizes: dict[str, int], manual: frozenset[str]) -> Axes:
    """The longest prefix of `axes` (less size-1 axes) that the mesh has, not manual, and whose
    product divides `dim`."""
    if axes is None:
        return None
    kept: list[str] = []
    product = 1
    for axis in (axes,) if isinstance(axes, str) else axes:
        if sizes.get(axis) == 1:  # splits nothing: a one-device mesh constrains nothing
            continue
        if axis not in sizes or axis in manual or dim % (product * sizes[axis]):
            break
        kept.append(axis)
        product *= sizes[axis]
    return tuple(kept) or None


def constrain(x: jax.Array, *spec: Axes) -> jax.Array:
    """`x` constrained to `PartitionSpec(*spec)` (one entry per leading dimension; `BATCH`,
    `TENSOR`, None or other mesh axis names; None and dimensions past the spec: whole on every
    device) on its mesh, fitted to its shape; `x` itself without a mesh or on one device."""
    mesh = activation_mesh(x)
    if mesh is None or mesh.size == 1:
        return x
    sizes, manual = dict(mesh.shape), frozenset(getattr(mesh, "manual_axes", ()))
    fitted = [_fit(a, d, sizes, manual) for a, d in zip(spec, x.shape, strict=False)]
    return jax.lax.with_sharding_constraint(x, NamedSharding(mesh, P(*fitted)))
