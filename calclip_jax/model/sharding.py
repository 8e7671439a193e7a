"""Partition rules: parameter path -> PartitionSpec over mesh axes ("data", "fsdp", "tensor").

Megatron-style tensor parallelism (column-parallel q/k/v/gate/up and lm_head, row-parallel o/down,
vocab-parallel embedding) combined with FSDP over the other weight dimension. Norm scales and
FP8 metadata are replicated. `param_specs(params, mesh)` drops an axis from a dimension it does not
divide, so tiny test models shard on any mesh.
"""

from __future__ import annotations

import re
from typing import Any

import jax
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

RULES: tuple[tuple[str, P], ...] = (
    (r"embed/embedding$", P("tensor", "fsdp")),
    (r"attn/(q_proj|k_proj|v_proj)/kernel$", P("fsdp", "tensor")),
    (r"attn/(q_proj|k_proj|v_proj)/bias$", P("tensor")),
    (r"attn/o_proj/kernel$", P("tensor", "fsdp")),
    (r"mlp/(gate_proj|up_proj|gate_up_proj)/kernel$", P("fsdp", "tensor")),
    (r"mlp/down_proj/kernel$", P("tensor", "fsdp")),
    (r"lm_head/kernel$", P("fsdp", "tensor")),
    (r"(norm|q_norm|k_norm)/scale$", P()),
)


def path_str(path: tuple[Any, ...]) -> str:
    """'layers_0/attn/q_proj/kernel' from a jax key path."""
    return "/".join(str(getattr(k, "key", getattr(k, "idx", k))) for k in path)


def spec_for(path: str) -> P:
    """PartitionSpec of one parameter path (replicated when no rule matches)."""
    for pattern, spec in RULES:
        if re.search(pattern, path):
            return spec
    return P()


def _fit(spec: P, shape: tuple[int, ...], mesh: Mesh | None) -> P:
    if mesh is None:
        return spec
    axes = []
    for dim, axis in zip(shape, tuple(spec) + (None,) * (len(shape) - len(spec)), strict=False):
        size = 1 if axis is None else mesh.shape.get(axis, 1)
        axes.append(axis if axis in mesh.shape and dim % size == 0 else None)
    return P(*axes)


def param_specs(params: Any, mesh: Mesh | None = None) -> Any:
    """Pytree of PartitionSpecs matching `params` (axes that do not divide are dropped)."""
    return jax.tree_util.tree_map_with_path(
        lambda path, x: _fit(spec_for(path_str(path)), x.shape, mesh), params
    )


def param_shardings(params: Any, mesh: Mesh) -> Any:
    """Pytree of NamedShardings for `params` on `mesh`."""
    return jax.tree.map(lambda s: NamedSharding(mesh, s), param_specs(params, mesh))
