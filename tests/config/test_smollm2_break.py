"""The regime built to break (configs/smollm2_break.py) and its study sweep
(configs/smollm2_break_study.py): what docs/break_regime.md asks of it, every arm valid, and room
for the demonstrations under the SmolLM2 tokenizer."""

from __future__ import annotations

import pytest
from absl import flags
from ml_collections import config_flags
from shipped_model import shipped_gguf

from calclip_jax import sweeps
from calclip_jax.config import ConfigError, build_run_spec, parse
from calclip_jax.data import get_task
from configs import smollm2, smollm2_break, smollm2_break_study
from configs.arms import ARMS, apply_overrides


def _cli_config(argv: list[str]):
    """What `python -m experiments.train <argv>` parses (a fresh flag namespace)."""
    argv = ["train", *argv]
    values = flags.FlagValues()
    holder = config_flags.DEFINE_config_file("config", None, "", flag_values=values, sys_argv=argv)
    values(argv)
    return holder.value


def test_the_regime_is_what_the_issue_asks():
    run, base = parse(smollm2_break.get_config()), parse(smollm2.get_config())
    assert run.task.name == "worked_addition" and run.model == base.model
    assert run.train.ppo_epochs * run.train.num_minibatches == 16  # updates per rollout batch
    assert run.rollout.batch_size % run.train.num_minibatches == 0
    # whole prompt groups per minibatch (train.share_prompt): one group each
    assert run.rollout.prompts_per_step == run.train.num_minibatches
    assert run.train.learning_rate == pytest.approx(10 * base.train.learning_rate)
    assert run.rl.preset == "grpo" and run.rl.kl_beta == 0.0
    assert run.train.steps == 100 and run.train.same_forward and run.train.share_prompt


def test_every_arm_builds_the_same_spec_as_the_cli():
    shipped_gguf()
    for arm in ("", *ARMS):
        direct = build_run_spec(smollm2_break.get_config(arm))
        suffix = f":{arm}" if arm else ""
        cli = build_run_spec(_cli_config([f"--config=configs/smollm2_break.py{suffix}"]))
        assert cli.config == direct.config, arm
        assert direct.update.rl.kl_beta == 0.0, arm
        assert direct.config.train.same_forward, arm


def test_the_demonstrations_fit_the_response_cap():
    """Under the SmolLM2 tokenizer every demonstration is at least 32 tokens and it and its EOS
    fit rollout.max_new_tokens."""
    shipped_gguf()
    spec = build_run_spec(smollm2_break.get_config())
    task = get_task(spec.config.task.name, **spec.config.task.knobs)
    lengths = [
        len(spec.tokenizer.encode(ex.answer)) for split in ("train", "test")
        for ex in task.examples(split)
    ]  # fmt: skip
    assert min(lengths) >= 32
    assert max(lengths) + 1 <= spec.config.rollout.max_new_tokens


@pytest.mark.parametrize("phase", sorted(smollm2_break_study.PHASES))
def test_the_study_arms_are_valid_runs_of_the_regime(phase):
    arms = sweeps.expand_arms(smollm2_break_study.get_config(phase))
    seeds = smollm2_break_study.PHASES[phase]
    assert sorted(arms) == sorted(
        f"{name}__seed{s}" for name in smollm2_break_study.STUDY_ARMS for s in seeds
    )
    for name, overrides in arms.items():
        run = parse(apply_overrides(smollm2_break.get_config(), overrides))  # validates
        assert run.train.same_forward and run.train.num_minibatches == 16, name
        calib = name.startswith("fp8_tensor_tis_calib")
        assert run.calibration.enabled == calib, name
        if calib:
            assert run.calibration.period == (20 if "_k20" in name else 1), name
        if name.startswith("fp8"):
            assert run.train.precision == run.rollout.precision == "fp8_tensor", name
            assert run.correction.mode == "token_tis", name
        else:
            assert run.train.precision == run.rollout.precision == "bf16", name


def test_an_unknown_study_phase_is_named():
    with pytest.raises(ConfigError, match="unknown phase 'seed3'"):
        smollm2_break_study.get_config("seed3")
