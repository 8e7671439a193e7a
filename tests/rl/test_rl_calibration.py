"""Calibrated Clipping: properties (hypothesis), edge cases, jit vs non-jit, smoothing."""

import chex
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from calclip_jax.rl.calibration import (
    CALIB_METRICS,
    UPPER_RULES,
    CalibrationConfig,
    calibrated_bounds,
    calibrated_bounds_with_aux,
    smooth_bounds,
)
from calclip_jax.rl.presets import get_preset

B, T = 8, 16
EPS_LOW, EPS_HIGH = 0.2, 0.28
SETTINGS = settings(max_examples=20, deadline=None)


def _calibrate(solver, rule, upper_max=None, lower_max=1.0, lower_min=None):
    def f(ratio, ratio_ref, adv, mask, eps_low, eps_high):
        return calibrated_bounds_with_aux(
            ratio,
            ratio_ref,
            adv,
            mask,
            eps_low=eps_low,
            eps_high=eps_high,
            upper_rule=rule,
            solver=solver,
            upper_max=upper_max,
            lower_max=lower_max,
            lower_min=lower_min,
        )

    return jax.jit(f)


CALIB = {(s, r): _calibrate(s, r, upper_max=1e6, lower_max=1e6, lower_min=0.0)
         for s in ("sort", "bisect") for r in UPPER_RULES}  # fmt: skip
CALIB_DEFAULT = {r: _calibrate("auto", r) for r in UPPER_RULES}


def _batch(seed, noise_ref, noise_fp8, keep):
    """Reference ratios, FP8-like ratios with extra independent noise, GRPO-like advantages."""
    rng = np.random.default_rng(seed)
    log_ref = rng.normal(0, noise_ref, (B, T))
    ratio_ref = np.exp(log_ref).astype(np.float32)
    ratio = np.exp(log_ref + rng.normal(0, noise_fp8, (B, T))).astype(np.float32)
    adv = rng.normal(size=B).astype(np.float32)
    mask = rng.random((B, T)) < keep
    return ratio, ratio_ref, adv, mask


BATCHES = st.builds(
    _batch,
    seed=st.integers(0, 2**16),
    noise_ref=st.floats(0.01, 0.4),
    noise_fp8=st.floats(0.0, 0.4),
    keep=st.floats(0.3, 1.0),
)


@SETTINGS
@given(batch=BATCHES, solver=st.sampled_from(["sort", "bisect"]))
def test_lower_bound_matches_reference_clip_share(batch, solver):
    ratio, ratio_ref, adv, mask = batch
    lower, _, aux = CALIB[(solver, "fixed")](ratio, ratio_ref, adv, mask, EPS_LOW, EPS_HIGH)
    neg = mask & (adv[:, None] < 0)
    n = neg.sum()
    if n == 0:
        assert float(lower) == pytest.approx(1 - EPS_LOW)
        return
    share = (neg & (ratio < float(lower))).sum() / n
    share_ref = (neg & (ratio_ref < 1 - EPS_LOW)).sum() / n
    assert abs(share - share_ref) <= 1.0 / n
    assert float(aux["calib_q_lower"]) == pytest.approx(share_ref)


@SETTINGS
@given(batch=BATCHES, solver=st.sampled_from(["sort", "bisect"]))
def test_balance_rule_meets_its_equation(batch, solver):
    ratio, ratio_ref, adv, mask = batch
    lower, upper, aux = CALIB[(solver, "balance")](ratio, ratio_ref, adv, mask, EPS_LOW, EPS_HIGH)
    lower, upper = float(lower), float(upper)
    a = np.broadcast_to(adv[:, None], (B, T))
    neg, pos = mask & (a < 0), mask & (a > 0)
    mass, mass_ref = np.abs(a) * ratio, np.abs(a) * ratio_ref
    g_neg = mass[neg & (ratio >= lower)].sum()
    g_neg_ref = mass_ref[neg & (ratio_ref >= 1 - EPS_LOW)].sum()
    g_pos_ref = mass_ref[pos & (ratio_ref <= 1 + EPS_HIGH)].sum()
    if g_neg == 0 or g_neg_ref == 0:  # undefined target -> static upper
        assert upper == pytest.approx(max(1 + EPS_HIGH, lower))
        return
    target = g_pos_ref / g_neg_ref * g_neg
    g_pos = mass[pos & (ratio <= upper)].sum()
    one_token = mass[pos].max(initial=0.0)
    if mass[pos].sum() < target * (1 - 2e-4):  # unreachable: U = +inf, capped and reported
        assert upper == 1e6 and float(aux["calib_upper_capped"]) == 1.0
        return
    if upper > 1.0 and upper > lower:  # not clamped from below: equation met within one token
        assert g_pos >= target * (1 - 2e-4)
        assert g_pos - one_token <= target * (1 + 1e-4)
    np.testing.assert_allclose(float(aux["calib_balance_target"]), g_pos_ref / g_neg_ref, rtol=1e-4)


@SETTINGS
@given(batch=BATCHES, rule=st.sampled_from(UPPER_RULES))
def test_sort_and_bisect_agree_and_cap_is_reported(batch, rule):
    ratio, ratio_ref, adv, mask = batch
    args = (ratio, ratio_ref, adv, mask, EPS_LOW, EPS_HIGH)
    lo_s, up_s, _ = CALIB[("sort", rule)](*args)
    lo_b, up_b, _ = CALIB[("bisect", rule)](*args)
    assert float(lo_s) == float(lo_b) and float(up_s) == float(up_b)
    lower, upper, aux = CALIB_DEFAULT[rule](*args)
    cap, floor = 1 + 2 * EPS_HIGH, np.float32(1 - 2 * EPS_LOW)
    assert floor <= float(lower) <= 1.0 and max(1.0, float(lower)) <= float(upper) <= cap + 1e-6
    assert bool(aux["calib_upper_capped"]) == (float(aux["calib_upper_raw"]) > cap)
    assert bool(aux["calib_lower_floored"]) == (float(aux["calib_lower_raw"]) < floor)
    assert set(aux) == set(CALIB_METRICS)


@SETTINGS
@given(
    seed=st.integers(0, 2**16),
    spread=st.floats(0.05, 2.0),
    lower_min=st.sampled_from([None, 0.0, 0.5, 0.75]),
)
def test_lower_bound_never_falls_below_its_floor(seed, spread, lower_min):
    """The shadow clips nothing (q = 0) while the FP8 ratios spread: unfloored, the lower bound
    would follow the smallest A<0 ratio down; it stays at the floor or above, and the floor's
    hits are reported."""
    ratio, _, adv, mask = _batch(seed, spread, 0.0, 0.9)
    ones = np.ones_like(ratio)
    lower, _, aux = _calibrate("auto", "balance", lower_min=lower_min)(
        ratio, ones, adv, mask, EPS_LOW, EPS_HIGH
    )
    floor = np.float32(1 - 2 * EPS_LOW if lower_min is None else lower_min)
    neg = mask & (adv[:, None] < 0)
    unfloored = min(np.float32(1 - EPS_LOW), ratio[neg].min()) if neg.any() else 1 - EPS_LOW
    assert float(aux["calib_q_lower"]) == 0.0
    assert float(lower) >= floor
    assert float(lower) == pytest.approx(max(floor, unfloored))
    assert float(aux["calib_lower_floored"]) == float(unfloored < floor)


@pytest.mark.parametrize("rule", UPPER_RULES)
def test_identical_ratios_give_static_bounds(rule):
    ratio, _, adv, mask = _batch(0, 0.15, 0.0, 0.9)
    lower, upper = calibrated_bounds(ratio, ratio, adv, mask, eps_low=EPS_LOW, eps_high=EPS_HIGH,
                                     upper_rule=rule)  # fmt: skip
    assert float(lower) == pytest.approx(1 - EPS_LOW) and float(upper) == pytest.approx(
        1 + EPS_HIGH
    )


def _edge_cases():
    ratio, ratio_ref, adv, mask = _batch(1, 0.2, 0.2, 0.9)
    ones = np.ones((B, T), np.float32)
    return {
        "no_negative": (ratio, ratio_ref, np.abs(adv), mask),
        "no_positive": (ratio, ratio_ref, -np.abs(adv), mask),
        "q0": (ratio, ones, adv, mask),
        "q1": (ratio, np.full((B, T), 0.1, np.float32), adv, mask),
        "all_equal": (ones, ones, adv, mask),
        "all_equal_fp8_only": (ones, ratio_ref, adv, mask),
        "all_masked": (ratio, ratio_ref, adv, np.zeros((B, T), bool)),
        "zero_advantages": (ratio, ratio_ref, 0 * adv, mask),
        "huge_ratios": (ratio * 1e30, ratio_ref, adv, mask),
    }


@pytest.mark.parametrize("case", list(_edge_cases()))
def test_edge_cases_finite_and_documented(case):
    ratio, ratio_ref, adv, mask = _edge_cases()[case]
    neg = mask & (adv[:, None] < 0)
    for rule in UPPER_RULES:
        lower, upper, aux = CALIB_DEFAULT[rule](ratio, ratio_ref, adv, mask, EPS_LOW, EPS_HIGH)
        lower, upper = float(lower), float(upper)
        assert np.isfinite([lower, upper]).all()
        assert 0.6 - 1e-6 <= lower <= 1.0 <= upper <= 1.56 + 1e-6
        assert all(np.isfinite(float(v)) for v in aux.values()), (case, rule, aux)
        if case in ("no_negative", "all_masked", "zero_advantages", "all_equal"):
            assert lower == pytest.approx(1 - EPS_LOW)
        if case == "q0":  # clip nothing: closest such bound to 0.8, floored at 1 - 2 eps_low
            assert lower == pytest.approx(max(0.6, min(0.8, ratio[neg].min())))
        if case == "q1":  # clip every negative token (capped at 1)
            assert lower == pytest.approx(min(1.0, np.nextafter(ratio[neg].max(), np.inf)))
        if case in ("all_masked", "zero_advantages") or (
            case == "no_positive" and rule in ("balance", "quantile")
        ):
            assert upper == pytest.approx(1 + EPS_HIGH)


class JitAgreementTest(chex.TestCase):
    @chex.variants(with_jit=True, without_jit=True)
    def test_jit_and_eager_agree_with_traced_eps(self):
        ratio, ratio_ref, adv, mask = _batch(3, 0.2, 0.2, 0.8)
        for rule in UPPER_RULES:

            @self.variant
            def f(r, rr, a, m, eps_low, eps_high, rule=rule):
                return calibrated_bounds(r, rr, a, m, eps_low=eps_low, eps_high=eps_high,
                                         upper_rule=rule)  # fmt: skip

            got = f(ratio, ratio_ref, adv, mask, jnp.float32(EPS_LOW), jnp.float32(EPS_HIGH))
            want = CALIB_DEFAULT[rule](ratio, ratio_ref, adv, mask, EPS_LOW, EPS_HIGH)[:2]
            chex.assert_trees_all_close(got, want, rtol=1e-6)


def test_smoothing_and_init():
    prev = tuple(jnp.float32(b) for b in get_preset("dapo").clip_bounds)  # the warm start
    chex.assert_trees_all_close(prev, (jnp.float32(0.8), jnp.float32(1.28)))
    new = (jnp.float32(0.6), jnp.float32(1.5))
    chex.assert_trees_all_close(smooth_bounds(prev, new, 0.9), (0.78, 1.302), rtol=1e-6)
    chex.assert_trees_all_close(smooth_bounds(prev, new, 0.0), new)
    with pytest.raises(ValueError, match="upper_rule"):
        calibrated_bounds(*_batch(0, 0.1, 0.1, 1.0), eps_low=0.2, eps_high=0.2, upper_rule="x")


def test_calibration_config():
    cfg = CalibrationConfig(enabled=True, upper_rule="quantile", period=1)
    ratio, ratio_ref, adv, mask = _batch(0, 0.1, 0.1, 1.0)
    got = calibrated_bounds(ratio, ratio_ref, adv, mask, eps_low=0.2, eps_high=0.2,
                            **cfg.bounds_kwargs())  # fmt: skip
    assert all(np.isfinite(float(v)) for v in got)
    bad_knobs = (
        {"upper_rule": "x"},
        {"solver": "topk"},
        {"period": 0},
        {"ema_beta": 1.0},
        {"lower_min": 1.0},
        {"lower_min": -0.1},
        {"sample": "x"},
        {"shadow_every": 0},
    )
    for bad in bad_knobs:
        with pytest.raises(ValueError):
            CalibrationConfig(**bad)


def test_shadow_schedule_counts_rl_steps():
    """Shadow RL steps: every `shadow_every`-th, and the calibrating ones whose updates
    calibrate themselves; a pooled calibration measures its own sample."""
    steps = range(1, 10)
    every3 = CalibrationConfig(shadow_every=3)
    assert not every3.enabled and every3.traces_shadow
    assert [s for s in steps if every3.measures_shadow(s)] == [1, 4, 7]
    calib = CalibrationConfig(enabled=True, period=2, shadow_every=3)
    assert [s for s in steps if calib.measures_shadow(s)] == [1, 3, 4, 5, 7, 9]
    pooled = CalibrationConfig(enabled=True, period=2, sample="batch")
    assert pooled.pooled and not any(pooled.measures_shadow(s) for s in steps)
    assert not CalibrationConfig().traces_shadow
