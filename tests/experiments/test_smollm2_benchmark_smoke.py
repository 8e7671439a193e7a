"""The real-model RL-step benchmark (TRL's workload through configs/smollm2.py) runs end to end on
a 2-layer slice of the shipped checkpoint and reports its phases, memory and the fast path."""

from __future__ import annotations

import json
import subprocess
import sys

from experiments_testutil import slice_gguf
from shipped_model import shipped_gguf
from subprocess_env import one_device_env


def test_real_model_step_benchmark_reports_its_phases(tmp_path):
    src = shipped_gguf()
    sliced = slice_gguf(str(src), str(tmp_path / "smollm2_2l.gguf"), 2)
    cmd = [sys.executable, "-m", "benchmarks.bench_smollm2_step", "--steps=1", "--warmup=1"]
    cmd += ["--prompts=4", "--group=2", "--new_tokens=4", "--wait_idle=0"]
    cmd += [f"--set=model.checkpoint={sliced}"]
    proc = subprocess.run(
        cmd, capture_output=True, text=True, check=False, timeout=900, env=one_device_env()
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["share_prompt"] is True  # the real-model config's fast path is the default
    assert result["rows"] == 8 and result["step_time_s"]["n"] == 1
    for phase in ("rollout_s", "logprobs_s", "policy_update_s"):
        assert 0 < result[phase]["median"] < result["step_time_s"]["max"], phase
    assert result["rollout_gen_tokens_per_s"] > 0 and result["peak_rss_gb"] > 0


def test_step_benchmark_measures_two_setups_in_one_process():
    """`--ab`: the toy family's default against the same config with a knob set, RL steps
    interleaved in one process: both setups' phases and the ratios of b's medians to a's; the
    forward program's phase is the default's alone."""
    cmd = [sys.executable, "-m", "benchmarks.bench_smollm2_step", "--family=default"]
    cmd += ["--prompts=4", "--group=2", "--new_tokens=4", "--steps=1", "--warmup=1"]
    cmd += ["--wait_idle=0", "--ab=train.same_forward=false"]
    proc = subprocess.run(
        cmd, capture_output=True, text=True, check=False, timeout=600, env=one_device_env()
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["same_forward"] is True and result["ab"] == ["train.same_forward=false"]
    assert result["a"]["program_s"]["median"] > 0 == result["b"]["program_s"]["median"]
    for name in ("a", "b"):
        assert result[name]["step_time_s"]["n"] == 1 and result[name]["rows"] == 8, name
    ratios = result["ratio_b_to_a"]
    assert ratios["step_time_s"] > 0 and ratios["step_time_s_paired"] > 0
