"""End-to-end smoke runs: GRPO/DAPO x BF16/FP8 x calibration on/off, tiny shapes."""

from __future__ import annotations

import json
import math
import os

import pytest
from experiments_testutil import tiny_config

from calclip_jax.config import ConfigError, build_run_spec, parse
from calclip_jax.data import get_task
from calclip_jax.fp8 import PrecisionRecipe
from calclip_jax.rl.diagnostics import CLIP_METRICS, MISMATCH_METRICS
from calclip_jax.train.rl_loop import run_experiment
from calclip_jax.workdir import run_record as R
from calclip_jax.workdir.run_record import read_metrics
from configs import arms

HEADLINE = (
    "reward_mean",
    "response_len_mean",
    "garbled_frac",
    "step_time_s",
    "entropy",
    *CLIP_METRICS,
    *MISMATCH_METRICS,
    "tis_trunc_frac",
    "grad_norm",
)

ARMS = [  # (rl.preset, rollout.precision, train.precision, calibration.enabled, share_prompt)
    ("grpo", "bf16", "bf16", False, False),
    ("grpo", "fp8_block", "fp8_block", True, False),
    ("dapo", "fp8_tensor", "fp8_tensor", False, False),
    ("dapo", "bf16", "fp8_channel", True, True),  # DAPO's refilled groups, prompt run once
]


@pytest.fixture(scope="module")
def sft_cache(tmp_path_factory):
    return str(tmp_path_factory.mktemp("sft_cache"))


@pytest.mark.parametrize(("algo", "rollout", "train", "calib", "share"), ARMS)
def test_smoke_run(tmp_path, sft_cache, algo, rollout, train, calib, share):
    config = tiny_config(
        sft_cache,
        **{
            "rl.preset": algo,
            "rollout.precision": rollout,
            "train.precision": train,
            "calibration.enabled": calib,
            "train.share_prompt": share,
        },
    )
    summary = run_experiment(config, str(tmp_path), log=lambda _: None)
    rows = read_metrics(str(tmp_path))
    assert [r["step"] for r in rows] == [1, 2, 3]
    for row in rows:
        for name in HEADLINE:
            assert row[name] is not None and math.isfinite(row[name]), (name, row[name])
        # ratio quantiles are null only when no token of that advantage sign was trained on
        assert row["ratio_neg_p50"] is None or math.isfinite(row["ratio_neg_p50"])
    assert rows[0]["eval_accuracy"] is not None and rows[1]["eval_accuracy"] is not None
    if calib:
        assert all(r["clip_frac_lower_neg_ref"] is not None for r in rows)
    if algo == "grpo":
        assert all(math.isfinite(r["kl_ref"]) for r in rows)
    assert summary["final_step"] == 3
    resolved = R.load_config(str(tmp_path))[R.RESOLVED]
    assert resolved["shared_prompt"] == ({"group_size": 4, "response_len": 4} if share else None)
    dumps = ("samples/step_000001.txt", "ratios/step_000002.npz")
    for name in ("config.json", "summary.json", *dumps):
        assert os.path.exists(tmp_path / name), name
    assert os.listdir(tmp_path / "tb")
    assert sorted(os.listdir(tmp_path / "checkpoints")) == ["2", "3"]
    # config.json: the knobs parse back to the run's config; the resolved section is the spec's
    spec = build_run_spec(config)
    assert parse(R.load_config(tmp_path)) == spec.config
    assert R.clip_bounds(tmp_path) == spec.update.rl.clip_bounds
    assert spec.update.rl.clip_bounds == pytest.approx((0.8, 1.28 if algo == "dapo" else 1.2))
    resolved = R.load_config(tmp_path)["resolved"]
    assert resolved["train_recipe"] == spec.update.recipe.to_dict()
    assert resolved["rollout_recipe"] == PrecisionRecipe.preset(rollout).to_dict()
    # rewards in the sample dump are the verifier's rewards of those responses
    task = get_task("arithmetic", max_digits=1, partial_credit=True, num_test=16)
    examples = {ex.prompt: ex for split in ("train", "test") for ex in task.examples(split)}
    lines = (tmp_path / "samples" / "step_000001.txt").read_text().splitlines()
    for line in lines:
        reward, text = line.split("  ", 1)
        prompt, response = text.split("|", 1)
        expected = task.verify(examples[prompt], response, finished=True).reward
        assert float(reward) in (pytest.approx(expected, abs=1e-3), 0.0)
    with open(tmp_path / "summary.json") as f:
        assert json.load(f)["final_step"] == 3


def test_pooled_calibration_and_shadow_every_in_a_run(tmp_path, sft_cache):
    """`calibration.sample=batch` (period 2) with `calibration.shadow_every=3`, end to end: the
    pooled calibration's metrics in the rows of calibrating RL steps (1, 3), the shadow's clip
    shares in those of the RL steps that measure it (1)."""
    overrides = {
        "rollout.precision": "fp8_tensor",
        "train.precision": "fp8_tensor",
        "calibration.enabled": True,
        "calibration.sample": "batch",
        "calibration.period": 2,
        "calibration.shadow_every": 3,
    }
    config = tiny_config(sft_cache, **overrides)
    run_experiment(config, str(tmp_path), log=lambda _: None)
    rows = read_metrics(str(tmp_path))
    assert [r["calib_q_lower"] is not None for r in rows] == [True, False, True]
    assert [r["calib_lower_floored"] is not None for r in rows] == [True, False, True]
    assert [r["clip_frac_lower_neg_ref"] is not None for r in rows] == [True, False, False]
    assert parse(R.load_config(tmp_path)) == build_run_spec(config).config


def test_the_ratio_is_exactly_one_at_theta_old_by_default(tmp_path, sft_cache):
    """The default config in FP8 per-tensor + TIS, 4 minibatch updates per RL step at a learning
    rate that moves no parameter: `ratio_log_abs_max` is exactly 0 at every RL step (every
    update's ratio is 1: the old and new log-probs come from one forward program), and
    config.json's resolved section records that program."""
    overrides = {
        **arms.ARMS["fp8_tensor_tis"],
        "rollout.prompts_per_step": 8,  # 4 minibatches of 8 rows: one a simulated device
        "train.num_minibatches": 4,
        "train.learning_rate": 1e-30,
        "train.steps": 2,
        "sft.updates": 0,  # the ratio at theta_old needs no warm start
        "log.ratios_every": None,
    }
    config = tiny_config(sft_cache, **overrides)
    run_experiment(config, str(tmp_path), log=lambda _: None)
    rows = read_metrics(str(tmp_path))
    assert [r["step"] for r in rows] == [1, 2]
    assert [r["ratio_log_abs_max"] for r in rows] == [0.0, 0.0]
    resolved = R.load_config(tmp_path)[R.RESOLVED]
    assert resolved["same_forward"] is True and resolved["updates_per_rl_step"] == 4


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("train.precision", "fp9", "train.precision"),
        ("calibration.upper_rule", "magic", "calibration"),
        ("correction.mode", "always", "correction"),
        ("rl.preset", "ppo", "rl.preset"),
        ("rl.dual_clip_c", 0.5, "dual_clip_c"),
        ("train.num_minibatches", 3, "train.num_minibatches"),
        ("task.name", "chess", "task"),
        ("log.surge_window", 0, "log.surge_window"),
        ("train.fwd_format", "e3m4", "train.fwd_format"),
        ("rollout.fwd_format", "e5m2", "rollout.fwd_format needs an fp8 precision"),
    ],
)
def test_bad_config_names_the_key(tmp_path, key, value, message):
    config = tiny_config(str(tmp_path), **{key: value})
    with pytest.raises(ConfigError, match=message):
        build_run_spec(config)


@pytest.mark.parametrize("fmt", ["e5m2", "e2m1"])
def test_fwd_format_replaces_weights_and_activations_only(tmp_path, fmt):
    config = tiny_config(
        str(tmp_path),
        **{
            "rollout.precision": "fp8_mx",
            "train.precision": "fp8_mx",
            "rollout.fwd_format": fmt,
            "train.fwd_format": fmt,
        },
    )
    spec = build_run_spec(config)
    for recipe in (spec.rollout_recipe, spec.update.recipe):
        assert (recipe.weights.dtype, recipe.activations.dtype) == (fmt, fmt)
        assert recipe.gradients.dtype == "e5m2" and recipe.weights.granularity == "mx"
