"""Masked order statistics and quantiles: exact sort, or exact radix bisection on float bits.

Both methods select the k-th smallest valid element (0-indexed). `sort` costs one O(N log N) sort;
`bisect` builds the answer bit by bit on a monotone uint32 key of the float32 values: each of the
`iters` iterations is one counting pass over the data (O(N), fusable, no sort). With `iters=32`
the result is exact (bit-identical to the sort); with fewer iterations the low `32 - iters` key
bits stay zero, so the result is a lower bracket of the true value: `bisect_bracket` returns
`(lo, hi)` with `lo <= true <= hi`, a relative width of at most `2**-(iters - 9)` for normal
floats. `auto` picks `sort` below `bisect_threshold()` elements (static size), else `bisect`.
Threshold per backend: CPU 1024 (measured with benchmarks/bench_quantile.py: bisection was 3-25x
faster from 1e3 to 1e6 elements); GPU/TPU 2**20, a placeholder not yet measured on a GPU (a
device sort is fast there and each bisection step is a kernel launch).

Quantiles use the "lower" rule (numpy `method="lower"`): index `floor(q * (n - 1))` over the
n valid elements. With no valid element the result is `fill` (default NaN).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

BISECT_THRESHOLD = {"cpu": 1 << 10, "default": 1 << 20}  # elements; see module docstring
_SIGN = np.uint32(0x80000000)  # NumPy: no device work at import (jax.distributed)


def float_to_key(x: jax.Array) -> jax.Array:
    """Monotone map float32 -> uint32 (order of keys == order of floats; -0 < +0)."""
    bits = lax.bitcast_convert_type(x.astype(jnp.float32), jnp.uint32)
    return jnp.where(bits >= _SIGN, ~bits, bits | _SIGN)


def key_to_float(key: jax.Array) -> jax.Array:
    """Inverse of `float_to_key`."""
    bits = jnp.where(key >= _SIGN, key & ~_SIGN, ~key)
    return lax.bitcast_convert_type(bits, jnp.float32)


def _bisect_keys(key_N: jax.Array, mask_N: jax.Array, k_Q: jax.Array, iters: int) -> jax.Array:
    """Greedy high-to-low bit search: largest t with count(key < t) <= k, top `iters` bits."""

    def body(i: int, t_Q: jax.Array) -> jax.Array:
        bit = jnp.left_shift(jnp.uint32(1), (31 - i).astype(jnp.uint32))
        cand_Q = t_Q | bit
        below_Q = jnp.sum(mask_N[None, :] & (key_N[None, :] < cand_Q[:, None]), axis=1)
        return jnp.where(below_Q <= k_Q, cand_Q, t_Q)

    return lax.fori_loop(0, iters, body, jnp.zeros(k_Q.shape, jnp.uint32))


def _prepare(x: jax.Array, mask: jax.Array | None) -> tuple[jax.Array, jax.Array, jax.Array]:
    x_N = jnp.ravel(x).astype(jnp.float32)
    mask_N = jnp.ones(x_N.shape, bool) if mask is None else jnp.ravel(mask).astype(bool)
    return x_N, mask_N, jnp.sum(mask_N, dtype=jnp.int32)


def bisect_threshold(backend: str | None = None) -> int:
    """Element count from which method="auto" uses the bisection on `backend` (default: current)."""
    backend = jax.default_backend() if backend is None else backend
    return BISECT_THRESHOLD.get(backend, BISECT_THRESHOLD["default"])


def _resolve(method: str, size: int) -> str:
    if method == "auto":
        return "sort" if size < bisect_threshold() else "bisect"
    if method not in ("sort", "bisect"):
        raise ValueError(f"method must be 'auto', 'sort' or 'bisect', got {method!r}")
    return method


def masked_order_statistic(
    x: jax.Array,
    mask: jax.Array | None,
    k: jax.Array | int,
    *,
    method: str = "auto",
    iters: int = 32,
    fill: float = float("nan"),
) -> jax.Array:
    """k-th smallest valid element (0-indexed; k scalar or [Q], clipped to [0, n-1]).

    Returns float32 of k's shape; `fill` where no element is valid. `iters` only affects bisect.
    """
    x_N, mask_N, n = _prepare(x, mask)
    k_Q = jnp.clip(jnp.asarray(k, jnp.int32), 0, jnp.maximum(n - 1, 0))
    if _resolve(method, x_N.size) == "sort":
        sorted_N = jnp.sort(jnp.where(mask_N, x_N, jnp.inf))
        out = sorted_N[k_Q]
    else:
        key_N = float_to_key(x_N)
        out = key_to_float(_bisect_keys(key_N, mask_N, jnp.atleast_1d(k_Q), iters)).reshape(
            k_Q.shape
        )
    return jnp.where(n > 0, out, jnp.float32(fill))


def bisect_bracket(
    x: jax.Array, mask: jax.Array | None, k: jax.Array | int, *, iters: int
) -> tuple[jax.Array, jax.Array]:
    """(lo, hi) with lo <= k-th smallest valid element <= hi after `iters` bisection steps."""
    x_N, mask_N, n = _prepare(x, mask)
    k_Q = jnp.atleast_1d(jnp.clip(jnp.asarray(k, jnp.int32), 0, jnp.maximum(n - 1, 0)))
    t_Q = _bisect_keys(float_to_key(x_N), mask_N, k_Q, iters)
    low_bits = jnp.uint32((1 << (32 - iters)) - 1) if iters < 32 else jnp.uint32(0)
    shape = jnp.shape(k)
    return key_to_float(t_Q).reshape(shape), key_to_float(t_Q | low_bits).reshape(shape)


def quantile_index(n: jax.Array, q: jax.Array | float) -> jax.Array:
    """Index of the "lower" q-quantile among n elements: floor(q * (n - 1))."""
    nm1 = jnp.maximum(n - 1, 0).astype(jnp.float32)
    return jnp.floor(jnp.asarray(q, jnp.float32) * nm1).astype(jnp.int32)


def masked_quantile(
    x: jax.Array,
    mask: jax.Array | None,
    q: jax.Array | float,
    *,
    method: str = "auto",
    iters: int = 32,
    fill: float = float("nan"),
) -> jax.Array:
    """q-quantile(s) ("lower" rule) of the valid elements of x; q scalar or [Q] in [0, 1]."""
    n = jnp.sum(jnp.ones(jnp.shape(x), bool) if mask is None else mask.astype(bool))
    k = quantile_index(n, q)
    return masked_order_statistic(x, mask, k, method=method, iters=iters, fill=fill)


def weighted_select(
    x: jax.Array,
    weight: jax.Array,
    thresh: jax.Array | float,
    *,
    method: str = "auto",
    iters: int = 32,
) -> tuple[jax.Array, jax.Array]:
    """Smallest x_j (weight_j > 0) whose ascending cumulative weight reaches `thresh`.

    Returns (value, reachable): value = min{v : sum(weight[x <= v]) >= thresh} among the x's;
    -inf when thresh <= 0 (or subnormal); +inf (reachable False) when the total weight is
    below `thresh`.
    Weights must be >= 0 (0 marks invalid entries). Exact for both methods at iters=32.
    """
    x_N = jnp.ravel(x).astype(jnp.float32)
    w_N = jnp.ravel(weight).astype(jnp.float32)
    thresh = jnp.asarray(thresh, jnp.float32)
    # subnormal thresholds count as 0 (CPU XLA flushes denormals: keep both methods consistent)
    thresh = jnp.where(thresh < jnp.finfo(jnp.float32).tiny, 0.0, thresh)
    reachable = jnp.sum(w_N) >= thresh
    if _resolve(method, x_N.size) == "sort":
        order_N = jnp.argsort(jnp.where(w_N > 0, x_N, jnp.inf))
        cum_N = jnp.cumsum(w_N[order_N])
        # the cumsum rounds in another order than the total `reachable` compares: where it ends
        # below `thresh`, stop at the last weighted entry, not on a zero-weight one past it
        last = jnp.maximum(jnp.sum(w_N > 0) - 1, 0)
        idx = jnp.minimum(jnp.sum(cum_N < thresh), last)
        value = x_N[order_N][idx]
    else:
        key_N = float_to_key(x_N)

        def body(i: int, t: jax.Array) -> jax.Array:
            cand = t | jnp.left_shift(jnp.uint32(1), (31 - i).astype(jnp.uint32))
            return jnp.where(jnp.sum(jnp.where(key_N < cand, w_N, 0.0)) < thresh, cand, t)

        value = key_to_float(lax.fori_loop(0, iters, body, jnp.uint32(0)))
    value = jnp.where(reachable, value, jnp.inf)
    return jnp.where(thresh <= 0, -jnp.inf, value), reachable
