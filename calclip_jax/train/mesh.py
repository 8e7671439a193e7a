"""The one helper that builds the device mesh, and the shardings derived from it."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import jax
import numpy as np
from jax.sharding import AxisType, Mesh, NamedSharding, PartitionSpec

MESH_AXES: tuple[str, str, str] = ("data", "fsdp", "tensor")
BATCH_AXES: tuple[str, str] = ("data", "fsdp")  # the batch dimension is split over both


def make_mesh(
    data: int = -1, fsdp: int = 1, tensor: int = 1, devices: Sequence[jax.Device] | None = None
) -> Mesh:
    """Mesh over (data, fsdp, tensor) with Auto axis types; one axis may be -1 (use the rest)."""
    devices = list(devices if devices is not None else jax.devices())
    sizes = [data, fsdp, tensor]
    if sizes.count(-1) > 1:
        raise ValueError(f"mesh: at most one of data/fsdp/tensor may be -1, got {sizes}")
    known = math.prod(s for s in sizes if s != -1)
    if any(s == 0 or s < -1 for s in sizes):
        raise ValueError(f"mesh: sizes must be positive or -1, got {sizes}")
    if -1 in sizes:
        if len(devices) % known:
            raise ValueError(f"mesh: {len(devices)} devices not divisible by {known}")
        sizes[sizes.index(-1)] = len(devices) // known
    if math.prod(sizes) != len(devices):
        raise ValueError(
            f"mesh: data*fsdp*tensor = {math.prod(sizes)} but {len(devices)} devices are available"
        )
    return jax.make_mesh(tuple(sizes), MESH_AXES, axis_types=(AxisType.Auto,) * 3, devices=devices)


def batch_sharding(mesh: Mesh) -> NamedSharding:
    """Leading (batch) dimension split over data x fsdp, everything else replicated."""
    return NamedSharding(mesh, PartitionSpec(BATCH_AXES))


def replicated(mesh: Mesh) -> NamedSharding:
    return NamedSharding(mesh, PartitionSpec())


def fit_spec(spec: PartitionSpec, shape: tuple[int, ...], mesh: Mesh) -> PartitionSpec:
    """Drop mesh axes from `spec` where the dimension is not divisible by their size."""
    fitted = []
    for dim, axes in zip(shape, tuple(spec) + (None,) * (len(shape) - len(spec)), strict=False):
        names = (axes,) if isinstance(axes, str) else tuple(axes or ())
        size = math.prod(mesh.shape[n] for n in names)
        fitted.append(axes if names and dim % size == 0 else None)
    return PartitionSpec(*fitted)


def tree_shardings(tree, mesh: Mesh, spec_fn: Callable[[tuple, tuple[int, ...]], PartitionSpec]):
    """NamedShardings for every leaf of `tree` from `spec_fn(path, shape)`, fitted to the mesh."""

    def leaf(path, x):
        shape = tuple(np.shape(x))
        return NamedSharding(mesh, fit_spec(spec_fn(path, shape), shape, mesh))

    return jax.tree_util.tree_map_with_path(leaf, tree)
