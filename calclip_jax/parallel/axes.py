"""The mesh's axis names, defined once (no imports: the model layer reads them too)."""

from __future__ import annotations

MESH_AXES: tuple[str, str, str] = ("data", "fsdp", "tensor")
BATCH_AXES: tuple[str, str] = ("data", "fsdp")  # the batch dimension is split over both
TENSOR_AXIS: str = "tensor"  # Megatron tensor parallelism: heads, MLP hidden, vocabulary
