"""The GPU benchmark script runs end to end at toy sizes on this CPU (all sections, presets)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest


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
    sections = {(r.get("section"), r.get("preset")) for r in records}
    for preset in ("bf16", "fp8_tensor", "fp8_channel", "fp8_block", "fp8_mx"):
        for section in ("gemm", "hlo", "step"):
            assert (section, preset) in sections
