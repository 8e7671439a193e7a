"""Sampler throughput: KV cache vs full recomputation, FP8 vs BF16 rollout (ratios in one run).

Also prints the FP8-rollout vs BF16-trainer log-prob mismatch by granularity on the sampled
tokens. Usage: python benchmarks/bench_sampler.py [--preset small --batch 4 --samples 4 ...]
"""

from __future__ import annotations

import argparse
import time

import jax
import jax.numpy as jnp

from calclip_jax.fp8 import PrecisionRecipe
from calclip_jax.model import ModelConfig, Transformer, forward_logits, token_logprobs_and_entropy
from calclip_jax.rollout import sample


def _time(fn, reps: int) -> float:
    jax.block_until_ready(fn())  # compile + warm up
    start = time.perf_counter()
    for _ in range(reps):
        jax.block_until_ready(fn())
    return (time.perf_counter() - start) / reps


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--preset", default="small")
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--samples", type=int, default=4)
    ap.add_argument("--prompt_len", type=int, default=16)
    ap.add_argument("--new_tokens", type=int, default=64)
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args()
    cfg = ModelConfig.preset(args.preset)
    tokens = jnp.zeros((1, 4), jnp.int32)
    params = jax.jit(Transformer(cfg, PrecisionRecipe.preset("fp32")).init)(
        jax.random.key(0), tokens, tokens, jnp.ones_like(tokens)
    )["params"]
    prompt = jax.random.randint(jax.random.key(1), (args.batch, args.prompt_len), 1, cfg.vocab_size)
    mask = jnp.ones_like(prompt)
    n_tokens = args.batch * args.samples * args.new_tokens

    def run(preset: str, use_cache: bool):
        return lambda: sample(
            params, cfg, PrecisionRecipe.preset(preset), prompt, mask, jax.random.key(2),
            num_samples=args.samples, max_new_tokens=args.new_tokens, eos_id=-1, pad_id=0,
            use_cache=use_cache,
        )  # fmt: skip

    print(f"device={jax.devices()[0].platform} model={args.preset} B={args.batch} G={args.samples}"
          f" P={args.prompt_len} N={args.new_tokens} reps={args.reps}")  # fmt: skip
    times = {}
    for name, preset, cache in [
        ("bf16_cache", "bf16", True),
        ("bf16_recompute", "bf16", False),
        ("fp8_tensor_cache", "fp8_tensor", True),
        ("fp8_block_cache", "fp8_block", True),
    ]:
        times[name] = _time(run(preset, cache), args.reps)
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
    main()
