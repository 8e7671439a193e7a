"""The forward of a GRPO batch whose rows come in groups sharing one prompt, prompt run once.

Rows g*G .. g*G+G-1 of `tokens_BT` [B, P + N] hold G responses (columns P..) to one left-padded
prompt (columns ..P). The prompt is run once per group (B / G rows) with a KV cache, the cache
is repeated G times along the batch, and the N response columns are run against it: the causal
attention of the whole sequence, with the prompt's dense GEMMs done on B / G rows instead of B
(for P = 16, N = 32, G = 8: 29% fewer token rows). The backward sums each group's prompt
gradients through the repeat.

The numbers are those of the whole-sequence forward up to float rounding, not bitwise: the GEMMs
see other shapes, attention is `attend_cached` (the cached path) for every recipe (on CUDA, bf16
then gives up cuDNN flash attention: the [B, heads, N, P + N] scores are materialized in the
forward and recomputed in the backward; its bf16 dots declare the bf16 x bf16 -> f32 algorithm,
so the backward's take bf16 operands as the whole-sequence path's do), each
response's gradient into the prompt's K/V is summed over the group in the K/V cache's storage dtype
(bfloat16 for the BF16 and FP8 presets), and FP8 current scaling takes its amax per part (the
prompt rows, then the response rows) instead of over the whole sequence. Delayed scaling is not
supported: its amax histories would observe two forwards per step.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np

from calclip_jax.fp8 import PrecisionRecipe
from calclip_jax.model.config import ModelConfig
from calclip_jax.model.kv_cache import init_cache


@dataclasses.dataclass(frozen=True)
class PromptGroups:
    """How a batch's rows share prompts: `group_size` consecutive rows per prompt, each row the
    prompt then exactly `response_len` response columns (the sampler's `max_new_tokens`)."""

    group_size: int
    response_len: int

    def __post_init__(self) -> None:
        if self.group_size < 1 or self.response_len < 1:
            raise ValueError(f"group_size and response_len must be >= 1, got {self}")

    def prompt_len(self, total_len: int) -> int:
        """Prompt columns P of a row of `total_len` columns."""
        p = total_len - self.response_len
        if p < 1:
            raise ValueError(f"rows of {total_len} columns hold no prompt before {self}")
        return p

    def check_batch(self, rows: int, total_len: int) -> None:
        """Raises ValueError unless [rows, total_len] splits into whole groups with a prompt."""
        self.prompt_len(total_len)
        if rows % self.group_size:
            raise ValueError(f"{rows} rows do not split into groups of {self.group_size}")


def check_prompt_groups(batch: dict[str, np.ndarray], groups: PromptGroups) -> None:
    """Raises ValueError unless every group's rows hold the same prompt columns (tokens,
    positions, attention mask) and no response token lies in them (host arrays)."""
    b, t = batch["tokens"].shape
    groups.check_batch(b, t)
    g, p = groups.group_size, groups.prompt_len(t)
    if np.any(np.asarray(batch["response_mask"])[:, :p]):
        raise ValueError(f"response tokens within the first {p} columns (the prompt's)")
    for key in ("tokens", "positions", "attn_mask"):
        prompt_GRP = np.asarray(batch[key])[:, :p].reshape(b // g, g, p)
        if not np.all(prompt_GRP == prompt_GRP[:, :1]):
            raise ValueError(f"rows of a group of {g} differ in {key!r} within the first {p}")


def shared_prompt_outputs(
    apply: Callable[..., tuple[jax.Array, object]],
    config: ModelConfig,
    recipe: PrecisionRecipe,
    groups: PromptGroups,
    tokens_BT: jax.Array,
    positions_BT: jax.Array,
    attn_mask_BT: jax.Array,
    **kwargs,
) -> jax.Array:
    """The model outputs (logits or hidden states) at columns P - 1 .. P + N - 1, [B, N + 1, ...].

    `apply(tokens, positions, attn_mask, cache, cache_index, **kwargs)` is the Transformer's
    apply with its variables bound. Column P - 1 (the prompt's last, which predicts the first
    response token) comes from the prompt pass, the rest from the response pass. Only the first
    row of each group is read for the prompt columns.
    """
    b, t = tokens_BT.shape
    groups.check_batch(b, t)
    g, p = groups.group_size, groups.prompt_len(t)
    cache = init_cache(config, recipe, b // g, t)
    prompt = (x[::g, :p] for x in (tokens_BT, positions_BT, attn_mask_BT))
    prompt_out, cache = apply(*prompt, cache, 0, **kwargs)
    cache = jax.tree.map(lambda x: jnp.repeat(x, g, axis=0), cache)
    response = (x[:, p:] for x in (tokens_BT, positions_BT, attn_mask_BT))
    response_out, _ = apply(*response, cache, p, **kwargs)
    last_prompt = jnp.repeat(prompt_out[:, -1:], g, axis=0)
    return jnp.concatenate([last_prompt, response_out], axis=1)
