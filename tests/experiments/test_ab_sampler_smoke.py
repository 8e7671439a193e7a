"""The in-process A/B of the sampler imports a revision as its own package and runs both sides."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from subprocess_env import one_device_env


def test_ab_sampler_against_head_draws_the_same_tokens():
    cmd = [sys.executable, "-m", "benchmarks.ab_sampler", "--rev=HEAD", "--pairs=2"]
    cmd += ["--gen_len=4", "--sampler_batch=4"]
    env = one_device_env()
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=600, env=env)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    # HEAD's sampler code is this checkout's wherever tests run from a clean clone
    assert result["same_tokens_and_logp"] is True
    assert result["rev_call_s"] > 0 and result["checkout_call_s"] > 0
    assert result["cpu"]["cores"] == os.cpu_count()


def test_ab_sampler_refuses_an_unknown_revision():
    cmd = [sys.executable, "-m", "benchmarks.ab_sampler", "--rev=no-such-revision"]
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False, timeout=300)
    assert proc.returncode != 0 and "git archive no-such-revision failed" in proc.stderr
