"""Resume: a run killed (SIGKILL) after a checkpoint, rerun on its workdir, logs the same metrics
as an uninterrupted run; a half-written checkpoint does not break the resume."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from calclip_jax.analysis.run_record import read_metrics

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
TIMING = ("step_time_s", "rollout_time_s", "train_time_s", "compile_time_s")
STEPS = 10  # checkpoints every 2 steps: the kill lands with most of the run still to go


def _config_file(tmp_path: Path, cache: Path) -> Path:
    path = tmp_path / "resume_config.py"
    path.write_text(
        "import sys\n"
        f"sys.path.insert(0, {str(HERE)!r})\n"
        "from experiments_testutil import tiny_config\n\n"
        "def get_config():\n"
        f"    return tiny_config({str(cache)!r}, **{{'train.steps': {STEPS}}})\n"
    )
    return path


def _train(config: Path, workdir: Path, **popen) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(REPO), "XLA_FLAGS": ""}
    cmd = [sys.executable, "-m", "experiments.train", f"--config={config}", f"--workdir={workdir}"]
    return subprocess.Popen(
        cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **popen
    )


def _finish(proc: subprocess.Popen, timeout: float = 240) -> str:
    out, _ = proc.communicate(timeout=timeout)
    assert proc.returncode == 0, out[-3000:]
    return out


def _comparable(rows: list[dict]) -> list[dict]:
    return [{k: v for k, v in r.items() if k not in TIMING} for r in rows]


def test_killed_run_resumes_to_identical_metrics(tmp_path):
    cache = tmp_path / "cache"
    config = _config_file(tmp_path, cache)
    _finish(_train(config, tmp_path / "full"))
    full = _comparable(read_metrics(str(tmp_path / "full")))
    assert [r["step"] for r in full] == list(range(1, STEPS + 1))

    run = tmp_path / "killed"
    proc = _train(config, run)
    deadline = time.monotonic() + 240
    while not any(p.name.isdigit() for p in (run / "checkpoints").glob("*")):
        assert proc.poll() is None, "run ended before its first checkpoint"
        assert time.monotonic() < deadline, "no checkpoint within the time limit"
        time.sleep(0.2)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    assert not (run / "summary.json").exists()
    # a torn, half-written checkpoint left behind by a crash must be ignored
    (run / "checkpoints" / f"{STEPS}.orbax-checkpoint-tmp-0").mkdir(parents=True, exist_ok=True)

    out = _finish(_train(config, run))
    assert "resumed from checkpoint at RL step" in out
    assert _comparable(read_metrics(str(run))) == full


@pytest.mark.parametrize("bad", ["--config.train.precision=fp9", "--config.nonexistent=1"])
def test_cli_rejects_bad_config_before_compiling(tmp_path, bad):
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    result = subprocess.run(
        [sys.executable, "-m", "experiments.train", f"--workdir={tmp_path / 'w2'}", bad],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode != 0
    key = bad.split("=")[0].removeprefix("--config.")
    assert key in result.stderr + result.stdout
    assert not (tmp_path / "w2" / "checkpoints").exists()
