"""RunLogger.truncate_after: a resumed run's workdir holds nothing logged after its step."""

from __future__ import annotations

import numpy as np
import pytest

from calclip_jax.workdir import run_record as R
from calclip_jax.workdir.run_logger import RunLogger


@pytest.mark.parametrize("step", [0, 2])
def test_rows_dumps_traces_and_samples_after_the_step_are_dropped(tmp_path, step):
    logger = RunLogger(str(tmp_path), tensorboard=False)
    for s in (1, 2, 3):
        logger.write(s, {"reward_mean": 0.1 * s})
        logger.write_samples(s, [("1+1=", "2", 1.0)])
        logger.write_ratio_dump(s, {"ratio": np.ones(3)})
        logger.write_trace(s, {"logp_s000000": np.zeros(3)})
    with open(tmp_path / R.METRICS_FILE, "a") as f:
        f.write('{"step": 4, "rew')  # a torn last line
    logger.truncate_after(step)
    kept = list(range(1, step + 1))
    assert [r["step"] for r in R.read_metrics(tmp_path)] == kept
    assert len((tmp_path / R.METRICS_FILE).read_text().splitlines()) == step
    assert list(R.step_files(tmp_path / R.RATIOS_DIR, "npz")) == kept
    assert list(R.step_files(tmp_path / R.RATIOS_DIR, "npz", R.TRACE_PREFIX)) == kept
    assert list(R.step_files(tmp_path / R.SAMPLES_DIR, "txt")) == kept
    assert not list((tmp_path / R.RATIOS_DIR).glob("*.tmp"))  # dumps are written atomically
