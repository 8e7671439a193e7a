"""Token selection from logits: greedy, temperature, top-k and top-p (nucleus).

Two exact samplers of softmax(logits) (`SAMPLERS`; `sample(sampler=...)`):

- "gumbel" (the default; every committed rollout): `jax.random.categorical`'s Gumbel-max draw,
  argmax(logits + Gumbel noise), token for token: the noise is `jax.random.gumbel` with the key
  and shape `categorical` uses, and the argmax (`first_argmax`) is two vectorized reductions
  instead of XLA-CPU's variadic (value, index) reduce. It draws B x V Gumbels (threefry bits and
  two logarithms each) per decode step.
- "cdf": inverse-CDF sampling in two stages, a block of `CDF_BLOCK` tokens by its probability
  mass, then a token within the block by its probability there, each with one uniform per row:
  P(block) x P(token | block) = P(token), exactly as a distribution; in float32 each stage
  resolves probabilities to about 2^-24 of its total (blocks of mass below ~1e-7 are drawn
  with a probability rounded to that grid, as the Gumbel draw's default low-resolution noise
  is biased below ~1e-7). Two uniforms per row instead of V Gumbels. Other draws than "gumbel"
  for the same key, so it is a knob, off by default.

Both report the drawn token's log-prob as `jax.nn.log_softmax` computes it.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

SAMPLERS = ("gumbel", "cdf")
CDF_BLOCK = 128  # tokens per block of the "cdf" sampler's first stage


def filter_logits(logits_BV: jax.Array, top_k: int | None = None, top_p: float = 1.0) -> jax.Array:
    """Sets logits outside the top-k set and outside the top-p nucleus to -inf.

    The nucleus keeps the smallest prefix of descending-probability tokens whose mass reaches
    top_p (always at least the most likely token); ties at the cut-off are kept.
    """
    neg_inf = jnp.float32(-jnp.inf)
    if top_k is not None and 0 < top_k < logits_BV.shape[-1]:
        kth_B1 = jax.lax.top_k(logits_BV, top_k)[0][:, -1:]
        logits_BV = jnp.where(logits_BV < kth_B1, neg_inf, logits_BV)
    if top_p < 1.0:
        sorted_BV = jnp.sort(logits_BV, axis=-1)[:, ::-1]
        probs_BV = jax.nn.softmax(sorted_BV, axis=-1)
        drop_BV = jnp.cumsum(probs_BV, axis=-1) - probs_BV >= top_p
        cutoff_B1 = jnp.min(jnp.where(drop_BV, jnp.inf, sorted_BV), axis=-1, keepdims=True)
        logits_BV = jnp.where(logits_BV < cutoff_B1, neg_inf, logits_BV)
    return logits_BV


def sampling_logits(
    logits_BV: jax.Array, temperature: float, top_k: int | None = None, top_p: float = 1.0
) -> jax.Array:
    """The float32 logits the sampler draws from: logits / temperature, then top-k / top-p
    (temperature 0, greedy: the untempered logits)."""
    logits_BV = logits_BV.astype(jnp.float32)
    if temperature == 0.0:
        return logits_BV
    return filter_logits(logits_BV / temperature, top_k, top_p)


def first_argmax(x_BV: jax.Array) -> jax.Array:
    """`jnp.argmax(x_BV, axis=-1)` (int32): the first maximal entry of each row, or its first
    NaN, as a max and a min-index reduction (XLA-CPU runs argmax's variadic reduce about 9x
    slower than a max over the same [128, 49152] array)."""
    v = x_BV.shape[-1]
    index_V = jnp.arange(v, dtype=jnp.int32)
    max_B1 = jnp.max(x_BV, axis=-1, keepdims=True)
    # one min-reduction: a NaN's index - V (negative) ranks before every maximum's index
    key_BV = jnp.where(jnp.isnan(x_BV), index_V - v, jnp.where(x_BV == max_B1, index_V, v))
    first_B = jnp.min(key_BV, axis=-1)
    return jnp.where(first_B < 0, first_B + v, first_B)


def gumbel_max(rng: jax.Array, logits_BV: jax.Array) -> jax.Array:
    """`jax.random.categorical(rng, logits_BV, axis=-1)`, token for token (int32)."""
    noise_BV = jax.random.gumbel(rng, logits_BV.shape, logits_BV.dtype)
    return first_argmax(noise_BV + logits_BV)


def _pick(weights_BK: jax.Array, u_B: jax.Array) -> jax.Array:
    """Index k with probability weights[k] / sum(weights) per row, for u ~ U[0, 1): the first k
    of positive weight whose running sum exceeds u x the sum (never a zero weight; if rounding
    puts u x the sum at or past the last running sum, the last positive weight)."""
    k = weights_BK.shape[-1]
    cum_BK = jnp.cumsum(weights_BK, axis=-1)
    target_B1 = u_B[:, None] * cum_BK[:, -1:]
    index_K = jnp.arange(k, dtype=jnp.int32)
    positive_BK = weights_BK > 0
    first_B = jnp.min(jnp.where((cum_BK > target_B1) & positive_BK, index_K, k), axis=-1)
    last_B = jnp.max(jnp.where(positive_BK, index_K, -1), axis=-1)
    return jnp.where(first_B < k, first_B, last_B)


def inverse_cdf(rng: jax.Array, logits_BV: jax.Array, block: int = CDF_BLOCK) -> jax.Array:
    """Token ids [B] (int32) drawn from softmax(logits_BV) by two-stage inverse-CDF sampling:
    a block of `block` tokens by its mass, then a token in it (see the module docstring)."""
    b, v = logits_BV.shape
    weights_BV = jnp.exp(logits_BV - jnp.max(logits_BV, axis=-1, keepdims=True))
    weights_BNC = jnp.pad(weights_BV, ((0, 0), (0, -v % block))).reshape(b, -1, block)
    u_block, u_token = jax.random.uniform(rng, (2, b), jnp.float32)
    block_B = _pick(jnp.sum(weights_BNC, axis=-1), u_block)
    in_block_BC = jnp.take_along_axis(weights_BNC, block_B[:, None, None], axis=1)[:, 0]
    return block_B * block + _pick(in_block_BC, u_token)


def draw_with_logp(
    rng: jax.Array,
    logits_BV: jax.Array,
    temperature: float,
    top_k: int | None = None,
    top_p: float = 1.0,
    sampler: str = "gumbel",
) -> tuple[jax.Array, jax.Array]:
    """(token ids [B], their log-prob [B] under the distribution they were drawn from). Greedy
    (temperature 0) takes the argmax and reports its untempered log-prob. `sampler`: one of
    `SAMPLERS` (the module docstring)."""
    if sampler not in SAMPLERS:
        raise ValueError(f"sampler must be one of {SAMPLERS}, got {sampler!r}")
    sampled_BV = sampling_logits(logits_BV, temperature, top_k, top_p)
    if temperature == 0.0:
        tok_B = jnp.argmax(sampled_BV, axis=-1).astype(jnp.int32)
    elif sampler == "gumbel":
        tok_B = gumbel_max(rng, sampled_BV)
    else:
        tok_B = inverse_cdf(rng, sampled_BV)
    logz_BV = jax.nn.log_softmax(sampled_BV, axis=-1)
    return tok_B, jnp.take_along_axis(logz_BV, tok_B[:, None], axis=-1)[:, 0]


def draw(
    rng: jax.Array,
    logits_BV: jax.Array,
    temperature: float,
    top_k: int | None = None,
    top_p: float = 1.0,
    sampler: str = "gumbel",
) -> jax.Array:
    """Sampled token ids [B]; temperature 0 means greedy (argmax)."""
    return draw_with_logp(rng, logits_BV, temperature, top_k, top_p, sampler)[0]
