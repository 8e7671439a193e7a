"""`rollout.sampler`: the run draws its rollouts with the chosen exact sampler ("cdf": the same
distribution as the default "gumbel", other draws for the same key), from the same warm start
(the summary's `sft_params_digest`)."""

from __future__ import annotations

import json

import numpy as np
from experiments_testutil import tiny_config

from calclip_jax.train.rl_loop import run_experiment
from calclip_jax.workdir.ratio_dumps import dump_steps, load_dump


def _first_rollout(tmp_path, sampler: str) -> tuple[dict, dict]:
    """Ratio dump and metrics row (with the summary's warm-start digest) of RL step 1 of a tiny
    one-step run with `sampler`."""
    overrides = {"train.steps": 1, "log.ratios_every": 1, "rollout.sampler": sampler}
    run = tmp_path / sampler
    config = tiny_config(str(tmp_path / "cache"), **overrides)
    summary = run_experiment(config, str(run), log=lambda _: None)
    row = json.loads((run / "metrics.jsonl").read_text().splitlines()[0])
    return load_dump(dump_steps(run)[1]), {**row, "digest": summary["sft_params_digest"]}


def test_the_cdf_sampler_draws_other_tokens_of_the_same_prompts(tmp_path):
    gumbel, row_g = _first_rollout(tmp_path, "gumbel")
    cdf, row_c = _first_rollout(tmp_path, "cdf")
    prompt = ~gumbel["mask"] & (gumbel["attn_mask"] == 1)  # the same prompts (seeded draws)
    np.testing.assert_array_equal(gumbel["tokens"][prompt], cdf["tokens"][prompt])
    mask = gumbel["mask"] & cdf["mask"]
    assert np.any(gumbel["tokens"][mask] != cdf["tokens"][mask])  # other draws
    for row in (row_g, row_c):
        assert np.isfinite(row["reward_mean"]) and np.isfinite(row["mismatch_k3"])
    assert row_g["digest"] == row_c["digest"] and len(row_g["digest"]) == 16  # one warm start
