"""The GPU benchmark script runs end to end at toy sizes on this CPU (all sections, presets), and
its GEMM section passes the cotangent as an argument (no n x n constant for XLA to fold)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

PRESETS = ("bf16", "fp8_tensor", "fp8_channel", "fp8_block", "fp8_mx")


@pytest.mark.slow
def test_gpu_benchmark_smoke_prints_every_section():
    out = subprocess.run(
        [sys.executable, "-m", "benchmarks.gpu_fp8_gemm", "--smoke"],
        capture_output=True,
        text=True,
        check=True,
        timeout=600,
    ).stdout
    records = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
    assert not [r for r in records if "error" in r]
    sections = {(r.get("section"), r.get("preset")) for r in records}
    for preset in PRESETS:
        for section in ("gemm", "hlo", "step"):
            assert (section, preset) in sections
    for r in records:
        if r.get("section") == "hlo":
            assert r["memory_gib"]["temp"] >= 0 and r["compile_s"] >= 0


def test_gemm_section_closes_over_no_operand():
    """No [n, n] constant in the lowered GEMM program (a closed-over cotangent is one: 1 found
    before the fix)."""
    code = (
        "import re, jax, jax.numpy as jnp\n"
        "from benchmarks.gpu_fp8_gemm import gemm_step\n"
        "x = jnp.ones((64, 64))\n"
        f"for p in {PRESETS!r}:\n"
        "    text = gemm_step(p).lower(x, x, x).as_text()\n"
        "    assert not re.search(r'constant dense<[^>]*> : tensor<64x64x', text), p\n"
        "print('ok')\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]
