"""Runs experiments.train (or the kill_at fault injector) on a tiny config in a subprocess, and
compares what two workdirs logged: the helpers of the fault-injection tests."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
from subprocess_env import one_device_env

from calclip_jax.workdir import run_record as R
from calclip_jax.workdir.ratio_dumps import dump_steps

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]


@dataclasses.dataclass
class TinyTrain:
    """experiments.train on `tiny_config(cache, train.steps=steps, **overrides)`, one CPU
    device, compiling into the test session's cache (a warm start takes seconds instead of 30)."""

    root: Path
    steps: int
    overrides: dict[str, Any] = dataclasses.field(default_factory=dict)

    def __post_init__(self) -> None:
        self.config = self.root / "tiny_train_config.py"
        self.config.write_text(
            "import sys\n"
            f"sys.path.insert(0, {str(HERE)!r})\n"
            "from experiments_testutil import tiny_config\n\n"
            "def get_config():\n"
            f"    return tiny_config({str(self.root / 'cache')!r}, "
            f"**{{'train.steps': {self.steps}, **{self.overrides!r}}})\n"
        )
        self.env = one_device_env(PYTHONPATH=str(REPO))

    def start(self, workdir: Path, *flags: str, kill_at: tuple[str, int] | None = None):
        """The training process (stdout and stderr together); `kill_at` (point, step) runs it
        under kill_at.py."""
        main = ["-m", "experiments.train"]
        if kill_at is not None:
            main = [str(HERE / "kill_at.py"), kill_at[0], str(kill_at[1])]
        cmd = [sys.executable, *main, f"--config={self.config}", f"--workdir={workdir}", *flags]
        return subprocess.Popen(
            cmd,
            cwd=REPO,
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )

    def run(self, workdir: Path, *flags: str, timeout: float = 300) -> tuple[int, str]:
        proc = self.start(workdir, *flags)
        out, _ = proc.communicate(timeout=timeout)
        return proc.returncode, out

    def finish(self, workdir: Path, *flags: str) -> str:
        code, out = self.run(workdir, *flags)
        assert code == 0, out[-3000:]
        return out

    def kill(self, workdir: Path, point: str, step: int) -> str:
        """Runs until kill_at's SIGKILL at (point, step); its output."""
        proc = self.start(workdir, kill_at=(point, step))
        out, _ = proc.communicate(timeout=300)
        assert proc.returncode == -9, f"not killed at {point} {step} (rc {proc.returncode}):\n{out}"
        return out


def _timeless(record: dict) -> dict:
    """`record` without its wall-clock times (step_time_s, rl_step_time_s_median, ...)."""
    return {k: v for k, v in record.items() if "time_s" not in k}


def metrics_lines(workdir: Path) -> list[dict]:
    """Every line of metrics.jsonl as written (no dedup, unlike read_metrics), times aside."""
    return [_timeless(json.loads(x)) for x in (workdir / R.METRICS_FILE).read_text().splitlines()]


def assert_same_outputs(run: Path, reference: Path) -> None:
    """metrics.jsonl, summary.json (times aside), ratio dumps and samples as `reference`'s."""
    assert metrics_lines(run) == metrics_lines(reference)
    summary, expected = R.load_summary(run), R.load_summary(reference)
    assert summary is not None and expected is not None
    assert _timeless(summary) == _timeless(expected)
    dumps, ref_dumps = dump_steps(run), dump_steps(reference)
    assert list(dumps) == list(ref_dumps) and dumps
    for step, path in dumps.items():
        with np.load(path) as got, np.load(ref_dumps[step]) as want:
            assert sorted(got.files) == sorted(want.files)
            for k in want.files:
                assert np.array_equal(got[k], want[k], equal_nan=True), (step, k)
    samples = R.step_files(run / R.SAMPLES_DIR, "txt")
    ref_samples = R.step_files(reference / R.SAMPLES_DIR, "txt")
    assert list(samples) == list(ref_samples)
    assert all(samples[s].read_text() == ref_samples[s].read_text() for s in samples)


def finalized_steps(workdir: Path) -> list[int]:
    folder = workdir / R.CHECKPOINTS_DIR
    return sorted(int(p.name) for p in folder.glob("*") if p.name.isdigit())
