"""A run's clipped-token trace read from its folder (reports/clipped_trace.py) and its command
(experiments.clipped_trace), on synthetic dumps and traces with a planted effect."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from calclip_jax.reports.clipped_trace import trace_rows, trace_table
from calclip_jax.workdir import run_record as R
from calclip_jax.workdir.ratio_dumps import trace_key
from calclip_jax.workdir.run_logger import RunLogger

B, T = 48, 10


def _run(tmp_path: Path) -> tuple[Path, dict[int, np.ndarray]]:
    """Dumps at steps 5 and 10, one trace at step 15 holding both. Step 5 logged a carried lower
    bound of 0.7 (metrics.jsonl), step 10 none (the static 0.8 of config.json). The trace raises
    the log-prob of each step's A<0 tokens below its bound by 0.5 +- 0.05 and leaves the others.
    Returns the run and each step's clipped A<0 tokens."""
    rng = np.random.default_rng(1)
    tmp_path.mkdir(parents=True, exist_ok=True)
    logger = RunLogger(str(tmp_path), tensorboard=False)
    R.config_path(tmp_path).write_text(json.dumps({"resolved": {"clip_bounds": [0.8, 1.28]}}))
    logger.write(5, {"clip_lower": 0.7})
    logger.write(10, {"reward_mean": 0.5})
    trace, clipped = {}, {}
    for s, lower in ((5, 0.7), (10, 0.8)):
        adv = np.where(np.arange(B) % 2 == 0, -1.0, 1.0).astype(np.float32)
        mask = np.arange(T)[None] < rng.integers(3, T + 1, size=(B, 1))
        ratio = np.exp(rng.normal(0.0, 0.3, (B, T))).astype(np.float32)
        old = rng.uniform(-3.0, -0.1, (B, T)).astype(np.float32)
        logger.write_ratio_dump(
            s, {"ratio": ratio, "advantages": adv, "mask": mask, "old_logp_full": old}
        )
        clipped[s] = mask & (adv[:, None] < 0) & (ratio < lower)
        shift = np.where(clipped[s], 0.5 + rng.normal(0.0, 0.05, (B, T)), 0.0)
        trace[trace_key(s)] = (old + shift).astype(np.float32)
    logger.write_trace(15, trace)
    return tmp_path, clipped


def test_the_planted_shift_is_found_at_each_steps_own_bound(tmp_path):
    run, clipped = _run(tmp_path)
    rows = trace_rows(run, n_boot=500)
    assert [(r.s, r.t, r.lag, r.shift.group) for r in rows[:3]] == [
        (5, 15, 10, "A<0 clipped"),
        (5, 15, 10, "A<0 not clipped"),
        (5, 15, 10, "A>0"),
    ]
    assert [r.s for r in rows] == [5] * 3 + [10] * 3
    by = {(r.s, r.shift.group): r for r in rows}
    assert by[5, "A<0 clipped"].lower == 0.7 and by[10, "A<0 clipped"].lower == 0.8
    for s in (5, 10):
        hit = by[s, "A<0 clipped"].shift
        assert hit.tokens == clipped[s].sum() > 10
        assert abs(hit.shift.estimate - 0.5) < 0.03 and hit.shift.low < 0.5 < hit.shift.high
        for group in ("A<0 not clipped", "A>0"):  # unmoved: exactly 0 up to float32 rounding
            iv = by[s, group].shift.shift
            assert by[s, group].shift.tokens > 10
            assert max(abs(iv.estimate), abs(iv.low), abs(iv.high)) < 1e-6
    table = trace_table(rows)
    assert table.count("\n| ") == 1 + 6  # header and six rows
    assert "| 5 | 15 | 10 | 0.7 | A<0 clipped |" in table


def test_a_traced_dump_that_is_gone_is_named(tmp_path):
    run, _ = _run(tmp_path)
    R.ratio_dump_path(run, 10).unlink()
    with pytest.raises(ValueError, match="ratio dump of step 10 is gone"):
        trace_rows(run, n_boot=10)


def test_cli_prints_writes_and_draws_the_trace_and_refuses_a_run_without_one(tmp_path):
    run, _ = _run(tmp_path / "run")
    out, fig = tmp_path / "trace.md", tmp_path / "trace.png"
    cmd = [sys.executable, "-m", "experiments.clipped_trace", "--n_boot=100"]
    done = subprocess.run(
        [*cmd, f"--workdir={run}", f"--out={out}", f"--figure={fig}"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert "| 10 | 15 | 5 | 0.8 | A<0 clipped |" in done.stdout
    assert out.read_text().strip() == done.stdout.strip()
    assert fig.read_bytes().startswith(b"\x89PNG")
    (tmp_path / "empty").mkdir()
    bad = subprocess.run([*cmd, f"--workdir={tmp_path / 'empty'}"], capture_output=True, text=True)
    assert bad.returncode != 0 and "holds no trace" in bad.stderr
