"""The Tunix-workload GRPO benchmark runs end to end at a few steps and reports every phase."""

from __future__ import annotations

import json
import subprocess
import sys

from subprocess_env import one_device_env


def test_grpo_benchmark_prints_its_phases_and_trains():
    cmd = [sys.executable, "-m", "benchmarks.bench_grpo_step", "--steps=2", "--warmup=1"]
    cmd += ["--gen_len=8", "--sampler_iters=1", "--sampler_batch=8", "--wait_idle=0"]
    cmd += ["--share_prompt"]  # the README's headline figure; the default differs in one flag
    env = one_device_env()  # one device, as measured
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=600, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    assert result["share_prompt"] is True
    assert result["n_params"] == 820_608  # Tunix's tiny Qwen3 (untied head, q/k norm)
    grpo = result["grpo"]
    assert grpo["step_time_s"]["n"] == 2
    for phase in ("rollout_s", "logprobs_s", "policy_update_s"):
        assert 0 < grpo[phase]["median"] < grpo["step_time_s"]["max"], phase
    assert grpo["max_abs_param_change"] > 0  # the policy was updated
    sampler = result["sampler"]
    assert sampler["valid_tokens_returned_per_call"]["median"] == 8 * 8  # no EOS stop
    assert sampler["tokens_per_s"]["median"] > 0
