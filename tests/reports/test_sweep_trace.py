"""The clipped-token trace of a seeded sweep (reports/sweep_trace.py, experiments.clipped_trace
--sweep), on synthetic dumps and traces with a planted effect after step s; --last_step reads
the sweep as it stood then."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
from run_fixtures import check_last_step

from calclip_jax.analysis.clipped_trace import CLIPPED, GROUPS, POSITIVE, UNCLIPPED
from calclip_jax.reports.sweep_trace import ALL_LAGS, sweep_trace_table, sweep_traces
from calclip_jax.workdir import run_record as R
from calclip_jax.workdir.ratio_dumps import trace_key
from calclip_jax.workdir.run_logger import RunLogger

B, T, LOWER = 64, 8, 0.8


def _run(
    folder: Path, seed: int, planted: float, traced: bool = True, shadow: float | None = None
) -> int:
    """Dumps at steps 10 and 20, a trace at step 30 (lags 20 and 10). After step s, its A<0
    tokens below the bound gain `planted` nats on top of noise; every token first moved by its
    own log r during step s. With `shadow`, the BF16 shadow is traced too and its clipped tokens
    gain `shadow` nats after step s. Returns the run's count of clipped A<0 tokens."""
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True)
    logger = RunLogger(str(folder), tensorboard=False)
    R.config_path(folder).write_text(json.dumps({"resolved": {"clip_bounds": [LOWER, 1.28]}}))
    logger.write(30, {"reward_mean": 0.5})
    trace, clipped = {}, 0
    for s in (10, 20):
        adv = np.where(np.arange(B) % 2 == 0, -1.0, 1.0).astype(np.float32)
        mask = np.arange(T)[None] < rng.integers(3, T + 1, size=(B, 1))
        ratio = np.exp(rng.normal(0.0, 0.3, (B, T))).astype(np.float32)
        old = rng.uniform(-3.0, -0.1, (B, T)).astype(np.float32)
        dump = {"ratio": ratio, "advantages": adv, "mask": mask, "old_logp_full": old}
        hit = mask & (adv[:, None] < 0) & (ratio < LOWER)
        clipped += int(hit.sum())
        later = np.where(hit, planted, 0.0) + rng.normal(0.0, 0.05, (B, T))
        trace[trace_key(s)] = (old + np.log(ratio) + later).astype(np.float32)
        if shadow is not None:
            ratio_ref = np.exp(rng.normal(0.0, 0.02, (B, T))).astype(np.float32)
            dump.update(ratio_ref=ratio_ref, old_logp_ref_full=old - 0.01)
            later_ref = np.where(hit, shadow, 0.0) + rng.normal(0.0, 0.05, (B, T))
            trace[trace_key(s, shadow=True)] = old - 0.01 + np.log(ratio_ref) + later_ref
        logger.write_ratio_dump(s, dump)
    if traced:
        logger.write_trace(30, trace)
    return clipped


def _sweep(root: Path) -> dict[str, int]:
    """Arm `gain` (planted 0.5; in its BF16 shadow 0.2) and `none` (0, shadow not traced) at
    seeds 1 and 2, and an untraced seed 3 of `none`. Returns each arm's clipped-token count over
    its traced seeds."""
    counts = {"gain": 0, "none": 0}
    for arm, planted, shadow in (("gain", 0.5, 0.2), ("none", 0.0, None)):
        for k in (1, 2):
            folder = root / f"{arm}__seed{k}"
            counts[arm] += _run(folder, 10 * k + len(arm), planted, shadow=shadow)
    _run(root / "none__seed3", 99, 0.0, traced=False)
    return counts


def test_the_planted_gain_is_the_contrast_of_its_arm_only(tmp_path):
    counts = _sweep(tmp_path)
    rows = sweep_traces(tmp_path, n_boot=400)
    assert [(r.arm, r.lag, r.seeds) for r in rows] == [
        (arm, lag, (1, 2)) for arm in ("gain", "none") for lag in (10, 20, ALL_LAGS)
    ]
    for arm in ("gain", "none"):  # the lags partition the clipped tokens; "all" holds each once
        mine = {r.lag: r.tokens[CLIPPED] for r in rows if r.arm == arm}
        assert mine[10] + mine[20] == mine[ALL_LAGS] == counts[arm]
    for r in rows:
        assert len(r.contrast.per_seed) == 2 and set(r.after) == set(GROUPS)
        want = 0.5 if r.arm == "gain" else 0.0
        assert abs(r.after[CLIPPED].estimate - want) < 0.03
        assert abs(r.contrast.estimate - want) < 0.03
        assert r.contrast.excludes(0.0) == (r.arm == "gain")
        for g in (UNCLIPPED, POSITIVE):  # step s's own log r is taken out: noise only
            assert abs(r.after[g].estimate) < 0.03
        if r.arm == "gain":  # the shadow's own gain, read against its own ratio
            assert abs(r.shadow_contrast.estimate - 0.2) < 0.03 and r.shadow_contrast.excludes(0)
        else:
            assert math.isnan(r.shadow_contrast.estimate)
    table = sweep_trace_table(rows)
    assert "BF16 shadow" in table and "BF16 shadow" not in sweep_trace_table(
        [r for r in rows if r.arm == "none"]  # no run of it traced the shadow
    )
    assert table.count("\n| gain |") == 3 and "| gain | all | 2 |" in table and "1: 0.5" in table


def test_the_command_reads_a_sweep_and_takes_one_source(tmp_path):
    _sweep(tmp_path / "sweep")
    out = tmp_path / "trace.md"
    cmd = [sys.executable, "-m", "experiments.clipped_trace", "--n_boot=200"]
    done = subprocess.run(
        [*cmd, f"--sweep={tmp_path / 'sweep'}", f"--out={out}"], capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    assert "| none | 20 | 2 |" in done.stdout and out.read_text().strip() == done.stdout.strip()
    assert "| gain | 2 |" in done.stdout  # what clipped them: the arm whose dumps hold ratio_ref
    both = subprocess.run(
        [*cmd, f"--sweep={tmp_path}", f"--workdir={tmp_path}"], capture_output=True, text=True
    )
    assert both.returncode != 0 and "exactly one of --workdir and --sweep" in both.stderr
    empty = subprocess.run([*cmd, f"--sweep={tmp_path}"], capture_output=True, text=True)
    assert empty.returncode != 0 and "holds a ratio dump" in empty.stderr


def test_last_step_leaves_out_the_later_traces(tmp_path):
    _sweep(tmp_path / "sweep")
    cmd = [sys.executable, "-m", "experiments.clipped_trace", "--n_boot=200"]

    then = check_last_step(cmd, tmp_path / "sweep", tmp_path / "then", last_step=25)
    assert "(no run holds a trace" in then and "| gain | 2 |" in then  # dumps 10, 20 stay
