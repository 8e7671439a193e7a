"""Metrics as columns (sparse and null values) and config lookups; the reader: test_run_record."""

import json

import numpy as np
from run_fixtures import make_run

from calclip_jax.reports import metrics as M
from calclip_jax.workdir import run_record as R


def test_columns_align_sparse_and_null_values_as_nan():
    records = [
        {"step": 1, "reward_mean": 0.5, "eval_accuracy": 0.2, "clip_frac_lower_neg_ref": None},
        {"step": 2, "reward_mean": None},
        {"step": 3, "reward_mean": 0.7, "eval_accuracy": 0.4, "note": "x"},
    ]
    cols = M.to_columns(records)
    assert cols["step"].dtype == np.int64
    np.testing.assert_array_equal(cols["eval_accuracy"], [0.2, np.nan, 0.4])
    np.testing.assert_array_equal(cols["reward_mean"], [0.5, np.nan, 0.7])
    assert np.isnan(cols["clip_frac_lower_neg_ref"]).all()
    assert cols["note"].dtype == object


def test_missing_metrics_and_config_lookup(tmp_path):
    assert M.load_columns(tmp_path / "nope") == {}
    (tmp_path / "config.json").write_text(json.dumps({"train": {"precision": "fp8_mx"}}))
    config = R.load_config(tmp_path)
    assert M.config_value(config, "train.precision") == "fp8_mx"
    assert M.config_value(config, "train.steps", 7) == 7
    assert M.config_value(config, "train.precision.x") is None


def test_load_columns_through_a_last_step(tmp_path):
    make_run(tmp_path, [{"step": s, "reward_mean": s / 10} for s in (1, 2, 3)])
    cols = M.load_columns(tmp_path, last_step=2)
    np.testing.assert_array_equal(cols["step"], [1, 2])
    np.testing.assert_array_equal(cols["reward_mean"], [0.1, 0.2])
    assert len(M.load_columns(tmp_path)["step"]) == 3
