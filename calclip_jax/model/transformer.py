"""Llama/Qwen-family decoder-only transformer whose dense matmuls follow a PrecisionRecipe."""

from __future__ import annotations

import flax.linen as nn
import jax
import jax.numpy as jnp

from calclip_jax.fp8 import PrecisionRecipe, RecipeDense
from calclip_jax.model import kv_cache
from calclip_jax.model.attention import Attention
from calclip_jax.model.config import ModelConfig
from calclip_jax.model.layers import RMSNorm, rope_cos_sin
from calclip_jax.model.lm_head import tied_lm_head
from calclip_jax.model.mlp import MLP


class Block(nn.Module):
    """Pre-norm residual block: attention then SwiGLU MLP."""

    config: ModelConfig
    recipe: PrecisionRecipe

    @nn.compact
    def __call__(self, x_BTD, cos_BTH, sin_BTH, mask_BTS, layer_cache=None, cache_index=None):
        eps = self.config.norm_eps
        attn_out, layer_cache = Attention(self.config, self.recipe, name="attn")(
            RMSNorm(eps, name="attn_norm")(x_BTD),
            cos_BTH,
            sin_BTH,
            mask_BTS,
            layer_cache,
            cache_index,
        )
        x_BTD = x_BTD + attn_out
        x_BTD = x_BTD + MLP(self.config, self.recipe, name="mlp")(
            RMSNorm(eps, name="mlp_norm")(x_BTD)
        )
        return x_BTD, layer_cache


def attention_mask(
    attn_mask_BT: jax.Array, cache: kv_cache.Cache | None, cache_index: jax.Array | None
) -> tuple[jax.Array, kv_cache.Cache | None]:
    """Boolean [B, T, S] mask: causal by slot index and restricted to valid (non-pad) keys."""
    t = attn_mask_BT.shape[1]
    if cache is None:
        key_mask_BS = attn_mask_BT.astype(jnp.bool_)
        q_slot_T = jnp.arange(t)
    else:
        key_mask_BS = kv_cache.update_key_mask(cache["key_mask"], attn_mask_BT, cache_index)
        cache = {**cache, "key_mask": key_mask_BS}
        q_slot_T = cache_index + jnp.arange(t)
    causal_TS = q_slot_T[:, None] >= jnp.arange(key_mask_BS.shape[1])[None, :]
    return causal_TS[None] & key_mask_BS[:, None, :], cache


class Transformer(nn.Module):
    """Decoder returning float32 logits [B, T, V] and the updated cache (None without one).

    With `return_hidden=True` it returns the final (normed) hidden states [B, T, D], float32,
    instead of the logits: the lm_head is then not applied (`lm_head.lm_head_dot` applies
    it, e.g. in chunks). Initialize without it, so that an untied lm_head gets its params.

    Left padding is expressed through `positions_BT` and `attn_mask_BT` (1 = real token); a causal
    mask by slot index is added inside. With a cache, the T new tokens are written at slots
    [cache_index, cache_index + T) and attend to all valid earlier slots.
    """

    config: ModelConfig
    recipe: PrecisionRecipe

    @nn.compact
    def __call__(
        self,
        tokens_BT: jax.Array,
        positions_BT: jax.Array,
        attn_mask_BT: jax.Array,
        cache: kv_cache.Cache | None = None,
        cache_index: jax.Array | None = None,
        return_hidden: bool = False,
    ) -> tuple[jax.Array, kv_cache.Cache | None]:
        cfg = self.config
        embed = nn.Embed(cfg.vocab_size, cfg.d_model, param_dtype=jnp.float32, name="embed")
        x_BTD = embed(tokens_BT).astype(jnp.float32)
        cos_BTH, sin_BTH = rope_cos_sin(positions_BT, cfg.head_dim, cfg.rope_theta)
        mask_BTS, cache = attention_mask(attn_mask_BT, cache, cache_index)
        new_cache = None if cache is None else {"key_mask": cache["key_mask"]}
        for i in range(cfg.n_layers):
            name = f"layers_{i}"
            layer_cache = None if cache is None else cache[name]
            x_BTD, layer_cache = Block(cfg, self.recipe, name=name)(
                x_BTD, cos_BTH, sin_BTH, mask_BTS, layer_cache, cache_index
            )
            if new_cache is not None:
                new_cache[name] = layer_cache
        x_BTD = RMSNorm(cfg.norm_eps, name="final_norm")(x_BTD)
        if return_hidden:
            return x_BTD.astype(jnp.float32), new_cache
        if cfg.tie_embeddings:
            logits_BTV = tied_lm_head(x_BTD, embed.embedding, self.recipe)
        else:
            logits_BTV = RecipeDense(cfg.vocab_size, self.recipe, role="lm_head", name="lm_head")(
                x_BTD
            )
        return logits_BTV.astype(jnp.float32), new_cache
