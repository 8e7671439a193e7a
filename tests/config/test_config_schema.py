"""One schema: the ConfigDict is generated from it, every family and arm builds the same spec
from Python and from the command line, and "unset" is spelled None."""

from __future__ import annotations

import dataclasses
import importlib
import importlib.util
import json
import typing

import pytest
from absl import flags
from ml_collections import config_flags

from calclip_jax.config import (
    ConfigError,
    RunConfig,
    base_config,
    build_run_spec,
    parse,
    resolved_record,
    to_config_dict,
)
from calclip_jax.config.config_dict import RECORD_SECTIONS, _optional_type
from calclip_jax.shipped import shipped_file
from calclip_jax.workdir.config_record import CHANGES_KEY
from calclip_jax.workdir.run_record import RESOLVED
from configs.arms import ARMS
from experiments.config_help import CONFIGS_DIR, NOT_FAMILIES, family_args

FAMILIES = ("grpo", "dapo", "default", "countdown", "smollm2")
CHECKPOINT_FAMILIES = ("smollm2", "smollm2_break", "word_problems")  # the shipped GGUF's


def _train_families() -> list[str]:
    """Every train family in configs/ (a config whose get_config takes an arm)."""
    names = sorted(p.stem for p in CONFIGS_DIR.glob("*.py") if p.stem not in NOT_FAMILIES)
    return [
        n
        for n in names
        if (family_args(importlib.import_module(f"configs.{n}")) or ("",))[0] == "arm"
    ]


def _cli_config(argv: list[str]):
    """What `python -m experiments.train <argv>` parses (a fresh flag namespace)."""
    argv = ["train", *argv]
    values = flags.FlagValues()
    holder = config_flags.DEFINE_config_file("config", None, "", flag_values=values, sys_argv=argv)
    values(argv)
    return holder.value


def _real_checkpoint_or_skip() -> None:
    for module in ("gguf", "jinja2"):
        if importlib.util.find_spec(module) is None:
            pytest.skip(f"{module} not installed (the `llm` extra)")
    try:
        shipped_file("smollm2-135m-instruct")
    except FileNotFoundError as err:
        pytest.skip(str(err))


def _sections(run: RunConfig):
    for field in dataclasses.fields(run):
        value = getattr(run, field.name)
        if dataclasses.is_dataclass(value):
            yield field.name, value


def test_base_config_is_the_schema_defaults():
    assert parse(base_config()) == RunConfig()
    assert parse(to_config_dict(RunConfig())) == RunConfig()


def test_unset_is_spelled_none():
    """No default uses a sentinel (-1, "", 0 meaning "off"); optional knobs default to None."""
    for name, section in _sections(RunConfig()):
        hints = typing.get_type_hints(type(section))
        for field in dataclasses.fields(section):
            value = getattr(section, field.name)
            assert value != "" and value != -1, f"{name}.{field.name} = {value!r}"
            if value is None:
                assert _optional_type(hints[field.name]) is not None, f"{name}.{field.name}"


@pytest.mark.parametrize("family", FAMILIES)
def test_every_arm_builds_the_same_spec_as_the_cli(family):
    if family == "smollm2":
        _real_checkpoint_or_skip()
    module = importlib.import_module(f"configs.{family}")
    for arm in ("", *ARMS):
        direct = build_run_spec(module.get_config(arm) if arm else module.get_config())
        suffix = f":{arm}" if arm else ""
        cli = build_run_spec(_cli_config([f"--config=configs/{family}.py{suffix}"]))
        assert cli.config == direct.config, (family, arm)
        assert resolved_record(cli) == resolved_record(direct), (family, arm)
        assert cli.update == direct.update and cli.rollout_recipe == direct.rollout_recipe


@pytest.mark.parametrize("family", _train_families())
def test_every_family_and_arm_defaults_to_the_one_forward_program(family):
    """As a user runs it (`--config=configs/<family>.py:<arm>`, nothing else), every arm of every
    family resolves to one forward program for its old and new log-probs, delayed scaling with
    its scales frozen per rollout batch, and config.json's resolved section says so."""
    if family in CHECKPOINT_FAMILIES:
        _real_checkpoint_or_skip()
    for arm in ("", *ARMS):
        suffix = f":{arm}" if arm else ""
        spec = build_run_spec(_cli_config([f"--config=configs/{family}.py{suffix}"]))
        assert spec.update.same_forward and resolved_record(spec)["same_forward"], (family, arm)
        delayed = spec.update.recipe.any_delayed
        assert resolved_record(spec)["frozen_scales"] == delayed, (family, arm)
        assert spec.config.train.updates_per_rl_step > 1, (family, arm)  # r = 1 is at stake


def test_cli_sets_an_unset_knob_and_the_record_resolves_it():
    spec = build_run_spec(_cli_config(["--config=configs/dapo.py:bf16", "--config.rl.eps_low=0.3"]))
    assert spec.config.rl.eps_low == 0.3
    assert spec.update.rl.eps_high == 0.28  # still the DAPO preset's
    assert resolved_record(spec)["clip_bounds"] == pytest.approx([0.7, 1.28])


def test_config_json_round_trips(tmp_path):
    config = importlib.import_module("configs.countdown").get_config("fp8_tensor_tis_calib")
    spec = build_run_spec(config)
    record = {**json.loads(config.to_json()), "resolved": resolved_record(spec)}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(record))
    assert parse(json.loads(path.read_text())) == spec.config
    # an extended run's config.json also lists what its reruns changed: history, not knobs
    changes = [{"after_step": 20, "changed": {"train.steps": [20, 40]}}]
    assert parse({**record, "config_changes": changes}) == spec.config
    assert set(RECORD_SECTIONS) == {RESOLVED, CHANGES_KEY}  # the names the workdir writes


def test_unknown_keys_are_named():
    values = base_config().to_dict()
    values["train"]["stepz"] = 3
    with pytest.raises(ConfigError, match=r"train: unknown keys \['stepz'\]"):
        parse(values)
    with pytest.raises(ConfigError, match="unknown config sections"):
        parse({**base_config().to_dict(), "optim": {}})


def test_logprob_chunk_reaches_the_update_config():
    """train.logprob_chunk: None (whole sequence, today's program) by default; set, it is the
    update step's (and its old log-probs') chunk."""
    assert build_run_spec(base_config()).update.logprob_chunk is None
    spec = build_run_spec(
        _cli_config(["--config=configs/dapo.py:bf16", "--config.train.logprob_chunk=64"])
    )
    assert spec.config.train.logprob_chunk == 64 and spec.update.logprob_chunk == 64
    with pytest.raises(ConfigError, match="logprob_chunk"):
        build_run_spec(_cli_config(["--config=configs/dapo.py", "--config.train.logprob_chunk=0"]))


def test_share_prompt_reaches_the_update_config():
    """train.share_prompt: off by default (None); on, groups of rollout.samples_per_prompt rows
    with rollout.max_new_tokens response columns, recorded in the resolved section; refused
    where a minibatch would split a group and with delayed scaling."""
    assert build_run_spec(base_config()).update.shared_prompt is None
    on = ["--config=configs/dapo.py:bf16", "--config.train.share_prompt=True"]
    spec = build_run_spec(_cli_config(on))
    r = spec.config.rollout
    groups = spec.update.shared_prompt
    assert (groups.group_size, groups.response_len) == (r.samples_per_prompt, r.max_new_tokens)
    assert resolved_record(spec)["shared_prompt"] == {
        "group_size": r.samples_per_prompt,
        "response_len": r.max_new_tokens,
    }
    split = [*on, "--config.rollout.prompts_per_step=3", "--config.train.num_minibatches=2"]
    with pytest.raises(ConfigError, match="whole groups"):
        build_run_spec(_cli_config(split))
    with pytest.raises(ConfigError, match="delayed"):
        build_run_spec(_cli_config([*on, "--config.train.precision=fp8_delayed"]))
    shadow = [
        "--config.calibration.enabled=True",
        "--config.calibration.shadow_precision=fp8_delayed",
    ]
    with pytest.raises(ConfigError, match=r"calibration\.shadow_precision='fp8_delayed'"):
        build_run_spec(_cli_config([*on, *shadow]))
