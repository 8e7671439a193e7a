"""The CLI rejects a bad config before compiling. Kills, resumes and damaged checkpoints:
test_fault_injection.py."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


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
