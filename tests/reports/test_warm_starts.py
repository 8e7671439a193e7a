"""Arms of one seed must share their SFT warm start (calclip_jax.reports.warm_starts, and the
paired report's refusal of a sweep where they do not)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from calclip_jax.reports.warm_starts import mixed_warm_starts, seed_digests, warm_start_line
from calclip_jax.workdir.run_record import METRICS_FILE, SUMMARY_FILE, metrics_line


def _run(folder: Path, digest: str | None) -> None:
    folder.mkdir(parents=True)
    rows = [{"step": t, "reward_mean": 0.5} for t in (1, 2)]
    (folder / METRICS_FILE).write_text("".join(metrics_line(r) for r in rows))
    if digest is not None:  # finished
        (folder / SUMMARY_FILE).write_text(json.dumps({"sft_params_digest": digest}))


def test_digests_group_by_seed_and_skip_unfinished_runs(tmp_path):
    _run(tmp_path / "bf16__seed1", "aa")
    _run(tmp_path / "fp8__seed1", "aa")
    _run(tmp_path / "fp8__seed2", "bb")
    _run(tmp_path / "calib__seed2", None)  # still running: no summary
    _run(tmp_path / "solo", "cc")
    digests = seed_digests(tmp_path)
    assert digests == {0: {"solo": "cc"}, 1: {"bf16": "aa", "fp8": "aa"}, 2: {"fp8": "bb"}}
    assert mixed_warm_starts(digests) == []
    line = warm_start_line(digests)
    assert "seed 1 `aa` (recorded by 2 arms)" in line and "seed 2 `bb` (recorded by 1 arm)" in line
    assert warm_start_line({}) == "Warm starts: no finished run recorded its digest."


def test_a_seed_with_two_warm_starts_is_named_with_its_arms():
    digests = {1: {"bf16": "aa", "fp8": "aa", "calib": "bb"}, 2: {"bf16": "cc", "fp8": "cc"}}
    assert mixed_warm_starts(digests) == ["seed 1: aa: bf16, fp8; bb: calib"]


def test_paired_report_refuses_mixed_warm_starts_and_prints_agreeing_ones(tmp_path):
    for arm in ("bf16", "fp8"):
        _run(tmp_path / f"{arm}__seed1", "aa")
    cmd = [sys.executable, "-m", "experiments.paired_report", f"--sweep={tmp_path}", "--n_boot=50"]
    done = subprocess.run(cmd, capture_output=True, text=True, check=True)
    assert "seed 1 `aa` (recorded by 2 arms)" in done.stdout
    _run(tmp_path / "calib__seed1", "bb")
    bad = subprocess.run(cmd, capture_output=True, text=True)
    assert bad.returncode != 0
    assert "different SFT warm starts" in bad.stderr
    assert "seed 1: aa: bf16, fp8; bb: calib" in bad.stderr
