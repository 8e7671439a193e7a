"""Sampling prompts of a task and scoring the responses with its verifier."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jax
import numpy as np

from calclip_jax.config.spec import RunSpec
from calclip_jax.data import Example, Task, Tokenizer
from calclip_jax.fp8 import PrecisionRecipe
from calclip_jax.model import ModelConfig
from calclip_jax.rollout import RolloutBatch, sample
from calclip_jax.train.multihost import tree_to_host


def encode_prompts(
    tokenizer: Tokenizer, examples: Sequence[Example], prompt_len: int
) -> tuple[np.ndarray, np.ndarray]:
    """Left-padded [B, prompt_len] prompt tokens (BOS first) and their mask."""
    return tokenizer.batch_encode(
        [tokenizer.format_prompt(ex.prompt) for ex in examples],
        max_len=prompt_len,
        add_bos=True,
        left_pad=True,
    )


def max_prompt_len(tokenizer: Tokenizer, task: Task) -> int:
    """Longest encoded prompt (with BOS) over both splits: one static shape for the sampler."""
    return max(
        len(tokenizer.encode(tokenizer.format_prompt(ex.prompt))) + 1
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
    )
    return tree_to_host(batch)


def greedy_responses(
    params: Any,
    model_config: ModelConfig,
    recipe: PrecisionRecipe,
    tokenizer: Tokenizer,
    task: Task,
    examples: Sequence[Example],
    prompt_len: int,
    max_new_tokens: int,
    fp8_meta: Any = None,
) -> tuple[list[str], list[bool], dict[str, np.ndarray]]:
    """Greedy responses to `examples`: (texts, finished, the verifier's per-example scores)."""
    batch = generate(
        params,
        model_config,
        recipe,
        tokenizer,
        examples,
        prompt_len,
        jax.random.key(0),
        num_samples=1,
        max_new_tokens=max_new_tokens,
        temperature=0.0,
        fp8_meta=fp8_meta,
    )
    texts, finished = decode_responses(tokenizer, batch, prompt_len)
    return texts, finished, task.verify_batch(examples, texts, finished)


def greedy_eval(
    params: Any,
    model_config: ModelConfig,
    recipe: PrecisionRecipe,
    tokenizer: Tokenizer,
    task: Task,
    examples: Sequence[Example],
    prompt_len: int,
    max_new_tokens: int,
    fp8_meta: Any = None,
) -> dict[str, float]:
    """Greedy accuracy, mean reward and garbled share on `examples`."""
    _, _, scores = greedy_responses(
        params, model_config, recipe, tokenizer, task, examples, prompt_len, max_new_tokens,
        fp8_meta,
    )  # fmt: skip
    return {
        "accuracy": float(np.mean(scores["correct"])),
        "reward": float(np.mean(scores["reward"])),
        "garbled_frac": float(np.mean(scores["garbled"])),
    }


def score_responses(
    task: Task, examples: Sequence[Example], texts: Sequence[str], finished: Sequence[bool]
) -> dict[str, float]:
    """Accuracy, finished share, bare-answer share (the response is exactly the reference) and
    garbled share of the responses to `examples`."""
    s = task.verify_batch(list(examples), list(texts), list(finished))
    rows = zip(examples, texts, finished, strict=True)
    bare = [text.strip() == ex.answer and done for ex, text, done in rows]
    return {
        "accuracy": float(s["correct"].mean()),
        "finished": float(np.mean(finished)),
        "bare_answer": float(np.mean(bare)),
        "garbled": float(s["garbled"].mean()),
        "n": len(texts),
    }


def pass_rate(
    params: Any,
    spec: RunSpec,
    examples: Sequence[Example],
    prompt_len: int,
    rng: jax.Array,
    *,
    num_samples: int,
    temperature: float,
    fp8_meta: Any = None,
) -> tuple[dict[str, float], list[Example], list[str], list[bool]]:
    """`score_responses` of `num_samples` responses per prompt in the run's rollout precision
    (temperature 0: greedy, one each); also returns (examples, texts, finished) per response."""
    run = spec.config
    sampled = temperature > 0
    batch = generate(
        params, spec.model, spec.rollout_recipe, spec.tokenizer, examples, prompt_len, rng,
        num_samples=num_samples, max_new_tokens=run.rollout.max_new_tokens,
        temperature=temperature, top_k=run.rollout.top_k if sampled else None,
        top_p=run.rollout.top_p if sampled else 1.0, fp8_meta=fp8_meta,
    )  # fmt: skip
    texts, finished = decode_responses(spec.tokenizer, batch, prompt_len)
    repeated = [ex for ex in examples for _ in range(num_samples)]
    return score_responses(spec.task, repeated, texts, finished), repeated, texts, finished
