"""Sampler throughput: KV cache vs full recomputation, FP8 vs BF16 rollout (ratios in one run).

Also prints the FP8-rollout vs BF16-trainer log-prob mismatch by granularity on the sampled
tokens. Usage: python -m benchmarks.bench_sampler [--preset=small --batch=4 --samples=4 ...]
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
from absl import app, flags

from benchmarks.timing import time_calls
from calclip_jax.fp8 import PrecisionRecipe
from calclip_jax.model import ModelConfig, Transformer, forward_logits, token_logprobs_and_entropy
from calclip_jax.rollout import sample

_PRESET = flags.DEFINE_string("preset", "small", "Model preset.")
_BATCH = flags.DEFINE_integer("batch", 4, "Prompts B.")
_SAMPLES = flags.DEFINE_integer("samples", 4, "Samples per prompt G.")
_PROMPT_LEN = flags.DEFINE_integer("prompt_len", 16, "Prompt tokens P.")
_NEW_TOKENS = flags.DEFINE_integer("new_tokens", 64, "New tokens per sample N (no EOS stop).")
_REPS = flags.DEFINE_integer("reps", 3, "Timed calls per arm (mean, after one warm-up).")


def main(argv: list[str]) -> None:
    if len(argv) > 1:  # a stray value, e.g. of the argparse form `--reps 3 5`
        raise app.UsageError(f"unexpected arguments {argv[1:]}; flags are --flag=value")
    n_prompts, samples = _BATCH.value, _SAMPLES.value
    prompt_len, new_tokens, reps = _PROMPT_LEN.value, _NEW_TOKENS.value, _REPS.value
    cfg = ModelConfig.preset(_PRESET.value)
    tokens = jnp.zeros((1, 4), jnp.int32)
    params = jax.jit(Transformer(cfg, PrecisionRecipe.preset("fp32")).init)(
        jax.random.key(0), tokens, tokens, jnp.ones_like(tokens)
    )["params"]
    prompt = jax.random.randint(jax.random.key(1), (n_prompts, prompt_len), 1, cfg.vocab_size)
    mask = jnp.ones_like(prompt)
    n_tokens = n_prompts * samples * new_tokens

    def run(preset: str, use_cache: bool):
        return lambda: sample(
            params, cfg, PrecisionRecipe.preset(preset), prompt, mask, jax.random.key(2),
            num_samples=samples, max_new_tokens=new_tokens, eos_id=-1, pad_id=0,
            use_cache=use_cache,
        )  # fmt: skip

    print(f"device={jax.devices()[0].platform} model={_PRESET.value} B={n_prompts} G={samples}"
          f" P={prompt_len} N={new_tokens} reps={reps}")  # fmt: skip
    times = {}
    for name, preset, cache in [
        ("bf16_cache", "bf16", True),
        ("bf16_recompute", "bf16", False),
        ("fp8_tensor_cache", "fp8_tensor", True),
        ("fp8_block_cache", "fp8_block", True),
    ]:
        times[name] = time_calls(run(preset, cache), reps=reps, stat="mean")
        print(f"{name:18s} {times[name] * 1e3:9.1f} ms  {n_tokens / times[name]:9.1f} tokens/s")
    speedup = times["bf16_recompute"] / times["bf16_cache"]
    print(f"KV cache speedup over recompute (bf16): {speedup:.2f}x")
    for name in ("fp8_tensor_cache", "fp8_block_cache"):
        print(f"{name} / bf16_cache time ratio: {times[name] / times['bf16_cache']:.2f}")

    batch = run("bf16", True)()
    fwd = jax.jit(forward_logits, static_argnums=(0, 3))

    def logp(preset: str) -> jax.Array:
        logits = fwd(cfg, params, batch.tokens, PrecisionRecipe.preset(preset), batch.attn_mask)
        return token_logprobs_and_entropy(logits, batch.tokens, batch.response_mask)[0]

    ref, m = logp("bf16"), batch.response_mask.astype(jnp.float32)
    print("FP8 rollout vs BF16 trainer on sampled tokens (random-init model):")
    for gran in ("tensor", "channel", "block", "mx"):
        log_rho = (ref - logp(f"fp8_{gran}")) * m
        k3 = jnp.sum((jnp.exp(log_rho) - 1 - log_rho) * m) / m.sum()
        mae = jnp.sum(jnp.abs(log_rho)) / m.sum()
        print(f"  fp8_{gran:8s} mean|dlogp|={float(mae):.4f}  k3={float(k3):.2e}")


if __name__ == "__main__":
    app.run(main)
