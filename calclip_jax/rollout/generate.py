"""Batched generation from task prompts: encode (left-padded), `sample`, decode the responses.

Training rollouts (`train.collect`) and evaluation (`train.evaluate`) both sample through here.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jax
import numpy as np

from calclip_jax.data import Example, Task, Tokenizer
from calclip_jax.fp8 import PrecisionRecipe
from calclip_jax.model import ModelConfig
from calclip_jax.parallel.multihost import tree_to_host
from calclip_jax.rollout.batch import RolloutBatch
from calclip_jax.rollout.sampler import sample


def encode_prompts(
    tokenizer: Tokenizer, examples: Sequence[Example], prompt_len: int
) -> tuple[np.ndarray, np.ndarray]:
    """Left-padded [B, prompt_len] prompt tokens (BOS first) and their mask."""
    return tokenizer.batch_encode(
        [tokenizer.format_prompt(ex.prompt, ex.system) for ex in examples],
        max_len=prompt_len,
        add_bos=True,
        left_pad=True,
    )


def max_prompt_len(tokenizer: Tokenizer, task: Task) -> int:
    """Longest encoded prompt (with BOS) over both splits: one static shape for the sampler."""
    return max(
        len(tokenizer.encode(tokenizer.format_prompt(ex.prompt, ex.system))) + 1
        for split in ("train", "test")
        for ex in task.examples(split)
    )


def decode_responses(
    tokenizer: Tokenizer, batch: RolloutBatch, prompt_len: int
) -> tuple[list[str], list[bool]]:
    """Response texts (before EOS) and whether each ended with EOS."""
    out = [tokenizer.decode_response(row) for row in np.asarray(batch.tokens)[:, prompt_len:]]
    return [t for t, _ in out], [f for _, f in out]


def generate(
    params: Any,
    model_config: ModelConfig,
    recipe: PrecisionRecipe,
    tokenizer: Tokenizer,
    examples: Sequence[Example],
    prompt_len: int,
    rng: jax.Array,
    *,
    num_samples: int,
    max_new_tokens: int,
    temperature: float,
    top_k: int | None = None,
    top_p: float = 1.0,
    fp8_meta: Any = None,
    sampler: str = "gumbel",
) -> RolloutBatch:
    """`sample` on encoded prompts; the batch comes back as NumPy (on every process)."""
    tokens, mask = encode_prompts(tokenizer, examples, prompt_len)
    batch = sample(
        params,
        model_config,
        recipe,
        tokens,
        mask,
        rng,
        num_samples=num_samples,
        max_new_tokens=max_new_tokens,
        temperature=temperature,
        top_k=top_k,
        top_p=top_p,
        eos_id=tokenizer.eos_id,
        pad_id=tokenizer.pad_id,
        fp8_meta=fp8_meta,
        sampler=sampler,
    )
    return tree_to_host(batch)
