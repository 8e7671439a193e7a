"""Gradient accumulation: an update's minibatch run as micro-batches, one at a time.

`train.micro_batches = n` splits each minibatch into n micro-batches of whole prompt groups
(`split`): micro-batch i holds groups i, i + n, i + 2n, ..., so with the rows sharded over the
data axis every micro-batch still spans every device. The update then runs

1. a no-grad forward of each micro-batch (`map_micro`): the minibatch's log-probs, from which the
   loss, the clip bounds and Calibrated Clipping are computed on the whole minibatch, as without
   micro-batches;
2. the gradient of that loss with respect to the log-probs (cheap: per token);
3. per micro-batch, the forward again with its VJP, pulled back by that micro-batch's share of
   the cotangent, the parameter gradients summed in float32 (`accumulate_vjp`).

Only one micro-batch's activations are alive at a time, for one extra forward per update (the
forward of step 3 is a recomputation). In float32 the gradient equals the whole-minibatch one up
to float32 rounding (a test holds it there). With FP8 current scaling a per-tensor amax is taken
over the micro-batch, so the numbers are those of micro-batch composition: the old log-probs are
computed under the same split (`ppo_update.make_minibatch_forwards`), which keeps the ratio
exactly 1 at theta_old. Delayed scaling needs `train.delayed_scales="batch"`: every forward
scales from the history as the rollout batch began, and the update pushes the largest amax its
micro-batches observed (`accumulate_vjp`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
from jax import lax

from calclip_jax.fp8.delayed import merge_fp8_meta, newest_amaxes

Rows = dict[str, jax.Array]


def check_split(rows: int, micro_batches: int, group_size: int = 1) -> None:
    """Raises ValueError unless `rows` split into `micro_batches` parts of whole groups."""
    if micro_batches < 1 or rows % (micro_batches * group_size):
        raise ValueError(
            f"{rows} rows do not split into {micro_batches} micro-batches"
            + ("" if group_size == 1 else f" of whole groups of {group_size}")
        )


def split(x: jax.Array, micro_batches: int, group_size: int = 1) -> jax.Array:
    """[B, ...] -> [n, B / n, ...]: micro-batch i holds the groups i, i + n, i + 2n, ..."""
    b, rest = x.shape[0], x.shape[1:]
    check_split(b, micro_batches, group_size)
    x = x.reshape(b // (micro_batches * group_size), micro_batches, group_size, *rest)
    return jnp.moveaxis(x, 1, 0).reshape(micro_batches, b // micro_batches, *rest)


def merge(x: jax.Array, group_size: int = 1) -> jax.Array:
    """The inverse of `split`: [n, B / n, ...] -> [B, ...]."""
    n, per, rest = x.shape[0], x.shape[1], x.shape[2:]
    x = x.reshape(n, per // group_size, group_size, *rest)
    return jnp.moveaxis(x, 0, 1).reshape(n * per, *rest)


def map_micro(
    fn: Callable[[Rows], Any], batch: Rows, micro_batches: int, group_size: int = 1
) -> Any:
    """`fn` over the micro-batches of `batch` one after another (`lax.map`), outputs (pytrees
    of [rows, ...] arrays) merged back in row order; n = 1 calls `fn(batch)` as it is."""
    if micro_batches == 1:
        return fn(batch)
    parts = {k: split(v, micro_batches, group_size) for k, v in batch.items()}
    out = lax.map(fn, parts)
    return jax.tree.map(lambda x: merge(x, group_size), out)


def accumulate_vjp(
    logp_fn: Callable[[Any, Any, Rows], tuple[jax.Array, Any]],
    params: Any,
    fp8_meta: Any,
    batch: Rows,
    cotangent_BT: jax.Array,
    micro_batches: int,
    group_size: int = 1,
) -> tuple[Any, Any]:
    """(sum_i VJP(params -> log-probs of micro-batch i)(cotangent of micro-batch i), amaxes):
    the gradient, summed in float32 one micro-batch after another, of a loss of the log-probs
    whose gradient with respect to them is `cotangent_BT`.

    `logp_fn(params, fp8_meta, rows)` -> (log-probs, fp8_meta as that forward pushed it). With
    delayed scaling (a non-empty `fp8_meta`, the histories the forwards scale from) `amaxes` holds
    per history the largest amax a micro-batch's forward or backward observed (the backward's via
    the VJP with respect to `fp8_meta`: `merge_fp8_meta`); else it is {}."""
    parts = {k: split(v, micro_batches, group_size) for k, v in batch.items()}
    cotangents = split(cotangent_BT, micro_batches, group_size)

    def add(carry: tuple[Any, Any], xs: tuple[Rows, jax.Array]) -> tuple[tuple[Any, Any], None]:
        acc, seen = carry
        rows, cot = xs
        forward = lambda p, m: logp_fn(p, m, rows)
        _, vjp, pushed = jax.vjp(forward, params, fp8_meta, has_aux=True)
        grads, meta_grads = vjp(cot)
        acc = jax.tree.map(lambda a, g: a + g.astype(jnp.float32), acc, grads)
        if fp8_meta:
            now = newest_amaxes(merge_fp8_meta(pushed, meta_grads))
            seen = jax.tree.map(jnp.maximum, seen, now)
        return (acc, seen), None

    zeros = jax.tree.map(lambda p: jnp.zeros(p.shape, jnp.float32), params)
    unseen = jax.tree.map(lambda h: jnp.zeros((), jnp.float32), fp8_meta)
    (total, seen), _ = lax.scan(add, (zeros, unseen), (parts, cotangents))
    return jax.tree.map(lambda g, p: g.astype(p.dtype), total, params), seen
