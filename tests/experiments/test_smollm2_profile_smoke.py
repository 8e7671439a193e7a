"""The real model's profiling tools run end to end on a 2-layer slice of the shipped checkpoint:
`profile_smollm2` on one phase with the code behind each op, `ab_smollm2` against HEAD."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from experiments_testutil import slice_gguf
from shipped_model import shipped_gguf
from subprocess_env import one_device_env

TINY_WORKLOAD = ["--prompts=4", "--group=2", "--new_tokens=4"]


@pytest.fixture(scope="module")
def sliced(tmp_path_factory) -> str:
    src = shipped_gguf()
    return slice_gguf(str(src), str(tmp_path_factory.mktemp("gguf") / "smollm2_2l.gguf"), 2)


def _run(module: str, *flags: str) -> subprocess.CompletedProcess:
    cmd = [sys.executable, "-m", f"benchmarks.{module}", *TINY_WORKLOAD, *flags]
    return subprocess.run(
        cmd, capture_output=True, text=True, check=False, timeout=900, env=one_device_env()
    )


def test_profile_smollm2_phase_by_source(sliced, tmp_path):
    save = tmp_path / "ops.json"
    proc = _run("profile_smollm2", "--phase=update", "--calls=1", "--by_source",
                f"--set=model.checkpoint={sliced}", f"--save={save}")  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "SmolLM2 update (fp32), medians of 1 calls" in proc.stdout
    saved = json.loads(save.read_text())
    # which XLA ops the trace names depends on the environment (a clean CI venv recorded only
    # thread-pool events), so the op table's contents are not asserted here
    assert saved["calls"] == 1 and saved["ops"]


def test_ab_smollm2_sampler_against_head(sliced):
    proc = _run("ab_smollm2", "--rev=HEAD", "--part=sampler", "--pairs=1",
                f"--set=model.checkpoint={sliced}")  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    # the default sampler draws HEAD's tokens (whatever HEAD is: it never changed them)
    assert result["outputs"] == "bitwise equal"
    assert result["checkout_s"] > 0 and result["median_cpu_ratio_checkout_over_rev"] > 0


def test_ab_smollm2_whole_update_step_against_head(sliced):
    proc = _run("ab_smollm2", "--rev=HEAD", "--part=step", "--pairs=1",
                f"--set=model.checkpoint={sliced}")  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    # each side builds its own trainer (its own config module) and runs its own update step:
    # the params after one update agree bitwise with HEAD's (on a clean checkout, HEAD's code)
    assert result["part"] == "step" and result["outputs"] == "bitwise equal"
    assert result["checkout_s"] > 0 and result["rev_s"] > 0
