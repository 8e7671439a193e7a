"""The rollout's GEMM ceiling benchmark runs on tiny shapes and reports a consistent ceiling: the
decode step's FLOPs are SmolLM2-135M's weight GEMMs for the rows, and the ceiling is rows over
the time they take."""

from __future__ import annotations

import json
import subprocess
import sys

from shipped_model import shipped_gguf
from subprocess_env import one_device_env

from benchmarks.decode_gemm_ceiling import decode_shapes
from calclip_jax.model import ModelConfig


def test_decode_shapes_cover_every_weight_matrix_once_per_layer():
    m = ModelConfig(vocab_size=100, d_model=8, n_layers=3, n_heads=4, n_kv_heads=2, head_dim=2,
                    d_ff=16)  # fmt: skip
    shapes = decode_shapes(m)
    assert shapes["q"] == (8, 8, 3) and shapes["k"] == (8, 4, 3) and shapes["down"] == (16, 8, 3)
    assert shapes["lm_head"] == (8, 100, 1)
    matmul_params = sum(k * n * count for k, n, count in shapes.values())
    per_layer = 8 * 8 + 2 * 8 * 4 + 8 * 8 + 3 * 8 * 16
    assert matmul_params == 3 * per_layer + 8 * 100


def test_ceiling_benchmark_reports_its_rates():
    shipped_gguf()  # the model's shapes come from the shipped checkpoint's header
    cmd = [sys.executable, "-m", "benchmarks.decode_gemm_ceiling", "--rows=4", "--square=64"]
    cmd += ["--rounds=2", "--reps=1"]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=600, env=one_device_env())
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = json.loads(proc.stdout.strip().splitlines()[-1])
    assert round(got["decode_step_gflop"] * 1e9) == 2 * 4 * 134_479_872  # SmolLM2-135M: 134.5M
    assert got["decode_gemm_gflops"] > 0 and got["square_gemm_gflops"] > 0
    assert len(got["decode_over_square_rates"]) == 2
    step_s = got["decode_step_gflop"] / got["decode_gemm_gflops"]
    assert abs(got["ceiling_tokens_per_s"] - 4 / step_s) < 1e-6 * got["ceiling_tokens_per_s"]
