"""Memory and time of log-probs + entropy over a large vocabulary: full [B, T, V] logits (today's
path) vs the chunked head (`chunked_token_logprobs_and_entropy`), ratios in one run.

Run: ``python -m benchmarks.bench_logprob_memory [--vocab=49152 --d_model=576 --batch=8
--seq=256 --chunks=32,64,128]``. From the final hidden states and a tied head weight: the
forward (log-probs, entropies) and the forward + backward (gradient of a PPO-like loss w.r.t. the
head weight and the hidden states). Memory from XLA's buffer assignment of the compiled program
(`compiled.memory_analysis()`): temp = scratch buffers beyond arguments and outputs, total =
arguments + outputs + temp - aliased. (jax 0.10 also has `peak_memory_in_bytes`; on CPU it
reports about the argument size only, so it is not used.) Time: the median wall time per call
after one warm-up call.
"""

from __future__ import annotations

from collections.abc import Callable

import jax
import jax.numpy as jnp
import numpy as np
from absl import app, flags

from benchmarks.timing import time_calls
from calclip_jax.fp8 import PrecisionRecipe, TensorPrecision
from calclip_jax.model import (
    ModelConfig,
    chunked_token_logprobs_and_entropy,
    lm_head_dot,
    token_logprobs_and_entropy,
)
from calclip_jax.model.lm_head import tied_lm_head

_VOCAB = flags.DEFINE_integer("vocab", 49152, "Vocabulary size V (SmolLM2: 49,152).")
_D_MODEL = flags.DEFINE_integer("d_model", 576, "Hidden width D (SmolLM2-135M: 576).")
_BATCH = flags.DEFINE_integer("batch", 8, "Sequences B (an RL minibatch).")
_SEQ = flags.DEFINE_integer("seq", 256, "Sequence length T.")
_CHUNKS = flags.DEFINE_list("chunks", ["32", "64", "128"], "Chunk sizes to compare.")
_LM_HEAD = flags.DEFINE_enum("lm_head", "bf16", ["bf16", "fp32"], "lm_head precision.")
_REPS = flags.DEFINE_integer("reps", 3, "Timed calls per program.")

MB = 2.0**20


def _inputs(b: int, t: int, d: int, v: int) -> tuple[jax.Array, ...]:
    rng = np.random.default_rng(0)
    hidden = jnp.asarray(rng.normal(size=(b, t, d)), jnp.float32)
    weight = jnp.asarray(rng.normal(size=(v, d)) / np.sqrt(d), jnp.float32)
    tokens = jnp.asarray(rng.integers(0, v, size=(b, t)), jnp.int32)
    mask = jnp.asarray(np.arange(t)[None, :] >= t // 4, jnp.int32) * jnp.ones((b, 1), jnp.int32)
    adv = jnp.asarray(np.where(np.arange(b) % 2, 1.0, -1.0)[:, None], jnp.float32)
    return hidden, weight, tokens, mask, adv


def _programs(recipe: PrecisionRecipe, chunk: int | None) -> tuple[Callable, Callable]:
    """(forward, forward + backward) of the full path (chunk None) or the chunked one."""
    cfg = ModelConfig(
        vocab_size=_VOCAB.value, d_model=_D_MODEL.value, n_layers=1, n_heads=1, n_kv_heads=1,
        head_dim=2, d_ff=1,
    )  # fmt: skip
    head = lm_head_dot(cfg, recipe)

    def forward(h, w, tokens, mask):
        if chunk is None:
            return token_logprobs_and_entropy(tied_lm_head(h, w, recipe), tokens, mask)
        return chunked_token_logprobs_and_entropy(h, w, head, tokens, mask, 1.0, chunk)

    def loss(h, w, tokens, mask, adv):
        logp, entropy = forward(h, w, tokens, mask)
        return -jnp.sum(logp * adv) - 0.01 * jnp.sum(entropy)

    return forward, jax.grad(loss, argnums=(0, 1))


def _measure(fn: Callable, args: tuple, reps: int) -> tuple[float, float, float]:
    """(temp MiB, total MiB, median seconds per call) of jit(fn)(*args)."""
    compiled = jax.jit(fn).lower(*args).compile()
    stats = compiled.memory_analysis()
    total = (
        stats.argument_size_in_bytes
        + stats.output_size_in_bytes
        + stats.temp_size_in_bytes
        - stats.alias_size_in_bytes
    )
    return stats.temp_size_in_bytes / MB, total / MB, time_calls(compiled, *args, reps=reps)


def main(argv: list[str]) -> None:
    del argv
    b, t, d, v = _BATCH.value, _SEQ.value, _D_MODEL.value, _VOCAB.value
    recipe = PrecisionRecipe(lm_head=TensorPrecision(_LM_HEAD.value))
    hidden, weight, tokens, mask, adv = _inputs(b, t, d, v)
    arms: list[tuple[str, int | None]] = [("full", None)]
    arms += [(f"chunk {c}", int(c)) for c in _CHUNKS.value]
    print(
        f"B={b} T={t} D={d} V={v} lm_head={_LM_HEAD.value} reps={_REPS.value} "
        f"{jax.devices()[0].platform}; one [B, T, V] float32 = {b * t * v * 4 / MB:.1f} MiB"
    )
    rows = []
    for name, chunk in arms:
        forward, grad = _programs(recipe, chunk)
        fwd = _measure(forward, (hidden, weight, tokens, mask), _REPS.value)
        bwd = _measure(grad, (hidden, weight, tokens, mask, adv), _REPS.value)
        rows.append((name, fwd, bwd))
    _, (f_temp, _, f_time), (b_temp, _, b_time) = rows[0]
    print("ratio: temp memory, resp. time, over the full path's")
    print(
        f"{'':<10} {'fwd temp MiB':>12} {'total':>8} {'ratio':>6} {'ms':>8} {'ratio':>6} "
        f"{'fwd+bwd temp MiB':>16} {'total':>8} {'ratio':>6} {'ms':>8} {'ratio':>6}"
    )
    for name, (ft, fp, fs), (bt, bp, bs) in rows:
        print(
            f"{name:<10} {ft:>12.1f} {fp:>8.1f} {ft / f_temp:>6.3f} {1e3 * fs:>8.1f} "
            f"{fs / f_time:>6.2f} {bt:>16.1f} {bp:>8.1f} {bt / b_temp:>6.3f} {1e3 * bs:>8.1f} "
            f"{bs / b_time:>6.2f}"
        )


if __name__ == "__main__":
    app.run(main)
