"""Evaluation: greedy accuracy and sampled pass rates on task prompts, scored by the verifier."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import jax
import numpy as np

from calclip_jax.config.spec import RunSpec
from calclip_jax.data import Example, Task, Tokenizer
from calclip_jax.fp8 import PrecisionRecipe
from calclip_jax.model import ModelConfig
from calclip_jax.rollout.generate import decode_responses, generate


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
        sampler=run.rollout.sampler,
    )  # fmt: skip
    texts, finished = decode_responses(spec.tokenizer, batch, prompt_len)
    repeated = [ex for ex in examples for _ in range(num_samples)]
    return score_responses(spec.task, repeated, texts, finished), repeated, texts, finished
