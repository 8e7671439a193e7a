"""How fast the real model's rollout could be on this CPU: the decode step's GEMMs at their rate.

Run: ``python -m benchmarks.decode_gemm_ceiling`` (about a minute). A decode step of
`bench_smollm2_step`'s rollout multiplies `--rows` one-token rows by every weight matrix of
SmolLM2-135M-Instruct (`configs/smollm2.py`'s model: per layer q, k, v, o, gate, up, down; then
the tied lm_head). This times each of those float32 GEMM shapes, jitted, alternating with the
square `--square`^3 GEMM the FLOP floors use, in one process (so the ratio of the two rates holds
under load), and prints one JSON line: each rate, the decode GEMMs' rate as a share of the square
one, and the ceiling it sets: rows x new tokens over the time those GEMMs alone take, the rollout's
tokens/s if nothing but its GEMMs ran (no attention, norms, sampling or cache writes).
"""

from __future__ import annotations

import json
import statistics
import sys
from typing import Any

import jax
import jax.numpy as jnp
from absl import app, flags

from benchmarks import bench_smollm2_step as bench
from benchmarks.machine_noise import cpu_noise, cpu_sample
from benchmarks.timing import timed
from calclip_jax.config import build_run_spec
from calclip_jax.model import ModelConfig
from calclip_jax.workdir.run_info import cpu_description

_ROWS = flags.DEFINE_integer("rows", 128, "Rows decoded together (prompts x samples).")
_SQUARE = flags.DEFINE_integer("square", 2048, "Side of the reference square GEMM.")
_ROUNDS = flags.DEFINE_integer("rounds", 5, "Alternating rounds; medians over them.")
_REPS = flags.DEFINE_integer("reps", 20, "Calls of a decode shape per round (summed).")


def decode_shapes(m: ModelConfig) -> dict[str, tuple[int, int, int]]:
    """name -> (K, N, count per decode step) of every weight GEMM of one decode step."""
    q, kv = m.n_heads * m.head_dim, m.n_kv_heads * m.head_dim
    layer = {"q": (m.d_model, q), "k": (m.d_model, kv), "v": (m.d_model, kv),
             "o": (q, m.d_model), "gate": (m.d_model, m.d_ff), "up": (m.d_model, m.d_ff),
             "down": (m.d_ff, m.d_model)}  # fmt: skip
    shapes = {name: (k, n, m.n_layers) for name, (k, n) in layer.items()}
    shapes["lm_head"] = (m.d_model, m.vocab_size, 1)
    return shapes


def _gemm(rows: int, k: int, n: int) -> tuple[Any, Any, Any]:
    keys = jax.random.split(jax.random.key(rows * 7919 + k * 31 + n), 2)
    a = jax.random.normal(keys[0], (rows, k), jnp.float32)
    b = jax.random.normal(keys[1], (k, n), jnp.float32)
    return jax.jit(jnp.matmul), a, b


def main(argv: list[str]) -> None:
    del argv
    model = build_run_spec(bench.workload_config()).model
    rows, side = _ROWS.value, _SQUARE.value
    shapes = decode_shapes(model)
    calls = {name: _gemm(rows, k, n) for name, (k, n, _) in shapes.items()}
    square = _gemm(side, side, side)
    for fn, a, b in [*calls.values(), square]:
        jax.block_until_ready(fn(a, b))  # compile
    step_s, square_s = [], []
    before = cpu_sample()
    for r in range(_ROUNDS.value):
        fn, a, b = square
        square_s.append(timed(fn, a, b)[1])
        per_step = 0.0  # one decode step's GEMMs: each shape's call time x its count
        for name, (fn, a, b) in calls.items():
            t = sum(timed(fn, a, b)[1] for _ in range(_REPS.value)) / _REPS.value
            per_step += t * shapes[name][2]
        step_s.append(per_step)
        print(f"[decode_gemm_ceiling] round {r + 1}: decode GEMMs {per_step * 1e3:.1f} ms a "
              f"step, square {square_s[-1] * 1e3:.1f} ms", file=sys.stderr, flush=True)  # fmt: skip
    step_flop = sum(2 * rows * k * n * count for k, n, count in shapes.values())
    decode_rate = step_flop / statistics.median(step_s) / 1e9
    square_rate = 2 * side**3 / statistics.median(square_s) / 1e9
    ratios = [(step_flop / s) / (2 * side**3 / q) for s, q in zip(step_s, square_s, strict=True)]
    print(json.dumps({
        "rows": rows,
        "decode_step_gflop": step_flop / 1e9,
        "decode_gemm_gflops": decode_rate,
        "square_gemm_gflops": square_rate,
        "decode_over_square_rate": statistics.median(ratios),
        "decode_over_square_rates": ratios,
        "ceiling_tokens_per_s": rows / statistics.median(step_s),
        "cpu": cpu_description(),
        "cpu_noise": cpu_noise(before, cpu_sample()),
    }), flush=True)  # fmt: skip


if __name__ == "__main__":
    app.run(main)
