"""Workdir loaders: truncated tail of a killed run, resumed runs, sparse columns, arm discovery."""

import json
import warnings

import numpy as np
import pytest

from calclip_jax.analysis import metrics as M


def write_lines(path, lines):
    path.write_text("".join(line + "\n" for line in lines[:-1]) + lines[-1])


def test_truncated_last_line_is_dropped_silently(tmp_path):
    good = [json.dumps({"step": s, "reward_mean": 0.1 * s}) for s in (1, 2, 3)]
    write_lines(tmp_path / "metrics.jsonl", [*good, '{"step": 4, "reward_me'])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        records = M.load_metrics(tmp_path)
    assert [r["step"] for r in records] == [1, 2, 3]


def test_bad_middle_line_warns_and_resume_duplicates_keep_last(tmp_path):
    lines = [
        json.dumps({"step": 1, "entropy": 2.0}),
        json.dumps({"step": 2, "entropy": 1.9}),
        '{"step": 3, "entr',  # killed mid-write, then the run resumed from step 2's checkpoint
        '{"step": 3, "ent{"step": 3, "entropy": 1.7}',  # appended after a truncated line
        json.dumps({"step": 2, "entropy": 1.8}),
        "",
    ]
    write_lines(tmp_path / "metrics.jsonl", lines)
    with pytest.warns(UserWarning, match="line 3"):
        cols = M.load_columns(tmp_path)
    np.testing.assert_array_equal(cols["step"], [1, 2, 3])
    np.testing.assert_allclose(cols["entropy"], [2.0, 1.8, 1.7])


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


def test_missing_files_and_config_lookup(tmp_path):
    assert M.load_metrics(tmp_path / "nope") == []
    assert M.load_config(tmp_path) is None and M.load_summary(tmp_path) is None
    assert not M.is_finished(tmp_path)
    (tmp_path / "config.json").write_text(json.dumps({"train": {"precision": "fp8_mx"}}))
    config = M.load_config(tmp_path)
    assert M.config_value(config, "train.precision") == "fp8_mx"
    assert M.config_value(config, "train.steps", 7) == 7
    assert M.config_value(config, "train.precision.x") is None


def test_find_arms_lists_run_directories_only(tmp_path):
    for name, file in [("b", "metrics.jsonl"), ("a", "summary.json"), ("c", "config.json")]:
        (tmp_path / name).mkdir()
        (tmp_path / name / file).write_text("{}")
    (tmp_path / "empty").mkdir()
    (tmp_path / "summary.csv").write_text("")
    assert list(M.find_arms(tmp_path)) == ["a", "b", "c"]
    assert M.find_arms(tmp_path / "missing") == {}
