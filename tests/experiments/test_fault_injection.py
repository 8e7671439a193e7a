"""Fault injection on experiments.train: nothing lost, nothing mixed.

SIGKILL at chosen moments (kill_at.py), damaged checkpoints, a changed config, a second process
on the workdir. Every rerun must leave metrics.jsonl (line for line), summary.json, ratio dumps
and samples identical to an uninterrupted run's, or refuse without touching the workdir.
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import time
from pathlib import Path

import pytest
from train_cli import TinyTrain, assert_same_outputs, finalized_steps, metrics_lines

from calclip_jax.workdir import run_record as R
from calclip_jax.workdir.checksums import MANIFEST_NAME
from calclip_jax.workdir.lock import LOCK_FILE, WorkdirLock

STEPS = 4  # tiny_config: checkpoints and ratio dumps at steps 2 and 4


@pytest.fixture(scope="module")
def tiny(tmp_path_factory) -> TinyTrain:
    return TinyTrain(tmp_path_factory.mktemp("fault_injection"), STEPS)


@pytest.fixture(scope="module")
def reference(tiny) -> Path:
    """An uninterrupted run."""
    workdir = tiny.root / "reference"
    tiny.finish(workdir)
    assert [r["step"] for r in metrics_lines(workdir)] == list(range(1, STEPS + 1))
    return workdir


def _copy(reference: Path, dest: Path, unfinish: bool = False) -> Path:
    """A copy of the reference run; `unfinish`: without summary.json, as a kill between the
    last checkpoint and the summary leaves it."""
    shutil.copytree(reference, dest)
    if unfinish:
        (dest / R.SUMMARY_FILE).unlink()
    return dest


def test_kills_at_any_moment_resume_to_the_uninterrupted_run(tiny, reference, tmp_path):
    run = tmp_path / "run"
    tiny.kill(run, "row", 1)  # before the first checkpoint
    assert [r["step"] for r in metrics_lines(run)] == [1] and finalized_steps(run) == []
    out = tiny.kill(run, "save", 2)  # the first checkpoint's write in flight
    assert f"taking over the stale lock {run / LOCK_FILE} of pid" in out  # the first kill's
    assert [r["step"] for r in metrics_lines(run)] == [1, 2]
    tiny.kill(run, "row", 3)  # between two checkpoints
    assert [r["step"] for r in metrics_lines(run)] == [1, 2, 3]
    tiny.kill(run, "save", 4)  # the second checkpoint's write in flight (the first one final)
    assert 2 in finalized_steps(run)
    out = tiny.finish(run)
    assert "resumed from checkpoint at RL step" in out
    assert (run / LOCK_FILE).read_text() == ""  # released
    assert_same_outputs(run, reference)


def _largest_file(step_dir: Path) -> Path:
    files = [p for p in step_dir.rglob("*") if p.is_file() and p.name != MANIFEST_NAME]
    return max(files, key=lambda p: p.stat().st_size)


def _flip_a_byte(step_dir: Path) -> None:
    data = _largest_file(step_dir)
    blob = bytearray(data.read_bytes())
    blob[len(blob) // 2] ^= 0xFF
    data.write_bytes(bytes(blob))


def _truncate_data(step_dir: Path) -> None:
    data = _largest_file(step_dir)
    with open(data, "r+b") as f:
        f.truncate(data.stat().st_size // 2)


def _delete_data(step_dir: Path) -> None:
    shutil.rmtree(next(step_dir.rglob("ocdbt.process_0")))


def _empty(step_dir: Path) -> None:
    shutil.rmtree(step_dir)
    step_dir.mkdir()


DAMAGE = {
    "checksum": (_flip_a_byte, "checksum mismatch"),  # orbax alone restores it silently
    "truncated": (_truncate_data, "bytes, expected"),
    "deleted": (_delete_data, "missing file"),
    "empty": (_empty, "empty folder"),
}


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_damaged_newest_checkpoint_falls_back_to_the_older_one(tiny, reference, tmp_path, damage):
    run = _copy(reference, tmp_path / "run", unfinish=True)
    spoil, problem = DAMAGE[damage]
    assert (run / R.CHECKPOINTS_DIR / str(STEPS) / MANIFEST_NAME).is_file()
    spoil(run / R.CHECKPOINTS_DIR / str(STEPS))
    out = tiny.finish(run)
    said = [line for line in out.splitlines() if "damaged checkpoint" in line]
    assert len(said) == 1 and f"step {STEPS} (" in said[0] and problem in said[0], out
    assert "resumed from checkpoint at RL step 2" in out
    assert (run / "checkpoints_damaged" / str(STEPS)).is_dir()
    assert finalized_steps(run) == [2, STEPS]  # step 4 saved afresh
    assert_same_outputs(run, reference)


def test_changed_config_is_refused_and_leaves_the_workdir_alone(tiny, reference, tmp_path):
    run = _copy(reference, tmp_path / "run")
    before = {p: p.read_bytes() for p in run.rglob("*") if p.is_file()}
    lr, temperature = "--config.train.learning_rate=0.002", "--config.rollout.temperature=0.7"
    code, out = tiny.run(run, lr, temperature)
    assert code != 0
    last = out.strip().splitlines()[-1]
    assert last.startswith("error: workdir refused:") and "--allow_config_change" in last, out
    assert "train.learning_rate: 0.001 -> 0.002" in last and "rollout.temperature" in last
    assert "Traceback" not in out
    assert {p: p.read_bytes() for p in run.rglob("*") if p.is_file()} == before


def test_more_steps_extend_a_finished_run(tiny, reference, tmp_path):
    run = _copy(reference, tmp_path / "run")
    out = tiny.finish(run, f"--config.train.steps={STEPS + 2}")
    assert f"extending the finished run from RL step {STEPS} to {STEPS + 2}" in out
    lines = metrics_lines(run)
    assert [r["step"] for r in lines] == list(range(1, STEPS + 3))
    assert lines[:STEPS] == metrics_lines(reference)
    assert R.load_summary(run)["final_step"] == STEPS + 2
    config = R.load_config(run)
    assert config["train"]["steps"] == STEPS + 2
    assert config["config_changes"] == [
        {"after_step": STEPS, "changed": {"train.steps": [STEPS, STEPS + 2]}}
    ]


def test_second_process_on_a_workdir_is_refused_at_once(tiny, tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    with WorkdirLock(str(run)).acquire(print):  # this test process is the first run
        t0 = time.monotonic()
        code, out = tiny.run(run, timeout=120)
        took = time.monotonic() - t0
    assert code != 0 and f"pid {os.getpid()} on host {socket.gethostname()}" in out, out
    assert took < 60  # before SFT and compiling
    assert sorted(p.name for p in run.iterdir()) == [LOCK_FILE]


def test_allowed_config_change_continues_and_is_recorded(tiny, reference, tmp_path):
    run = _copy(reference, tmp_path / "run")
    flags = (f"--config.train.steps={STEPS + 1}", "--config.train.learning_rate=0.002")
    assert tiny.run(run, *flags)[0] != 0
    tiny.finish(run, *flags, "--allow_config_change")
    assert metrics_lines(run)[:STEPS] == metrics_lines(reference)
    changed = R.load_config(run)["config_changes"][0]
    assert changed["after_step"] == STEPS
    assert changed["changed"]["train.learning_rate"] == [0.001, 0.002]


def test_kill_from_outside_while_a_checkpoint_is_written(tiny, reference, tmp_path):
    run = tmp_path / "run"
    proc = tiny.start(run)
    deadline = time.monotonic() + 300
    while not list((run / R.CHECKPOINTS_DIR).glob("*.orbax-checkpoint-tmp*")):
        assert proc.poll() is None and time.monotonic() < deadline, "no checkpoint write seen"
        time.sleep(0.01)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    tiny.finish(run)
    assert_same_outputs(run, reference)


def test_two_training_processes_do_not_interleave(tiny, reference, tmp_path):
    run = tmp_path / "run"
    first = tiny.start(run)
    deadline = time.monotonic() + 120
    while not (run / LOCK_FILE).exists() or not (run / LOCK_FILE).read_text():
        assert first.poll() is None and time.monotonic() < deadline
        time.sleep(0.05)
    code, out = tiny.run(run)
    assert code != 0 and f"pid {first.pid}" in out, out
    out, _ = first.communicate(timeout=300)
    assert first.returncode == 0, out
    assert_same_outputs(run, reference)
