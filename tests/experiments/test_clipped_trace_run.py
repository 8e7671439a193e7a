"""A tiny run with `log.trace_dumps`: each ratio dump step rescores the earlier dumps' rows, and
experiments.clipped_trace's reader takes what it wrote."""

from __future__ import annotations

import numpy as np
from experiments_testutil import tiny_config

from calclip_jax.analysis.clipped_trace import GROUPS
from calclip_jax.reports.clipped_trace import trace_rows
from calclip_jax.train.rl_loop import run_experiment
from calclip_jax.workdir.ratio_dumps import dump_steps, load_dump, load_trace, trace_steps


def test_every_dump_step_traces_the_latest_earlier_dumps(tmp_path):
    overrides = {"train.steps": 4, "log.ratios_every": 1, "log.trace_dumps": 2}
    config = tiny_config(str(tmp_path / "cache"), **overrides)
    run_experiment(config, str(tmp_path / "run"), log=lambda _: None)
    run = tmp_path / "run"
    assert list(dump_steps(run)) == [1, 2, 3, 4]
    dumps = {s: load_dump(path) for s, path in dump_steps(run).items()}
    traces = {t: load_trace(path) for t, path in trace_steps(run).items()}
    assert {t: list(trace) for t, trace in traces.items()} == {2: [1], 3: [1, 2], 4: [2, 3]}
    for t, trace in traces.items():
        for s, logp in trace.items():
            mask = dumps[s]["mask"]
            assert logp.shape == mask.shape and logp.dtype == np.float32, (t, s)
            assert np.all(np.isfinite(logp[mask])) and np.all(logp[mask] <= 0.0), (t, s)
    # trace t of dump t - 1 is the policy after step t; the dump's own new side is the policy
    # after t - 1: they agree (to the rounding of log r) where step t left the policy alone
    shadows = {t: load_trace(path, shadow=True) for t, path in trace_steps(run).items()}
    assert {t: list(s) for t, s in shadows.items()} == {t: list(s) for t, s in traces.items()}
    for t in (2, 3, 4):
        before, mask = dumps[t - 1], dumps[t - 1]["mask"]
        moved = np.any(dumps[t]["ratio"][dumps[t]["mask"]] != 1.0)
        for now, old, ratio in (
            (traces[t][t - 1], before["old_logp_full"], before["ratio"]),
            (shadows[t][t - 1], before["old_logp_ref_full"], before["ratio_ref"]),
        ):
            new = (old + np.log(ratio))[mask]
            agree = np.allclose(now[mask], new, rtol=0, atol=1e-5)
            assert agree != moved, (t, moved)
    rows = trace_rows(run, n_boot=50)
    pairs = [(1, 2), (1, 3), (2, 3), (2, 4), (3, 4)]
    assert [(r.s, r.t) for r in rows] == [p for p in pairs for _ in GROUPS]
    assert [r.shift.group for r in rows] == list(GROUPS) * len(pairs)
    for s, t in pairs:  # the groups partition step s's valid tokens with A != 0
        d = dumps[s]
        signed = int((d["mask"] & (d["advantages"] != 0)).sum())
        assert sum(r.shift.tokens for r in rows if (r.s, r.t) == (s, t)) == signed, (s, t)
