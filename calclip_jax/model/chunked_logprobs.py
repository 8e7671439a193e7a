"""Log-probs and entropies from final hidden states, `chunk` positions at a time.

Per chunk of C positions: lm_head projection, log-softmax, the chosen token's log-prob and the
entropy, under `jax.checkpoint` inside a `lax.scan`: neither the forward nor the backward holds
more than one chunk's [B, C, V] float32 logits (the backward recomputes them chunk by chunk).
The head weight's gradient is summed over chunks in float32 and rounded to the lm_head dtype
once, as the unchunked backward rounds its single matmul: results equal to float32 rounding.

FP8 lm_head: not chunked (`chunks_lm_head` is False; callers take the unchunked path). Chunking
would change its numbers: per-tensor current scaling takes the activation amax over all of
[B, T, D] and, in the backward, the gradient amax over all of [B, T, V] (finer granularities group
the weight gradient's operand along B x T), so a token's log-prob and the gradients would depend
on the chunking (a batch-composition effect), and a delayed-scaling lm_head keeps state.
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp

from calclip_jax.fp8 import PrecisionRecipe
from calclip_jax.model.lm_head import HeadDot
from calclip_jax.model.logprobs import check_temperature, next_token_stats, shift_and_mask


def chunks_lm_head(recipe: PrecisionRecipe) -> bool:
    """Whether `recipe`'s lm_head can be applied in chunks with unchanged numbers (not FP8)."""
    return not recipe.lm_head.is_fp8


def chunk_layout(n_pred: int, chunk: int | None) -> tuple[int, int]:
    """(chunks, positions per chunk) for `n_pred` predictions: the fewest chunks of at most
    `chunk` positions (one for None), all of one size, so padding is fewer positions than
    chunks."""
    n = 1 if chunk is None else math.ceil(n_pred / chunk)
    return n, math.ceil(n_pred / n)


@functools.partial(jax.custom_vjp, nondiff_argnums=(0,))
def _logits(head: HeadDot, x: jax.Array, w: jax.Array) -> jax.Array:
    return head(x, w)


def _logits_fwd(head: HeadDot, x: jax.Array, w: jax.Array):
    return head(x, w), (x, w)


def _logits_bwd(head: HeadDot, res: tuple[jax.Array, jax.Array], g: jax.Array):
    return head.vjp(*res, g)


_logits.defvjp(_logits_fwd, _logits_bwd)


def chunked_token_logprobs_and_entropy(
    hidden_BTD: jax.Array,
    head_weight: jax.Array,
    head: HeadDot,
    tokens_BT: jax.Array,
    mask_BT: jax.Array,
    temperature: float = 1.0,
    chunk: int | None = None,
) -> tuple[jax.Array, jax.Array]:
    """`token_logprobs_and_entropy(head(hidden_BTD, head_weight), ...)` in chunks.

    `chunk`: the most positions per chunk (None: the whole sequence as one chunk). The T - 1
    predictions go in the fewest chunks of at most `chunk` positions, all of one size (80
    predictions at chunk 64: two chunks of 40); the last is padded with zero hidden states,
    whose results are dropped, by fewer positions than there are chunks.
    Same conventions: position 0 gets 0, both outputs are multiplied by mask_BT, temperature
    is a static float > 0.
    """
    check_temperature(temperature)
    if chunk is not None and chunk < 1:
        raise ValueError(f"chunk must be >= 1 or None, got {chunk}")
    b, t, d = hidden_BTD.shape
    n_pred = t - 1
    if n_pred == 0:
        zeros_BT = jnp.zeros((b, t), jnp.float32)
        return zeros_BT, zeros_BT
    n, c = chunk_layout(n_pred, chunk)
    pad = n * c - n_pred
    x_BPD = jnp.pad(hidden_BTD[:, :-1], ((0, 0), (0, pad), (0, 0)))
    y_BP = jnp.pad(tokens_BT[:, 1:], ((0, 0), (0, pad)))
    x_NBCD = x_BPD.reshape(b, n, c, d).transpose(1, 0, 2, 3)
    y_NBC = y_BP.reshape(b, n, c).transpose(1, 0, 2)
    w = head_weight  # its gradient: float32 partial sums over chunks (never rounded)

    # remat: the backward recomputes a chunk's logits (prevent_cse is not needed inside scan)
    @functools.partial(jax.checkpoint, prevent_cse=False)
    def stats(w: jax.Array, x_BCD: jax.Array, y_BC: jax.Array) -> tuple[jax.Array, jax.Array]:
        return next_token_stats(_logits(head, x_BCD, w), y_BC, temperature)

    def body(carry: None, xs: tuple[jax.Array, jax.Array]):
        return carry, stats(w, *xs)

    _, (logp_NBC, entropy_NBC) = jax.lax.scan(body, None, (x_NBCD, y_NBC))
    unchunk = lambda v_NBC: v_NBC.transpose(1, 0, 2).reshape(b, n * c)[:, :n_pred]
    return shift_and_mask(unchunk(logp_NBC), unchunk(entropy_NBC), mask_BT)
