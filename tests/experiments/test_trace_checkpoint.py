"""A trace written afterwards from a checkpoint is the one the run wrote while it ran."""

from __future__ import annotations

import numpy as np
import pytest
from experiments_testutil import tiny_config

from calclip_jax.probes.eval_checkpoint import EvalError
from calclip_jax.probes.trace_checkpoint import trace_from_checkpoint
from calclip_jax.train.rl_loop import run_experiment
from calclip_jax.workdir import run_record as R
from calclip_jax.workdir.ratio_dumps import load_trace


@pytest.mark.parametrize("precision", ["bf16", "fp8_delayed"])
def test_trace_from_a_checkpoint_is_the_runs_own(tmp_path, precision):
    overrides = {
        "train.steps": 4,
        "log.ratios_every": 1,
        "log.trace_dumps": 2,
        "log.checkpoint_every": 1,
        "train.precision": precision,
    }
    run = tmp_path / "run"
    run_experiment(tiny_config(str(tmp_path / "cache"), **overrides), str(run), log=lambda _: None)
    path = R.trace_path(run, 4)
    own, own_ref = load_trace(path), load_trace(path, shadow=True)
    with pytest.raises(EvalError, match="exists"):
        trace_from_checkpoint(run, 4, 2)
    path.unlink()
    written, steps = trace_from_checkpoint(run, 4, 2)
    assert written == path and steps == [2, 3]
    again, again_ref = load_trace(path), load_trace(path, shadow=True)
    assert list(again) == list(own) == list(again_ref) == list(own_ref) == [2, 3]
    for s in own:  # same parameters (and amax histories), same programs: bit for bit
        np.testing.assert_array_equal(again[s], own[s])
        np.testing.assert_array_equal(again_ref[s], own_ref[s])
    with pytest.raises(EvalError, match="no checkpoint at step 1"):  # orbax keeps the last 2
        trace_from_checkpoint(run, 1, 2)
