"""Every phase of configs/study.py expands to arms whose keys exist in its base config."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from shipped_model import shipped_gguf

from calclip_jax import sweeps
from calclip_jax.config import build_run_spec
from calclip_jax.rl.calibration import UPPER_RULES
from configs import study
from configs.arms import apply_overrides
from experiments import sweep


def _base_config(base: str):
    path = Path(sweeps.resolve_base(base, sweep.REPO_ROOT))
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.get_config()


@pytest.mark.parametrize("phase", sorted(study.PHASES))
def test_phase_arms_apply_to_their_base_config(phase):
    c = study.get_config(phase)
    arms = sweeps.expand_arms(c)
    assert arms
    for name, overrides in arms.items():
        config = apply_overrides(_base_config(c.base), overrides)  # KeyError on a missing key
        assert config.correction.mode == "token_tis", name
        if config.calibration.enabled:
            assert config.calibration.upper_rule in UPPER_RULES, name
    if phase in study.STRESS_SETTING:
        assert all(o["train.ppo_epochs"] * o["train.num_minibatches"] == 16 for o in arms.values())
        assert all(o["calibration.ema_beta"] == 0.0 for o in arms.values())
    if phase in study.COUNTDOWN_PHASES:
        assert _base_config(c.base).task.name == "countdown"
    if phase.startswith("stress_dapo"):
        assert all(o["rl.preset"] == "dapo" for o in arms.values())


@pytest.mark.parametrize("phase", sorted(study.PHASES))
def test_phases_pin_the_forward_program_their_committed_runs_used(phase):
    """The phases run before the one forward program was the default pin it off (their commands
    reproduce); the powered study ran with it, pinned on."""
    arms = sweeps.expand_arms(study.get_config(phase))
    want = phase == "smollm2_powered"
    assert all(o["train.same_forward"] is want for o in arms.values()), phase


def test_headline_seed_phases_cover_seeds_one_to_four():
    for phase, prefix in (("seeds", ""), ("dapo_seeds", "dapo_")):
        arms = sweeps.expand_arms(study.get_config(phase))
        assert {o["seed"] for o in arms.values()} == {1, 2, 3, 4}
        assert f"{prefix}fp8_block_tis_calib__seed4" in arms


def test_unknown_phase_is_rejected():
    with pytest.raises(ValueError, match="study phase"):
        study.get_config("everything")


def test_ladder_lowers_the_forward_format_only():
    arms = sweeps.expand_arms(study.get_config("ladder"))
    assert sorted(arms) == sorted(
        f"{t}_mx_tis{c}{e}"
        for t, e in (("fp8", ""), ("fp8", "_e5m2"), ("fp4", ""))
        for c in ("", "_calib")
    )
    assert arms["fp4_mx_tis_calib"]["train.fwd_format"] == "e2m1"
    assert arms["fp8_mx_tis"]["train.fwd_format"] == ""
    assert {o["train.precision"] for o in arms.values()} == {"fp8_mx"}


def test_powered_real_model_arms_validate_and_pair_on_seeds():
    shipped_gguf()
    c = study.get_config("smollm2_powered")
    arms = sweeps.expand_arms(c)
    names = {n.split("__seed")[0] for n in arms}
    assert len(names) == 9 and len(arms) == 9 * len(study.POWERED_SEEDS) >= 27
    for name, overrides in arms.items():
        if not name.endswith(f"__seed{study.POWERED_SEEDS[0]}"):
            continue
        spec = build_run_spec(apply_overrides(_base_config(c.base), overrides))  # validates
        assert spec.config.train.same_forward and spec.config.calibration.shadow_every == 1, name
        assert spec.config.train.steps >= 40, name
    lower_only = arms[f"fp8_tensor_tis_calib_lower__seed{study.POWERED_SEEDS[0]}"]
    assert lower_only["calibration.upper_rule"] == "fixed"
    no_floor = arms[f"fp8_tensor_tis_calib_nofloor__seed{study.POWERED_SEEDS[0]}"]
    assert no_floor["calibration.lower_min"] == 0.0
    assert "calibration.lower_min" not in lower_only  # the default floor elsewhere
