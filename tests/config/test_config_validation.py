"""Every bad knob value is rejected by the config layer with its dotted key named, before SFT
or any compile: value rules (schema), cross-knob rules (run spec) and the device fit."""

from __future__ import annotations

import math

import pytest

from calclip_jax.config import ConfigError, base_config, build_run_spec, check_devices, parse
from calclip_jax.config.devices import mesh_shape
from calclip_jax.train import rl_loop

NAN, INF = math.nan, math.inf

# (dotted key, bad value): the 19 values once accepted, then the same kinds of gap
# elsewhere (NaN / inf floats, non-positive sizes, probabilities outside [0, 1])
ISSUE_VALUES = [
    ("calibration.upper_max", 0.5),  # below the upper bound's floor 1
    ("calibration.upper_max", -1.0),
    ("calibration.upper_max", NAN),
    ("rl.eps_low", NAN),
    ("rl.dual_clip_c", 0.5),
    ("rl.dual_clip_c", 1.0),
    ("train.learning_rate", INF),
    ("rollout.temperature", 0.0),
    ("rollout.temperature", -1.0),
    ("rollout.top_p", 0.0),
    ("rollout.top_p", 1.5),
    ("rollout.top_k", -1),
    ("sft.updates", -1),
    ("sft.batch_size", 0),
    ("eval.num_prompts", 0),
    ("eval.num_prompts", -3),
    ("log.surge_factor", 1.0),
    ("log.surge_factor", 0.5),
    ("train.grad_clip_norm", -1.0),
    ("train.warmup_updates", -1),
    ("log.ratios_every", -1),
    ("rollout.max_refill_rounds", -1),
    ("train.weight_decay", -0.1),
    ("sft.eval_every", 0),
    ("log.samples_every", 0),
    ("seed", -1),
]
SWEEP_VALUES = [
    ("seed", 2**32),
    ("sft.learning_rate", NAN),
    ("sft.learning_rate", 0.0),
    ("sft.target_accuracy", 1.5),
    ("sft.target_accuracy", NAN),
    ("rollout.prompts_per_step", 0),
    ("rollout.samples_per_prompt", 0),
    ("rollout.max_new_tokens", 0),
    ("rollout.temperature", NAN),
    ("rollout.temperature", INF),
    ("rollout.top_p", NAN),
    ("rollout.top_k", 0),
    ("train.learning_rate", NAN),
    ("train.learning_rate", 0.0),
    ("train.steps", 0),
    ("train.ppo_epochs", 0),
    ("train.num_minibatches", 0),
    ("train.decay_updates", 0),
    ("train.weight_decay", NAN),
    ("train.weight_decay", INF),
    ("train.b1", 1.0),
    ("train.b2", -0.1),
    ("train.b2", NAN),
    ("train.eps", 0.0),
    ("train.eps", INF),
    ("train.grad_clip_norm", 0.0),
    ("train.grad_clip_norm", NAN),
    ("train.logprob_chunk", 0),
    ("train.micro_batches", 0),
    ("train.micro_batches", 3),  # does not divide a minibatch of 64 rows
    ("train.schedule", "warmup"),
    ("train.delayed_scales", "epoch"),
    ("rollout.sampler", "greedy"),
    ("rl.eps_low", 0.0),
    ("rl.eps_low", 1.0),
    ("rl.eps_high", 0.0),
    ("rl.eps_high", INF),
    ("rl.kl_beta", -0.01),
    ("rl.kl_beta", NAN),
    ("rl.dual_clip_c", INF),
    ("rl.agg", "mean"),
    ("correction.tis_cap", 0.0),
    ("correction.tis_cap", NAN),
    ("correction.mis_low", 0.0),
    ("correction.mis_high", 0.4),  # below mis_low 0.5
    ("correction.mis_high", INF),
    ("correction.geo_delta", -0.1),
    ("correction.geo_delta", NAN),
    ("calibration.upper_max", INF),
    ("calibration.upper_max", 1.1),  # below the static upper clip 1 + eps_high = 1.2
    ("calibration.lower_min", 0.9),  # above the static lower clip 1 - eps_low = 0.8
    ("calibration.lower_min", 1.0),
    ("calibration.lower_min", NAN),
    ("calibration.sample", "tokens"),
    ("calibration.shadow_every", 0),
    ("calibration.ema_beta", 1.0),
    ("calibration.ema_beta", NAN),
    ("calibration.period", 0),
    ("calibration.shadow_precision", "bf17"),
    ("eval.every", 0),
    ("log.checkpoint_every", 0),
    ("log.num_samples", -1),
    ("log.surge_factor", NAN),
    ("log.surge_warmup", -1),
    ("log.surge_window", 0),
    ("log.trace_dumps", -1),
    ("model.d_model", 0),
    ("model.n_heads", 3),  # not a multiple of n_kv_heads 2
    ("mesh.data", 0),
    ("mesh.fsdp", 0),
    ("task.reward", ""),
    ("task.reward", "exactly"),  # not a built-in, and not module:function
    ("task.reward", "nan*exact"),
    ("task.reward", "0.5*"),
    ("task.reward", "last_number(tol=inf)"),
    ("task.reward", "format(tol=0.1)"),  # takes no parameters
    ("task.reward", "exact + exact"),  # one label twice
    ("task.reward", "no_such_module_xyz:score"),  # parses; fails to import
]


def _config(key: str, value, **others):
    c = base_config()
    c.calibration.enabled = True  # the cross-knob rule of upper_max applies to calibrated runs
    for k, v in {key: value, **others}.items():
        *parents, leaf = k.split(".")
        node = c
        for name in parents:
            node = node[name]
        node[leaf] = v
    return c


@pytest.mark.parametrize(("key", "value"), ISSUE_VALUES + SWEEP_VALUES)
def test_bad_value_is_rejected_naming_its_key(key, value):
    with pytest.raises(ConfigError) as info:
        build_run_spec(_config(key, value))
    assert str(info.value).startswith(key), str(info.value)


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("rl.dual_clip_c", 0.0),  # 0 = off (the config files' spelling), clamped to None
        ("rl.dual_clip_c", 3.0),
        ("rl.kl_beta", 0.0),
        ("rollout.top_k", None),
        ("rollout.top_p", 1.0),
        ("train.grad_clip_norm", None),
        ("train.weight_decay", 0.0),
        ("calibration.upper_max", 1.2),  # = the static upper clip bound
        ("sft.updates", 0),  # no SFT
        ("log.ratios_every", None),
        ("log.num_samples", 0),
        ("seed", 2**32 - 1),
        ("mesh.data", None),
        ("task.reward", "0.9*last_integer + 0*format + -0.1*exact"),  # 0 and negative weights
    ],
)
def test_edge_values_are_accepted(key, value):
    build_run_spec(_config(key, value, **{"correction.mode": "none"}))


def test_dual_clip_zero_means_off():
    spec = build_run_spec(_config("rl.dual_clip_c", 0.0))
    assert spec.update.rl.dual_clip_c is None


def test_trace_dumps_needs_ratio_dumps():
    """`log.trace_dumps` rescores earlier ratio dumps: refused without `log.ratios_every`."""
    with pytest.raises(ConfigError, match=r"^log\.trace_dumps=2 .*needs log\.ratios_every"):
        build_run_spec(_config("log.trace_dumps", 2, **{"log.ratios_every": None}))
    build_run_spec(_config("log.trace_dumps", 0, **{"log.ratios_every": None}))  # off
    assert build_run_spec(_config("log.trace_dumps", 2)).config.log.trace_dumps == 2


def test_nan_names_the_rule():
    with pytest.raises(ConfigError, match=r"rl\.eps_low must be finite and in \(0, 1\), got nan"):
        build_run_spec(_config("rl.eps_low", NAN))


def test_a_config_json_with_a_bad_value_is_rejected_too():
    values = base_config().to_dict()
    values["train"]["learning_rate"] = INF
    with pytest.raises(ConfigError, match=r"train\.learning_rate"):
        parse(values)


@pytest.mark.parametrize(
    ("mesh", "devices", "named"),
    [
        ({"data": 3}, 1, "mesh.data=3"),
        ({"data": 2, "fsdp": 2}, 2, "mesh.fsdp=2"),
        ({"data": None, "tensor": 3}, 4, "mesh.tensor=3"),
        ({"data": None, "fsdp": None}, 4, "at most one"),
        # 16 x 8 / 2 = 64 sequences per minibatch over 3 data devices
        ({"data": 3}, 3, "train.num_minibatches=2"),
        ({"data": None}, 6, "train.num_minibatches=2"),
    ],
)
def test_device_misfit_is_named(mesh, devices, named):
    run = parse(_config("mesh.fsdp", 1, **{f"mesh.{k}": v for k, v in mesh.items()}))
    with pytest.raises(ConfigError, match=named):
        check_devices(run, devices)


def test_micro_batches_that_do_not_split_over_the_data_devices_are_named():
    # 64 sequences per minibatch / 16 micro-batches = 4 per micro-batch over 8 data devices
    run = parse(_config("train.micro_batches", 16, **{"mesh.data": 8}))
    with pytest.raises(ConfigError, match=r"train\.micro_batches=16"):
        check_devices(run, 8)
    check_devices(parse(_config("train.micro_batches", 8, **{"mesh.data": 8})), 8)


@pytest.mark.parametrize("knob", [("micro_batches", 2), ("same_forward", True)])
def test_per_update_delayed_scales_refuse_the_split_update(knob):
    name, value = knob
    delayed = {"train.precision": "fp8_delayed", "train.delayed_scales": "update"}
    with pytest.raises(ConfigError, match=rf"train\.{name}.*delayed scaling"):
        build_run_spec(_config(f"train.{name}", value, **delayed))
    # frozen within a batch (the default), the forwards of a batch all scale alike
    delayed["train.delayed_scales"] = "batch"
    assert build_run_spec(_config(f"train.{name}", value, **delayed)).update.frozen_scales


def test_per_update_delayed_scales_are_refused_by_the_default_naming_what_to_set():
    """The one forward program is the default: per-update delayed scales are refused on one line
    that names both knobs and the two ways out; either way out builds."""
    update = {"train.precision": "fp8_delayed", "train.delayed_scales": "update"}
    with pytest.raises(ConfigError) as err:
        build_run_spec(_config("train.precision", "fp8_delayed", **update))
    message = str(err.value)
    assert "\n" not in message and message.startswith("train.same_forward=True (the default)")
    assert "train.delayed_scales='batch'" in message and "train.same_forward=false" in message
    two_programs = build_run_spec(_config("train.same_forward", False, **update)).update
    assert not two_programs.same_forward and not two_programs.frozen_scales
    frozen = build_run_spec(_config("train.precision", "fp8_delayed")).update
    assert frozen.same_forward and frozen.frozen_scales


def test_device_fit_resolves_the_mesh():
    run = parse(base_config())
    assert check_devices(run, 4) == (4, 1, 1)
    assert mesh_shape(None, 2, 1, 8) == (4, 2, 1)


# the crashes once seen after compiling (or after SFT), with the device count: now raised
# before SFT
POST_COMPILE_CRASHES = [
    ({"mesh.data": 3}, 2),
    ({"mesh.tensor": 4}, 2),
    # 3 sequences per minibatch over 2 data devices
    (
        {
            "train.num_minibatches": 1,
            "rollout.prompts_per_step": 3,
            "rollout.samples_per_prompt": 1,
        },
        2,
    ),
    ({"sft.eval_every": 0}, 1),
    ({"log.samples_every": 0}, 1),
    ({"eval.num_prompts": 0}, 1),
    ({"seed": -1}, 1),
]


@pytest.mark.parametrize(("overrides", "devices"), POST_COMPILE_CRASHES)
def test_run_experiment_rejects_before_sft(overrides, devices, monkeypatch, tmp_path):
    def no_sft(*args, **kwargs):
        raise AssertionError("SFT (or data loading) started")

    monkeypatch.setattr(rl_loop.jax, "device_count", lambda: devices)
    monkeypatch.setattr(rl_loop, "warm_start", no_sft)
    monkeypatch.setattr(rl_loop, "load_split", no_sft)
    config = _config("seed", 0, **overrides)
    with pytest.raises(ConfigError) as info:
        rl_loop.run_experiment(config, str(tmp_path / "run"), log=lambda _: None)
    assert any(k in str(info.value) for k in overrides), info.value
    assert not (tmp_path / "run").exists()  # nothing written either
