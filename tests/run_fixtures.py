"""Fabricated workdirs in the layout `experiments.train` writes (`workdir.run_record`)."""

import json
import shutil
import subprocess
from pathlib import Path


def make_run(
    workdir: Path,
    records: list[dict],
    *,
    config: dict | None = None,
    summary: dict | None = None,
) -> Path:
    """Writes metrics.jsonl (+ config.json / summary.json when given) and returns workdir."""
    workdir.mkdir(parents=True, exist_ok=True)
    with (workdir / "metrics.jsonl").open("w") as f:
        for rec in records:
            f.write(json.dumps(rec) + "\n")
    if config is not None:
        (workdir / "config.json").write_text(json.dumps(config))
    if summary is not None:
        (workdir / "summary.json").write_text(json.dumps(summary))
    return workdir


def arm_config(
    precision: str,
    calibrated: bool,
    seed: int = 0,
    surge_factor: float = 1.5,
    surge_window: int = 1,  # raw entropy: the short hand-made series surge at known steps
) -> dict:
    return {
        "seed": seed,
        "rollout": {"precision": precision},
        "train": {"precision": precision, "steps": 8},
        "correction": {"mode": "token_tis"},
        "calibration": {"enabled": calibrated, "upper_rule": "balance"},
        "rl": {"preset": "grpo"},
        "log": {"surge_factor": surge_factor, "surge_warmup": 5, "surge_window": surge_window},
    }


def truncated_copy(sweep: Path, dest: Path, last_step: int) -> Path:
    """A copy of `sweep` as it stood at RL step `last_step`: each run's metrics rows, ratio
    dumps and traces of later steps removed. Returns dest."""
    shutil.copytree(sweep, dest)
    for metrics in dest.glob("*/metrics.jsonl"):
        rows = [line for line in metrics.read_text().splitlines() if line.strip()]
        kept = [line for line in rows if json.loads(line)["step"] <= last_step]
        metrics.write_text("".join(line + "\n" for line in kept))
    for npz in dest.glob("*/ratios/*step_*.npz"):
        if int(npz.stem.rsplit("_", 1)[1]) > last_step:
            npz.unlink()
    return dest


def check_last_step(cmd: list[str], sweep: Path, dest: Path, last_step: int) -> str:
    """Assert that report command `cmd` with `--sweep=<sweep> --last_step=N` prints what it prints
    on `truncated_copy(sweep, dest, N)`, and not what it prints on the whole sweep; return that."""

    def report(folder: Path, *extra: str) -> str:
        done = subprocess.run([*cmd, f"--sweep={folder}", *extra], capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        return done.stdout

    then = report(truncated_copy(sweep, dest, last_step))
    assert report(sweep, f"--last_step={last_step}") == then != report(sweep)
    return then
