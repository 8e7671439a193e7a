"""Jitted prefill + decode sampler: B prompts x G samples, rollout log-probs of drawn tokens."""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp

from calclip_jax.fp8 import PrecisionRecipe
from calclip_jax.model.config import ModelConfig
from calclip_jax.model.forward import positions_from_mask
from calclip_jax.model.kv_cache import init_cache
from calclip_jax.model.transformer import Transformer
from calclip_jax.rollout.batch import RolloutBatch
from calclip_jax.rollout.sampling import draw_with_logp
from calclip_jax.rollout.weight_sync import sync_weights


def sample(
    params: Any,
    model_config: ModelConfig,
    recipe: PrecisionRecipe,
    prompt_tokens_BP: jax.Array,
    prompt_mask_BP: jax.Array,
    rng: jax.Array,
    *,
    num_samples: int,
    max_new_tokens: int,
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float = 1.0,
    eos_id: int,
    pad_id: int,
    fp8_meta: Any = None,
    use_cache: bool = True,
    sampler: str = "gumbel",
) -> RolloutBatch:
    """Samples `num_samples` continuations of each left-padded prompt (rows i*G .. i*G+G-1).

    `rollout_logp` is the log-prob of each drawn token under the distribution it was drawn from
    (logits / temperature, top-k / top-p applied). `params` are the trainer's master weights;
    they are quantized here once per call per the rollout `recipe` (weight sync). Decoding
    stops at EOS per row, or when every row is done, or after `max_new_tokens`.
    `use_cache=False` recomputes the full sequence each step (reference and benchmark
    baseline). Prompts must be left-padded (prompt_mask_BP = 1 on real tokens). `sampler`:
    how a token is drawn (`sampling.SAMPLERS`: "gumbel", `jax.random.categorical`'s draws, or
    "cdf", two-stage inverse-CDF sampling of the same distribution with other draws).
    """
    if recipe.any_delayed and fp8_meta is None:
        raise ValueError("a recipe with delayed scaling needs fp8_meta (the trainer's amax state)")
    return _sample_jit(
        params,
        fp8_meta,
        jnp.asarray(prompt_tokens_BP, jnp.int32),
        jnp.asarray(prompt_mask_BP, jnp.int32),
        rng,
        jnp.int32(eos_id),
        jnp.int32(pad_id),
        config=model_config,
        recipe=recipe,
        num_samples=num_samples,
        max_new_tokens=max_new_tokens,
        temperature=float(temperature),
        top_k=None if top_k is None else int(top_k),
        top_p=float(top_p),
        use_cache=use_cache,
        sampler=sampler,
    )


_STATIC = (
    "config",
    "recipe",
    "num_samples",
    "max_new_tokens",
    "temperature",
    "top_k",
    "top_p",
    "use_cache",
    "sampler",
)


@functools.partial(jax.jit, static_argnames=_STATIC)
def _sample_jit(
    params,
    fp8_meta,
    prompt_BP,
    pmask_BP,
    rng,
    eos_id,
    pad_id,
    *,
    config,
    recipe,
    num_samples,
    max_new_tokens,
    temperature,
    top_k,
    top_p,
    use_cache,
    sampler="gumbel",
):
    model = Transformer(config, recipe)
    variables = sync_weights(params, recipe) | ({} if fp8_meta is None else {"fp8_meta": fp8_meta})
    apply = functools.partial(model.apply, variables)
    b, p = prompt_BP.shape
    g, n = num_samples, max_new_tokens
    total = p + n
    rep = functools.partial(jnp.repeat, repeats=g, axis=0)

    tokens_BT = jnp.concatenate([rep(prompt_BP), jnp.full((b * g, n), pad_id, jnp.int32)], 1)
    mask_BT = jnp.concatenate([rep(pmask_BP), jnp.zeros((b * g, n), jnp.int32)], 1)
    first_pos_B = rep(jnp.sum(pmask_BP, axis=1))

    if use_cache:
        cache = init_cache(config, recipe, b, total)
        logits_BPV, cache = apply(prompt_BP, positions_from_mask(pmask_BP), pmask_BP, cache, 0)
        cache = jax.tree.map(rep, cache)
        last_BV = rep(logits_BPV[:, -1])
    else:
        cache = None
        last_BV = apply(tokens_BT, positions_from_mask(mask_BT), mask_BT)[0][:, p - 1]

    def advance(step, tok_B, live_B, tokens_BT, mask_BT, cache):
        if use_cache:
            logits, cache = apply(
                tok_B[:, None],
                (first_pos_B + step)[:, None],
                live_B[:, None].astype(jnp.int32),
                cache,
                p + step,
            )
            return logits[:, 0], cache
        logits = apply(tokens_BT, positions_from_mask(mask_BT), mask_BT)[0]
        return jax.lax.dynamic_index_in_dim(logits, p + step, 1, keepdims=False), cache

    def body(state):
        step, rng, tokens_BT, mask_BT, logp_BT, done_B, last_BV, cache = state
        rng, key = jax.random.split(rng)
        tok_B, lp_B = draw_with_logp(key, last_BV, temperature, top_k, top_p, sampler)
        live_B = ~done_B
        tok_B = jnp.where(live_B, tok_B, pad_id)
        col = p + step
        tokens_BT = jax.lax.dynamic_update_index_in_dim(tokens_BT, tok_B, col, 1)
        mask_BT = jax.lax.dynamic_update_index_in_dim(mask_BT, live_B.astype(jnp.int32), col, 1)
        logp_BT = jax.lax.dynamic_update_index_in_dim(logp_BT, jnp.where(live_B, lp_B, 0.0), col, 1)
        done_B = done_B | (tok_B == eos_id)
        last_BV, cache = advance(step, tok_B, live_B, tokens_BT, mask_BT, cache)
        return step + 1, rng, tokens_BT, mask_BT, logp_BT, done_B, last_BV, cache

    def cond(state):
        return (state[0] < n) & ~jnp.all(state[5])

    state = (
        jnp.int32(0),
        rng,
        tokens_BT,
        mask_BT,
        jnp.zeros((b * g, total), jnp.float32),
        jnp.zeros((b * g,), jnp.bool_),
        last_BV,
        cache,
    )
    _, _, tokens_BT, mask_BT, logp_BT, _, _, _ = jax.lax.while_loop(cond, body, state)
    response_BT = mask_BT.at[:, :p].set(0)
    return RolloutBatch(
        tokens=tokens_BT,
        attn_mask=mask_BT,
        positions=positions_from_mask(mask_BT),
        response_mask=response_BT,
        rollout_logp=logp_BT,
        response_len=jnp.sum(response_BT, axis=1),
    )
