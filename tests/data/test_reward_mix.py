"""Weighted reward mixes: built-ins and users' `module:function`s (loaded from this module), and a
failing function that raises or returns non-finite scores: reported, scored 0, never poisoning."""

import logging
import math

import numpy as np
import pytest

from calclip_jax.config import ConfigError, base_config, build_run_spec
from calclip_jax.data import Example, get_task
from calclip_jax.data.rewards import RewardMix, reward_metrics, score_batch

PROMPTS = ["p0", "p1", "p2", "p3"]
RESPONSES = ["It is 4.", "5", "BOOM", "ok 7"]
ANSWERS = ["4", "6", "1", "7"]
FINISHED = [True, True, True, False]


def length_bonus(responses, answers, *, prompts, finished):
    """A user reward: shorter is better."""
    return [1.0 / (1 + len(r)) for r in responses]


def explodes_on_boom(responses, answers, **context):
    """Raises on one row, so the batch call fails and rows are retried one by one."""
    if any("BOOM" in r for r in responses):
        raise RuntimeError("cannot score BOOM")
    return [1.0] * len(responses)


def nan_on_five(responses, answers, **context):
    return [math.nan if r == "5" else (math.inf if r == "BOOM" else 0.5) for r in responses]


def wrong_length(responses, answers, **context):
    return [1.0]  # always one score: fails on every batch of more than one row


def _score(spelling):
    return RewardMix.load(spelling).score(PROMPTS, RESPONSES, ANSWERS, FINISHED)


def test_the_mix_is_the_weighted_sum_of_its_components():
    out = _score("0.5*last_integer + 0.25*format + 2*test_reward_mix:length_bonus")
    np.testing.assert_array_equal(out["reward_last_integer"], [1, 0, 0, 0])
    np.testing.assert_array_equal(out["reward_format"], [1, 1, 0, 0])
    bonus = np.float32([1 / 9, 1 / 2, 1 / 5, 1 / 5])
    np.testing.assert_allclose(out["reward_length_bonus"], bonus, rtol=1e-6)
    want = 0.5 * out["reward_last_integer"] + 0.25 * out["reward_format"] + 2 * bonus
    np.testing.assert_allclose(out["reward"], want, rtol=1e-6)
    assert out["reward"].dtype == np.float32
    np.testing.assert_array_equal(out["reward_errors"], [0, 0, 0, 0])


def test_a_raising_function_scores_zero_on_its_rows_only_and_is_reported(caplog):
    with caplog.at_level(logging.WARNING, logger="calclip_jax.rewards"):
        out = _score("exact + test_reward_mix:explodes_on_boom")
    np.testing.assert_array_equal(out["reward_explodes_on_boom"], [1, 1, 0, 1])
    np.testing.assert_array_equal(out["reward_errors"], [0, 0, 1, 0])
    assert np.all(np.isfinite(out["reward"]))
    (message,) = [r.getMessage() for r in caplog.records]
    assert "explodes_on_boom" in message and "RuntimeError" in message and "'BOOM'" in message


def test_non_finite_scores_are_zeroed_and_reported(caplog):
    with caplog.at_level(logging.WARNING, logger="calclip_jax.rewards"):
        out = _score("last_integer + test_reward_mix:nan_on_five")
    np.testing.assert_array_equal(out["reward_nan_on_five"], [0.5, 0, 0, 0.5])
    np.testing.assert_array_equal(out["reward_errors"], [0, 1, 1, 0])
    np.testing.assert_array_equal(out["reward"], [1.5, 0, 0, 0.5])
    (message,) = [r.getMessage() for r in caplog.records]
    assert "nan" in message and "'5'" in message and "2 response(s)" in message


def test_a_misshapen_result_is_retried_per_row():
    out = _score("test_reward_mix:wrong_length")
    np.testing.assert_array_equal(out["reward"], [1, 1, 1, 1])  # one row at a time fits
    np.testing.assert_array_equal(out["reward_errors"], [0, 0, 0, 0])


def test_an_unimportable_function_fails_the_config_naming_the_key():
    for spelling, named in [
        ("no_such_module_xyz:fn", "cannot import module 'no_such_module_xyz'"),
        ("test_reward_mix:missing_fn", "has no 'missing_fn'"),
        ("test_reward_mix:PROMPTS", "not callable"),
    ]:
        config = base_config()
        config.task.reward = spelling
        with pytest.raises(ConfigError, match=r"^task\.reward") as info:
            build_run_spec(config)
        assert named in str(info.value)


def test_score_batch_keeps_the_verifier_without_a_mix_and_its_correctness_with_one():
    task = get_task("arithmetic", num_train=10, num_test=5)
    rows = [Example("1+2=", "3", (1, 2), 3)] * 3
    texts, finished = ["3", "4", "x"], [True, True, True]
    own = task.verify_batch(rows, texts, finished)
    plain = score_batch(task, None, rows, texts, finished)
    assert plain.keys() == own.keys()
    for key in own:
        np.testing.assert_array_equal(plain[key], own[key])
    mixed = score_batch(task, RewardMix.load("0.5*format"), rows, texts, finished)
    np.testing.assert_array_equal(mixed["reward"], [0.5, 0.5, 0])
    np.testing.assert_array_equal(mixed["correct"], own["correct"])
    np.testing.assert_array_equal(mixed["garbled"], own["garbled"])


def test_reward_metrics_name_each_component_and_count_failures_over_all_rounds():
    first = _score("exact + test_reward_mix:explodes_on_boom")
    second = _score("exact + test_reward_mix:explodes_on_boom")
    metrics = reward_metrics(first, [first, second])
    assert metrics == {
        "reward_exact_mean": 0.0,
        "reward_explodes_on_boom_mean": 0.75,
        "reward_errors": 2.0,
    }
    assert reward_metrics({"reward": np.zeros(2)}, []) == {}
