"""Per-token log-probs of a batch under a given precision recipe (trainer, shadow, old policy)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jnp

from calclip_jax.fp8 import FP8_META, PrecisionRecipe
from calclip_jax.model import (
    ModelConfig,
    Transformer,
    chunked_token_logprobs_and_entropy,
    chunks_lm_head,
    lm_head_dot,
    lm_head_weight,
    token_logprobs_and_entropy,
)
from calclip_jax.model.shared_prompt import PromptGroups, shared_prompt_outputs

Batch = Mapping[str, jax.Array]
FORWARD_KEYS = ("tokens", "positions", "attn_mask", "response_mask")  # what a forward reads


def variables_of(params: Any, fp8_meta: Any) -> dict[str, Any]:
    """Flax variables: params plus the delayed-scaling collection when there is one."""
    return {"params": params, FP8_META: fp8_meta} if fp8_meta else {"params": params}


def batch_logprobs(
    model_config: ModelConfig,
    recipe: PrecisionRecipe,
    params: Any,
    fp8_meta: Any,
    batch: Batch,
    *,
    update_fp8_meta: bool = False,
    temperature: float = 1.0,
    chunk: int | None = None,
    shared_prompt: PromptGroups | None = None,
) -> tuple[jax.Array, jax.Array, Any]:
    """(logp_BT, entropy_BT, fp8_meta') of batch["tokens"] on batch["response_mask"] positions,
    under softmax(logits / temperature): the sampler's distribution (`UpdateConfig.temperature`).

    `chunk` (`UpdateConfig.logprob_chunk`): positions per lm_head + log-softmax chunk, so no
    [B, T, V] float32 is held (`chunked_token_logprobs_and_entropy`); None, or an FP8 lm_head
    (`chunks_lm_head`), computes the full logits in one go. With `update_fp8_meta` the
    delayed-scaling histories observe this forward (update step only).

    `shared_prompt` (`UpdateConfig.shared_prompt`): the rows come in groups sharing a prompt,
    which is run once per group (`model.shared_prompt`; not with delayed scaling).
    """
    chunked = chunk is not None and chunks_lm_head(recipe)
    model = Transformer(model_config, recipe)
    args = (batch["tokens"], batch["positions"], batch["attn_mask"])
    variables = variables_of(params, fp8_meta)
    tokens_BT, mask_BT = batch["tokens"], batch["response_mask"]
    if shared_prompt is not None:
        if recipe.any_delayed:
            raise ValueError("a shared-prompt forward takes no delayed-scaling recipe")
        apply = lambda *a, **kw: model.apply(variables, *a, **kw)
        out = shared_prompt_outputs(
            apply, model_config, recipe, shared_prompt, *args, return_hidden=chunked
        )
        skip = tokens_BT.shape[1] - out.shape[1]  # columns before the prompt's last
        tokens_BT, mask_BT = tokens_BT[:, skip:], mask_BT[:, skip:]
    elif update_fp8_meta and fp8_meta:
        (out, _), mutated = model.apply(variables, *args, return_hidden=chunked, mutable=[FP8_META])
        fp8_meta = mutated[FP8_META]
    else:
        out, _ = model.apply(variables, *args, return_hidden=chunked)
    if chunked:
        logp_BT, entropy_BT = chunked_token_logprobs_and_entropy(
            out,
            lm_head_weight(model_config, params),
            lm_head_dot(model_config, recipe),
            tokens_BT,
            mask_BT,
            temperature,
            chunk,
        )
    else:
        logp_BT, entropy_BT = token_logprobs_and_entropy(out, tokens_BT, mask_BT, temperature)
    if shared_prompt is not None:  # back to [B, P + N]: the prompt's columns have no log-prob
        pad = ((0, 0), (batch["tokens"].shape[1] - logp_BT.shape[1], 0))
        logp_BT, entropy_BT = jnp.pad(logp_BT, pad), jnp.pad(entropy_BT, pad)
    return logp_BT, entropy_BT, fp8_meta
