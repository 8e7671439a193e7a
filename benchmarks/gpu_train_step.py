"""The train-step section of `gpu_run`: the train step of a model preset (`llama3_1b`: 1.24B
parameters, tied head) in one precision preset: forward, backward (every dense GEMM per the
preset, lm_head and attention BF16), AdamW on float32 master weights. Timed with its compiled
memory, its custom calls and, for an FP8 preset, the float8 GEMM check (`gpu_hlo`).

Built from `calclip_jax.model` and `calclip_jax.fp8` alone: `calclip_jax.train` imports
`calclip_jax.config` and so ml_collections, which a lent GPU has only if its wheels were carried
and installed; this section, like `gemm`, runs without them."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optax

from benchmarks.gpu_gemm import lower_compile
from benchmarks.gpu_hlo import compiled_memory, custom_calls, fp8_gemm_check, triton_gemms
from benchmarks.timing import time_calls, timed
from calclip_jax.fp8 import PrecisionRecipe
from calclip_jax.fp8.mx_cudnn import cudnn_mx_enabled
from calclip_jax.model import (
    ModelConfig,
    Transformer,
    chunked_token_logprobs_and_entropy,
    chunks_lm_head,
    lm_head_dot,
    lm_head_weight,
    token_logprobs_and_entropy,
)

LOGPROB_CHUNK = 512


def dense_params(cfg: ModelConfig) -> int:
    """Parameters of the dense GEMMs: every layer's projections and the (tied) head."""
    per_layer = sum(d_in * d_out for d_in, d_out in cfg.dense_features().values())
    return cfg.n_layers * per_layer + cfg.vocab_size * cfg.d_model


def step_flops(cfg: ModelConfig, tokens: int) -> int:
    """Model FLOPs of one train step: 6 x dense params x tokens (attention scores left out)."""
    return 6 * dense_params(cfg) * tokens


def random_batch(cfg: ModelConfig, batch_size: int, seq: int) -> dict[str, jax.Array]:
    """Uniform random tokens, every position attended to and scored."""
    tokens = np.random.default_rng(0).integers(0, cfg.vocab_size, (batch_size, seq))
    return {
        "tokens": jnp.asarray(tokens, jnp.int32),
        "positions": jnp.broadcast_to(jnp.arange(seq, dtype=jnp.int32), (batch_size, seq)),
        "attn_mask": jnp.ones((batch_size, seq), jnp.int32),
        "response_mask": jnp.ones((batch_size, seq), jnp.int32),
    }


def step_logprobs(
    cfg: ModelConfig, recipe: PrecisionRecipe, params: Any, batch: dict[str, jax.Array]
) -> jax.Array:
    """Per-token log-probs of whole sequences, as the trainer's forward computes them
    (`calclip_jax.train.forward.batch_logprobs` with `chunk=LOGPROB_CHUNK`, no shared prompt, no
    delayed scaling; tests/experiments/test_gpu_benchmark_smoke.py holds the two equal)."""
    if recipe.any_delayed:
        raise ValueError("the step section runs no delayed-scaling recipe")
    chunked = chunks_lm_head(recipe)
    args = (batch["tokens"], batch["positions"], batch["attn_mask"])
    out, _ = Transformer(cfg, recipe).apply({"params": params}, *args, return_hidden=chunked)
    tokens, mask = batch["tokens"], batch["response_mask"]
    if chunked:
        head = (lm_head_weight(cfg, params), lm_head_dot(cfg, recipe))
        return chunked_token_logprobs_and_entropy(out, *head, tokens, mask, 1.0, LOGPROB_CHUNK)[0]
    return token_logprobs_and_entropy(out, tokens, mask, 1.0)[0]


def make_train_step(
    cfg: ModelConfig, recipe: PrecisionRecipe, tx: optax.GradientTransformation
) -> Callable[..., Any]:
    """Jitted (params, opt_state, batch) -> (params, opt_state, loss), donating the state."""

    def loss(params: Any, batch: dict[str, jax.Array]) -> jax.Array:
        logp = step_logprobs(cfg, recipe, params, batch)
        return -jnp.sum(logp) / jnp.sum(batch["response_mask"])

    def step(params: Any, opt_state: Any, batch: dict[str, jax.Array]) -> Any:
        value, grads = jax.value_and_grad(loss)(params, batch)
        updates, opt_state = tx.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, value

    return jax.jit(step, donate_argnums=(0, 1))


def initial_params(cfg: ModelConfig, seq_len: int = 8) -> Any:
    """Fresh float32 master weights (one tree for every precision preset), as
    `calclip_jax.train.state.init_variables` draws them."""
    tokens = jnp.zeros((1, seq_len), jnp.int32)
    positions = jnp.arange(seq_len, dtype=jnp.int32)[None]
    model = Transformer(cfg, PrecisionRecipe.preset("bf16"))
    return model.init(jax.random.key(0), tokens, positions, jnp.ones_like(tokens))["params"]


@dataclasses.dataclass
class CompiledStep:
    """A preset's compiled train step, the state it runs on (donated at each call) and what its
    compilation showed: compile seconds, memory (GiB), custom calls, Triton GEMM fusions."""

    executable: Any
    state: list[Any]
    compile_s: float
    memory_gib: dict[str, float]
    custom_calls: dict[str, int]
    triton_gemms: int

    def __call__(self, batch: dict[str, jax.Array]) -> jax.Array:
        self.state[0], self.state[1], value = self.executable(*self.state, batch)
        return value


def compile_train_step(
    cfg: ModelConfig, preset: str, params: Any, batch: dict[str, jax.Array]
) -> CompiledStep:
    """`preset`'s train step compiled ahead of time, on a copy of `params` and fresh AdamW state."""
    tx = optax.adamw(1e-5)
    state = [jax.tree.map(jnp.copy, params)]
    state.append(tx.init(state[0]))
    step = make_train_step(cfg, PrecisionRecipe.preset(preset), tx)
    compiled, compile_s = timed(lower_compile, step, state[0], state[1], batch, wait=False)
    hlo = compiled.as_text()
    return CompiledStep(
        executable=compiled,
        state=state,
        compile_s=round(compile_s, 1),
        memory_gib=compiled_memory(compiled),
        custom_calls=custom_calls(hlo),
        triton_gemms=triton_gemms(hlo),
    )


def time_train_step(
    cfg: ModelConfig, step: CompiledStep, batch: dict[str, jax.Array], reps: int
) -> dict[str, Any]:
    """Median step time (ms) and model TFLOP/s of the compiled step, with its compile figures."""
    seconds = time_calls(step, batch, reps=reps)
    return {
        "step_ms": round(seconds * 1e3, 2),
        "model_tflops": round(step_flops(cfg, batch["tokens"].size) / seconds / 1e12, 2),
        "compile_s": step.compile_s,
        "memory_gib": step.memory_gib,
        "custom_calls": step.custom_calls,
        "triton_gemms": step.triton_gemms,
    }


def fp8_step_check(preset: str, step: CompiledStep) -> dict[str, Any]:
    """The float8 GEMM check of an FP8 preset's compiled step (for MX also whether its GEMMs took
    cuDNN, which needs compute capability >= 10)."""
    check = fp8_gemm_check(step.custom_calls, jax.default_backend())
    if preset == "fp8_mx":
        check["cudnn_mx"] = cudnn_mx_enabled()
    return check
