"""`python -m experiments.train` over jax.distributed on localhost, as a user runs it: 2 processes
x 2 CPU devices log the same RL steps as 1 process x 4; a process killed with SIGKILL stops the
other within 60 s, naming it; rerunning the command on both resumes to the metrics, samples and
ratio dumps of the uninterrupted run; a checkpoint written by two processes resumes on one, and one
written by one on two. About 5 minutes on 2 cores (seven launches, each compiling).

Each run is a subprocess (device counts and jax.distributed are fixed at jax start-up). The
uninterrupted two-process run goes first: its leader builds the tfds data and the SFT warm start
into a shared cache, which every later run reads, so SFT runs once.
"""

from __future__ import annotations

import math
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from experiments_testutil import TINY_RUN

from calclip_jax.workdir.run_record import checkpoint_steps, read_metrics

REPO = Path(__file__).resolve().parents[2]
# experiments_testutil's tiny run as flags on the default config (FP8 block-wise rollout and
# training, TIS, Calibrated Clipping): 4 RL steps, a checkpoint every 2, samples every step
TINY = {
    "task.knobs.max_digits": 1,
    **TINY_RUN,
    "train.steps": 4,
    "log.checkpoint_every": 2,
    "log.samples_every": 1,
    "log.ratios_every": 2,
}
HEARTBEAT_S = 20  # --heartbeat_timeout_s: a lost process is named within it
LOST_WITHIN_S = 60  # what a user may wait for the survivor to stop
# same sampled tokens -> identical; the rest may differ by the order of cross-device sums
EXACT = ("reward_mean", "correct_frac", "garbled_frac", "response_len_mean", "eval_accuracy")
TIMEOUT_S = 300  # per run


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("localhost", 0))
        return s.getsockname()[1]


def _launch(
    workdir: Path, cache: Path, processes: int, devices: int, *extra: str
) -> tuple[list[subprocess.Popen], list[Path]]:
    """The same train command once per process (each with `devices` CPU devices); logs beside
    the workdir, one a process, named by the launch."""
    env = dict(
        os.environ,
        XLA_FLAGS=f"--xla_force_host_platform_device_count={devices}",
        JAX_PLATFORMS="cpu",
    )
    flags = [f"--config.{k}={v}" for k, v in TINY.items()]
    cmd = [sys.executable, "-m", "experiments.train", "--config=configs/default.py", *flags]
    cmd += [f"--config.sft.cache_dir={cache}", f"--workdir={workdir}", *extra]
    multi = [f"--coordinator_address=localhost:{_free_port()}", f"--num_processes={processes}"]
    multi += [f"--heartbeat_timeout_s={HEARTBEAT_S}"]
    n = len(list(workdir.parent.glob(f"{workdir.name}.*.log"))) // processes
    procs, logs = [], []
    for i in range(processes):
        log = workdir.parent / f"{workdir.name}.{n}.p{i}.log"
        args = [*multi, f"--process_id={i}"] if processes > 1 else []
        with open(log, "w") as out:
            procs.append(
                subprocess.Popen(
                    cmd + args, cwd=REPO, env=env, stdout=out, stderr=subprocess.STDOUT
                )
            )
        logs.append(log)
    return procs, logs


def _tails(logs: list[Path]) -> str:
    return "\n".join(f"== {log}\n{log.read_text()[-3000:]}" for log in logs)


def _wait(procs: list[subprocess.Popen], logs: list[Path]) -> str:
    """Waits for all; on a timeout or a failure kills the rest and fails with the log tails.
    Returns the leader's log."""
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
        pytest.fail(f"return codes {[p.returncode for p in procs]}\n{_tails(logs)}")
    return logs[0].read_text()


def _run(workdir: Path, cache: Path, processes: int, devices: int, *extra: str) -> str:
    return _wait(*_launch(workdir, cache, processes, devices, *extra))


def _close(a, b) -> bool:
    if a is None or b is None or isinstance(a, bool):
        return a == b
    return math.isclose(a, b, rel_tol=1e-4, abs_tol=1e-6)


def _rows(workdir: Path) -> list[dict]:
    return read_metrics(str(workdir))


def _assert_rows_close(got: list[dict], want: list[dict]) -> None:
    """Same steps and keys; sampled-token metrics equal, the rest within float reordering."""
    assert [r["step"] for r in got] == [r["step"] for r in want]
    for g, w in zip(got, want, strict=True):
        assert g.keys() == w.keys()
        for key in EXACT:
            assert g.get(key) == w.get(key), (g["step"], key)
        differ = {
            k: (g[k], w[k]) for k in g if not k.endswith("_time_s") and not _close(g[k], w[k])
        }
        assert not differ, (g["step"], differ)


def _untimed(row: dict) -> dict:
    return {k: v for k, v in row.items() if not k.endswith("_time_s")}


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("multihost")


@pytest.fixture(scope="module")
def uninterrupted(root) -> Path:
    """The reference: 2 processes x 2 devices, 4 RL steps, never interrupted."""
    workdir = root / "two"
    _run(workdir, root / "cache", 2, 2)
    return workdir


@pytest.fixture(scope="module")
def killed(root, uninterrupted) -> dict:
    """2 processes x 2 devices; process 1 killed (SIGKILL) once RL step 2's checkpoint is
    written and step 3 logged. The workdir as the kill left it is copied to `copy`."""
    workdir = root / "killed"
    procs, logs = _launch(workdir, root / "cache", 2, 2)
    deadline = time.monotonic() + TIMEOUT_S
    while not (2 in checkpoint_steps(workdir) and len(_rows(workdir)) >= 3):
        if time.monotonic() > deadline or any(p.poll() is not None for p in procs):
            for p in procs:
                p.kill()
            pytest.fail(f"never reached RL step 3\n{_tails(logs)}")
        time.sleep(0.2)
    procs[1].send_signal(signal.SIGKILL)
    killed_at = time.monotonic()
    try:
        procs[0].wait(timeout=LOST_WITHIN_S)
    except subprocess.TimeoutExpired:
        procs[0].kill()
        pytest.fail(f"process 0 still running {LOST_WITHIN_S} s after process 1 was lost")
    stopped_after = time.monotonic() - killed_at
    procs[1].wait()
    copy = root / "killed_copy"
    shutil.copytree(workdir, copy)
    return {
        "workdir": workdir,
        "copy": copy,
        "survivor_log": logs[0].read_text(),
        "survivor_rc": procs[0].returncode,
        "stopped_after": stopped_after,
    }


def test_two_processes_log_as_one_writer(uninterrupted):
    rows = _rows(uninterrupted)
    assert [r["step"] for r in rows] == [1, 2, 3, 4]  # one row per step: process 0 writes
    assert len(os.listdir(uninterrupted / "tb")) == 1
    assert (uninterrupted / "summary.json").exists()
    assert all(np.isfinite(r["loss"]) for r in rows)


def test_lost_process_stops_the_other_naming_it(killed):
    log = killed["survivor_log"]
    assert killed["survivor_rc"] != 0
    assert killed["stopped_after"] < LOST_WITHIN_S
    # the coordination service names the lost process (task 1) within the heartbeat timeout
    assert re.search(r"Task 1 heartbeat timeout|stopped sending heartbeats\):\s*1\b", log), log
    if "a collective with the other processes failed" in log:  # lost inside a collective
        assert "process 0 of 2" in log and "resume from RL step 2" in log


def test_rerun_on_both_ends_as_the_uninterrupted_run(killed, uninterrupted, root):
    workdir = killed["workdir"]
    log = _run(workdir, root / "cache", 2, 2)
    assert "resumed from checkpoint at RL step 2" in log
    got, want = _rows(workdir), _rows(uninterrupted)
    assert [_untimed(r) for r in got] == [_untimed(r) for r in want]
    samples = sorted(os.listdir(uninterrupted / "samples"))
    assert samples == sorted(os.listdir(workdir / "samples"))
    for name in samples:
        assert (workdir / "samples" / name).read_text() == (
            uninterrupted / "samples" / name
        ).read_text(), name
    dumps = sorted(os.listdir(uninterrupted / "ratios"))
    assert dumps == sorted(os.listdir(workdir / "ratios")) and dumps
    for name in dumps:
        with np.load(workdir / "ratios" / name) as a, np.load(uninterrupted / "ratios" / name) as b:
            assert a.files == b.files
            for key in a.files:
                np.testing.assert_array_equal(a[key], b[key], err_msg=f"{name}:{key}")


def test_one_process_logs_the_steps_of_two_and_its_checkpoint_resumes_on_two(uninterrupted, root):
    """1 process x 4 devices logs the RL steps of 2 x 2; its checkpoint (RL step 2) then resumes
    on 2 processes to the uninterrupted run's later steps."""
    workdir = root / "one"
    log = _run(workdir, root / "cache", 1, 4, "--config.train.steps=2")
    assert "using cached warm start" in log
    _assert_rows_close(_rows(workdir), _rows(uninterrupted)[:2])

    log = _run(workdir, root / "cache", 2, 2)
    assert "resumed from checkpoint at RL step 2" in log
    _assert_rows_close(_rows(workdir), _rows(uninterrupted))


def test_two_process_checkpoint_resumes_on_one_process(killed, uninterrupted, root):
    """The killed two-process run's checkpoint (RL step 2) resumes on 1 process x 4 devices."""
    workdir = killed["copy"]
    log = _run(workdir, root / "cache", 1, 4)
    assert "resumed from checkpoint at RL step 2" in log
    _assert_rows_close(_rows(workdir), _rows(uninterrupted))
