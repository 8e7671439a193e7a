"""GRPO group-normalized advantages, DAPO dynamic-sampling filter and overlong reward shaping.

Rewards are flat [N = B * G], grouped as consecutive runs of G samples of the same prompt.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp


def _grouped(x_N: jax.Array, group_size: int) -> jax.Array:
    if x_N.ndim != 1 or x_N.shape[0] % group_size:
        raise ValueError(f"expected shape [B * {group_size}], got {x_N.shape}")
    return x_N.reshape(-1, group_size)


def grpo_advantages(
    rewards_N: jax.Array,
    group_size: int,
    *,
    normalize_std: bool = True,
    eps: float = 1e-6,
    ddof: int = 1,
) -> jax.Array:
    """A_i = (R_i - mean_group(R)) / (std_group(R) + eps); std skipped if `normalize_std=False`.

    `ddof=1` (default) is the unbiased std of TRL/verl; groups of one sample use ddof=0.
    A group with equal rewards gets A = 0. Returns float32 [N].
    """
    r_BG = _grouped(jnp.asarray(rewards_N, jnp.float32), group_size)
    centered_BG = r_BG - jnp.mean(r_BG, axis=1, keepdims=True)
    if normalize_std:
        dof = max(group_size - ddof, 1)
        std_B1 = jnp.sqrt(jnp.sum(centered_BG**2, axis=1, keepdims=True) / dof)
        centered_BG = centered_BG / (std_B1 + eps)
    return centered_BG.reshape(-1)


def dynamic_sampling_keep(correct_N: jax.Array, group_size: int) -> jax.Array:
    """DAPO dynamic sampling: bool [N], True for samples of groups with 0 < #correct < G.

    `correct_N` is the verifier's correctness (bool or 0/1 ints), not the (shaped) reward: the
    DAPO paper keeps a prompt iff 0 < |{o_i : is_equivalent(a, o_i)}| < G, so partial credit or
    length shaping that differs within an all-wrong / all-right group does not make it kept.
    """
    correct_N = jnp.asarray(correct_N)
    if jnp.issubdtype(correct_N.dtype, jnp.floating):
        raise TypeError(f"expected bool correctness, got {correct_N.dtype} (rewards?)")
    n_correct_B = jnp.sum(_grouped(correct_N.astype(bool), group_size), axis=1)
    keep_B = (n_correct_B > 0) & (n_correct_B < group_size)
    return jnp.repeat(keep_B, group_size)


def overlong_penalty(response_len_N: jax.Array, *, max_len: int, cache_len: int) -> jax.Array:
    """DAPO soft overlong punishment, float32 [N]: 0 if len <= max_len - cache_len,
    ((max_len - cache_len) - len) / cache_len inside the buffer, -1 beyond max_len."""
    if not 0 < cache_len <= max_len:
        raise ValueError(f"need 0 < cache_len <= max_len, got {cache_len=}, {max_len=}")
    length_N = jnp.asarray(response_len_N, jnp.float32)
    start = float(max_len - cache_len)
    buffer_N = (start - length_N) / cache_len
    return jnp.where(length_N <= start, 0.0, jnp.where(length_N <= max_len, buffer_N, -1.0))


def overlong_shaped_rewards(
    rewards_N: jax.Array, response_len_N: jax.Array, *, max_len: int, cache_len: int
) -> jax.Array:
    """rewards + overlong_penalty(response_len)."""
    penalty_N = overlong_penalty(response_len_N, max_len=max_len, cache_len=cache_len)
    return jnp.asarray(rewards_N, jnp.float32) + penalty_N
