"""Scale groups as array views: reshape (zero-padding ragged edges) so that a keepdims scale
broadcasts over its group, instead of materializing a full-size expanded scale.

Views per granularity (``k`` marks the reduced, size-1-in-the-scale axes):
- "tensor": ``x`` itself, every axis reduced.
- "channel": ``x`` itself, ``axis`` reduced.
- "mx": ``axis`` split into ``(ceil(n / 32), 32k)``.
- "block": the last two dims split into ``(rows / br, br k, cols / bc, bc k)``.
"""

from __future__ import annotations

import dataclasses
import math

import jax.numpy as jnp
from jax import lax

MX_BLOCK = 32


@dataclasses.dataclass(frozen=True)
class GroupLayout:
    """How ``shape`` splits into scale groups for one granularity."""

    shape: tuple[int, ...]
    granularity: str
    axis: int  # non-negative for channel / mx
    block_shape: tuple[int, int]

    @property
    def _splits(self) -> dict[int, int]:
        """Axis -> group width, for the axes cut into groups."""
        if self.granularity == "mx":
            return {self.axis: MX_BLOCK}
        if self.granularity == "block":
            nd = len(self.shape)
            return {nd - 2: self.block_shape[0], nd - 1: self.block_shape[1]}
        return {}

    @property
    def padded_shape(self) -> tuple[int, ...]:
        splits = self._splits
        return tuple(
            math.ceil(n / splits[i]) * splits[i] if i in splits else n
            for i, n in enumerate(self.shape)
        )

    @property
    def view_shape(self) -> tuple[int, ...]:
        out: list[int] = []
        for i, n in enumerate(self.padded_shape):
            width = self._splits.get(i)
            out.extend((n // width, width) if width else (n,))
        return tuple(out)

    @property
    def reduce_axes(self) -> tuple[int, ...]:
        """Axes of the view that one scale covers."""
        if self.granularity == "tensor":
            return tuple(range(len(self.shape)))
        if self.granularity == "channel":
            return (self.axis,)
        if self.granularity == "mx":
            return (self.axis + 1,)
        nd = len(self.view_shape)
        return (nd - 3, nd - 1)

    @property
    def scale_shape(self) -> tuple[int, ...]:
        """The documented scale shape (``quantize``'s module docstring)."""
        if self.granularity == "tensor":
            return ()
        reduced = set(self.reduce_axes)
        keep = self.granularity == "channel"
        return tuple(
            1 if i in reduced else n
            for i, n in enumerate(self.view_shape)
            if keep or i not in reduced
        )

    def to_groups(self, x: jnp.ndarray) -> jnp.ndarray:
        """``x`` (zero-padded where ragged) in the view shape."""
        pad = [(0, p - n) for n, p in zip(self.shape, self.padded_shape, strict=True)]
        if any(hi for _, hi in pad):
            x = jnp.pad(x, pad)
        return x.reshape(self.view_shape)

    def from_groups(self, view: jnp.ndarray) -> jnp.ndarray:
        """Inverse of ``to_groups`` (crops the padding)."""
        full = view.reshape(self.padded_shape)
        if full.shape != self.shape:
            full = lax.slice(full, (0,) * len(self.shape), self.shape)
        return full

    def scale_in_view(self, scale: jnp.ndarray) -> jnp.ndarray:
        """A documented-shape scale reshaped to broadcast over the view."""
        keep = tuple(1 if i in self.reduce_axes else n for i, n in enumerate(self.view_shape))
        return jnp.reshape(jnp.broadcast_to(scale, self.scale_shape), keep)

    def amax(self, view: jnp.ndarray) -> jnp.ndarray:
        """Absolute maximum per group, in the documented scale shape; a group holding NaN or
        inf gets a non-finite amax (NaN or inf)."""
        axes = self.reduce_axes
        nd = view.ndim
        trailing = axes == tuple(range(nd - len(axes), nd))
        if trailing and math.prod(view.shape[nd - len(axes) :]) >= 1024:
            return jnp.reshape(_trailing_abs_max(view, len(axes)), self.scale_shape)
        # XLA:CPU's fused max reduction can drop a NaN (seen next to padding and across a major
        # axis), so NaN counts as inf here: either way the group's scale becomes NaN.
        mag = jnp.where(jnp.isnan(view), jnp.float32(jnp.inf), jnp.abs(view))
        return jnp.reshape(jnp.max(mag, axis=axes), self.scale_shape)


def _trailing_abs_max(view: jnp.ndarray, n_axes: int) -> jnp.ndarray:
    """max(max(v), -min(v)) over the last ``n_axes`` axes in one variadic reduction.

    On XLA:CPU this one pass (split in two rows for a full reduction, so both threads work) is
    faster than ``max(abs(v))``, which goes to a slower fused reduction kernel.
    """
    lead = view.shape[: view.ndim - n_axes]
    size = math.prod(view.shape[view.ndim - n_axes :])
    rows = 2 if not lead and size % 2 == 0 else 1
    flat = view.reshape((*lead, rows, size // rows) if not lead else (*lead, size))
    hi, lo = lax.reduce(
        (flat, flat),
        (jnp.array(-jnp.inf, flat.dtype), jnp.array(jnp.inf, flat.dtype)),
        lambda a, b: (jnp.maximum(a[0], b[0]), jnp.minimum(a[1], b[1])),
        (flat.ndim - 1,),
    )
    amax = jnp.maximum(hi, -lo)
    return jnp.max(amax, axis=-1) if not lead else amax
