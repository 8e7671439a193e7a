"""Fabricated workdirs in the layout `experiments.train` writes (`workdir.run_record`)."""

import json
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
