"""`python -m experiments.train` as 2 processes x 2 CPU devices (jax.distributed on localhost)
logs the same RL steps as one process with 4 devices.

Each run is a subprocess (device counts and jax.distributed are fixed at jax start-up). The
two-process run goes first: its leader builds the tfds data and the SFT warm start into a
shared cache, which the one-process run then reads, so SFT runs once.
"""

from __future__ import annotations

import math
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from experiments_testutil import TINY_RUN

from calclip_jax.workdir.run_record import read_metrics

pytestmark = pytest.mark.slow  # ~100 s on a busy 2-core CPU: three jax processes, compiles

REPO = Path(__file__).resolve().parents[2]
# experiments_testutil's tiny run as flags on the default config (FP8 block-wise rollout and
# training, TIS, Calibrated Clipping), two RL steps
TINY = {"task.knobs.max_digits": 1, **TINY_RUN, "train.steps": 2}
# same sampled tokens -> identical; the rest may differ by the order of cross-device sums
EXACT = ("reward_mean", "correct_frac", "garbled_frac", "response_len_mean", "eval_accuracy")
TIMEOUT_S = 300  # per run


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


def _launch(workdir: Path, cache: Path, devices: int, log: Path, *args: str) -> subprocess.Popen:
    env = dict(
        os.environ,
        XLA_FLAGS=f"--xla_force_host_platform_device_count={devices}",
        JAX_PLATFORMS="cpu",
    )
    flags = [f"--config.{k}={v}" for k, v in TINY.items()]
    cmd = [sys.executable, "-m", "experiments.train", "--config=configs/default.py", *flags]
    cmd += [f"--config.sft.cache_dir={cache}", f"--workdir={workdir}", *args]
    with open(log, "w") as out:
        return subprocess.Popen(cmd, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT)


def _wait(procs: list[subprocess.Popen], logs: list[Path]) -> None:
    """Waits for all; on a timeout or a failure kills the rest and fails with the log tails."""
    deadline = time.monotonic() + TIMEOUT_S
    try:
        for p in procs:
            p.wait(timeout=max(deadline - time.monotonic(), 1))
    except subprocess.TimeoutExpired:
        pass
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
    if any(p.returncode for p in procs):
        tails = "\n".join(f"== {log}\n{log.read_text()[-3000:]}" for log in logs)
        pytest.fail(f"return codes {[p.returncode for p in procs]}\n{tails}")


def _close(a, b) -> bool:
    if a is None or b is None or isinstance(a, bool):
        return a == b
    return math.isclose(a, b, rel_tol=1e-4, abs_tol=1e-6)


def test_two_processes_match_one_process(tmp_path):
    cache, multi, single = tmp_path / "cache", tmp_path / "multi", tmp_path / "single"
    coordinator = f"--coordinator_address=localhost:{_free_port()}"
    logs = [tmp_path / f"process_{i}.log" for i in range(2)]
    procs = [
        _launch(multi, cache, 2, log, coordinator, "--num_processes=2", f"--process_id={i}")
        for i, log in enumerate(logs)
    ]
    _wait(procs, logs)
    _wait([_launch(single, cache, 4, tmp_path / "single.log")], [tmp_path / "single.log"])
    assert "using cached warm start" in (tmp_path / "single.log").read_text()

    multi_rows, single_rows = read_metrics(str(multi)), read_metrics(str(single))
    # one writer: one row per step, one TensorBoard file
    assert [r["step"] for r in multi_rows] == [r["step"] for r in single_rows] == [1, 2]
    assert len(os.listdir(multi / "tb")) == 1
    assert (multi / "summary.json").exists()
    for m, s in zip(multi_rows, single_rows, strict=True):
        assert m.keys() == s.keys()
        for key in EXACT:
            assert m[key] == s[key], (m["step"], key)
        differ = {
            k: (m[k], s[k]) for k in m if not k.endswith("_time_s") and not _close(m[k], s[k])
        }
        assert not differ, (m["step"], differ)
