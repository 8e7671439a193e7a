"""GRPO step time on Tunix's CPU benchmark workload, through the library's RL-step path.

Run: ``python -m benchmarks.bench_grpo_step`` (about 30 s); prints progress on stderr and one
JSON line on stdout (the last line). `benchmarks/compare_tunix.py` runs it interleaved with
Tunix's own benchmark and prints the ratios.

The workload is the Tunix anchor's (its defaults): a tiny Qwen3 (vocab 128, hidden 128, 4
layers, 4 query / 2 KV heads of 32, MLP 384, q/k norm, untied lm_head; float32, 820,608
parameters, random init), 8 prompts x 8 samples of 16 prompt tokens (BOS + 15 random words) and
exactly 32 new tokens at temperature 0.9 (EOS is an id the model cannot emit), reward = share
of response tokens equal to 3, GRPO advantages, KL 0.04 (k3) to a frozen copy of the initial
policy, clip 0.2, one update per rollout batch, AdamW 1e-5 (weight decay 1e-4, no clipping).

One RL step is what `train/rl_loop.rl_step` runs: the sampler (`rollout.sample`) and the reward
on the host, then `PPOUpdater.update` (the reference and old-policy log-probs it needs, the
jitted update, metrics to the host). Phases are timed by wrapping the updater's own calls
(`prepare`: the log-prob forwards; `update_step`: the optimizer updates, waited on), and the
step time is the period between the starts of consecutive steps, as in the Tunix benchmark.
The sampler section times `sample` alone on `--sampler_batch` prompts x `--gen_len` tokens.
"""

from __future__ import annotations

import dataclasses
import json
import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import jax
import numpy as np
from absl import app, flags

from benchmarks.machine_noise import cpu_noise, cpu_sample, is_noisy, wait_for_idle
from benchmarks.timing import PhaseClock, summarize, timed
from calclip_jax.config import TrainConfig
from calclip_jax.fp8 import PrecisionRecipe
from calclip_jax.model import ModelConfig
from calclip_jax.model.shared_prompt import PromptGroups
from calclip_jax.parallel.mesh import make_mesh
from calclip_jax.rl.advantages import grpo_advantages
from calclip_jax.rl.calibration import CalibrationConfig
from calclip_jax.rl.corrections import CorrectionConfig
from calclip_jax.rl.presets import get_preset
from calclip_jax.rollout import sample
from calclip_jax.train import PPOUpdater, UpdateConfig, init_variables
from calclip_jax.train.trainer import build_trainer
from calclip_jax.workdir.run_info import cpu_description

_STEPS = flags.DEFINE_integer("steps", 20, "Measured GRPO steps (after the warm-up).")
_WARMUP = flags.DEFINE_integer("warmup", 3, "Unmeasured GRPO steps (compilation).")
_BATCH = flags.DEFINE_integer("batch", 8, "Prompts per RL step.")
_GROUP = flags.DEFINE_integer("group", 8, "Samples per prompt.")
_PROMPT_LEN = flags.DEFINE_integer("prompt_len", 16, "Prompt tokens, BOS included.")
_GEN_LEN = flags.DEFINE_integer("gen_len", 32, "New tokens per sample (no EOS stop).")
_BETA = flags.DEFINE_float("beta", 0.04, "KL coefficient; 0: no reference forward.")
_LR = flags.DEFINE_float("lr", 1e-5, "AdamW learning rate.")
_TEMPERATURE = flags.DEFINE_float("temperature", 0.9, "Sampling temperature.")
_MINIBATCHES = flags.DEFINE_integer("minibatches", 1, "Updates per rollout batch.")
_PRECISION = flags.DEFINE_string("precision", "fp32", "Rollout and trainer precision preset.")
_SAMPLER_BATCH = flags.DEFINE_integer("sampler_batch", 64, "Sequences of the sampler section.")
_SAMPLER_ITERS = flags.DEFINE_integer("sampler_iters", 10, "Timed sampler calls.")
_SHARE_PROMPT = flags.DEFINE_bool(
    "share_prompt", False, "train.share_prompt: each group's prompt run once in the trainer."
)
_SEED = flags.DEFINE_integer("seed", 0, "Seed of the parameters, prompts and samples.")
_WAIT_IDLE = flags.DEFINE_float("wait_idle", 60.0, "Seconds to wait for an idle machine.")

BOS, PAD, FIRST_WORD = 1, 0, 3  # word ids as in the Tunix benchmark's tokenizer
NO_EOS = -1  # an id the sampler can never draw: every sample is exactly gen_len tokens

QWEN3_TINY = ModelConfig.preset("qwen3_tiny")  # 820,608 parameters


def log(msg: str) -> None:
    print(f"[bench_grpo_step] {msg}", file=sys.stderr, flush=True)


def make_prompts(n: int, length: int, vocab: int, rng: np.random.Generator) -> np.ndarray:
    """[n, length] int32: BOS then random word ids (no padding)."""
    words = rng.integers(FIRST_WORD, vocab, size=(n, length - 1))
    return np.concatenate([np.full((n, 1), BOS), words], axis=1).astype(np.int32)


def step_prompts(model: ModelConfig, rng: np.random.Generator) -> np.ndarray:
    """One RL step's prompts: `--batch` x `--prompt_len`."""
    return make_prompts(_BATCH.value, _PROMPT_LEN.value, model.vocab_size, rng)


def toy_reward(tokens_NT: np.ndarray, response_mask_NT: np.ndarray) -> np.ndarray:
    """Share of response tokens equal to word 3 (the Tunix benchmark's reward)."""
    hits = (tokens_NT == FIRST_WORD) & response_mask_NT.astype(bool)
    return (hits.sum(1) / np.maximum(response_mask_NT.sum(1), 1)).astype(np.float32)


def build(
    model: ModelConfig, recipe: PrecisionRecipe, calibration: CalibrationConfig | None = None
) -> tuple[Any, PPOUpdater]:
    """The sharded train state and the PPO updater, from the factory the RL loop builds them
    with (`train.trainer.build_trainer`)."""
    rl = dataclasses.replace(
        get_preset("grpo"), kl_beta=_BETA.value, correction=CorrectionConfig("none")
    )
    calibration = CalibrationConfig() if calibration is None else calibration
    groups = PromptGroups(_GROUP.value, _GEN_LEN.value) if _SHARE_PROMPT.value else None
    update_cfg = UpdateConfig(
        recipe, rl, calibration, _TEMPERATURE.value, None, groups, 1, False, "batch"
    )
    train_cfg = TrainConfig(
        precision=_PRECISION.value,
        learning_rate=_LR.value,
        weight_decay=1e-4,  # optax.adamw's default, as in the Tunix benchmark
        grad_clip_norm=None,
        num_minibatches=_MINIBATCHES.value,
    )
    params, _ = init_variables(model, recipe, jax.random.key(_SEED.value))
    trainer = build_trainer(model, update_cfg, train_cfg, params, make_mesh(1, 1, 1), epochs=1)
    return trainer.state, trainer.updater


def draw(
    params: Any,
    model: ModelConfig,
    recipe: PrecisionRecipe,
    prompts: np.ndarray,
    key: jax.Array,
    num_samples: int,
    sample_fn: Callable[..., Any] = sample,
) -> Any:
    """The library's sampler (`sample_fn`: another revision's, in `ab_sampler`) on unpadded
    prompts: exactly `--gen_len` new tokens each."""
    return sample_fn(
        params,
        model,
        recipe,
        prompts,
        np.ones_like(prompts),
        key,
        num_samples=num_samples,
        max_new_tokens=_GEN_LEN.value,
        temperature=_TEMPERATURE.value,
        eos_id=NO_EOS,
        pad_id=PAD,
    )


def rollout(params: Any, model: ModelConfig, recipe: PrecisionRecipe, prompts: np.ndarray,
            key: jax.Array) -> dict[str, np.ndarray]:  # fmt: skip
    """One rollout batch on the host: samples, rewards, GRPO advantages."""
    out = draw(params, model, recipe, prompts, key, _GROUP.value)
    keys = ("tokens", "positions", "attn_mask", "response_mask", "rollout_logp")
    batch = {k: np.asarray(getattr(out, k)) for k in keys}
    reward = toy_reward(batch["tokens"], batch["response_mask"])
    batch["advantages"] = np.asarray(grpo_advantages(reward, _GROUP.value), np.float32)
    batch["reward"] = reward
    return batch


def run_grpo(model: ModelConfig, recipe: PrecisionRecipe) -> dict[str, Any]:
    state, updater = build(model, recipe)
    initial = jax.tree.map(np.asarray, state.params)
    clock = PhaseClock(updater)
    rng = np.random.default_rng(_SEED.value + 1)
    n_steps = _WARMUP.value + _STEPS.value + 1  # a trailing step closes the last period
    starts, phases, rewards, losses = [], [], [], []
    for s in range(1, n_steps + 1):
        starts.append(time.perf_counter())
        prompts = step_prompts(model, rng)
        key = jax.random.fold_in(jax.random.key(_SEED.value), s)
        batch = rollout(state.params, model, recipe, prompts, key)
        t_rollout = time.perf_counter() - starts[-1]
        rewards.append(float(batch.pop("reward").mean()))
        plan_rng = np.random.default_rng([_SEED.value, s])
        state, per_update, _ = updater.update(state, batch, plan_rng, s)
        losses.append(per_update[0]["loss"])
        phases.append({"rollout": t_rollout, **clock.take()})
        if s == 1:
            log(f"first step (compiling): {time.perf_counter() - starts[0]:.1f} s")
    period = list(np.diff(starts))
    measured = slice(_WARMUP.value, _WARMUP.value + _STEPS.value)
    split = {
        name: summarize([p.get(name, 0.0) for p in phases[measured]])
        for name in ("rollout", "logprobs", "update")
    }
    other = [t - sum(p.values()) for t, p in zip(period[measured], phases[measured], strict=True)]
    final = jax.tree.map(np.asarray, state.params)
    n_seq = _BATCH.value * _GROUP.value
    step_med = statistics.median(period[measured])
    return {
        "first_step_s": period[0],
        "step_time_s": summarize(period[measured]),
        "rollout_s": split["rollout"],
        "logprobs_s": split["logprobs"],  # reference (+ old policy where needed) forwards
        "policy_update_s": split["update"],
        "other_s": summarize(other),
        "sequences_per_step": n_seq,
        "train_tokens_per_s": n_seq * (_PROMPT_LEN.value + _GEN_LEN.value) / step_med,
        "rollout_gen_tokens_per_s": n_seq * _GEN_LEN.value / split["rollout"]["median"],
        "loss_first_last": [losses[0], losses[-1]],
        "reward_mean_first_last": [rewards[0], rewards[-1]],
        "max_abs_param_change": max(
            float(np.max(np.abs(a - b)))
            for a, b in zip(jax.tree.leaves(initial), jax.tree.leaves(final), strict=True)
        ),
    }


def run_sampler(model: ModelConfig, recipe: PrecisionRecipe) -> dict[str, Any]:
    params, _ = init_variables(model, recipe, jax.random.key(_SEED.value))
    rng = np.random.default_rng(_SEED.value + 2)
    prompts = make_prompts(_SAMPLER_BATCH.value, _PROMPT_LEN.value, model.vocab_size, rng)

    def draw_valid(seed: int) -> int:
        out = draw(params, model, recipe, prompts, jax.random.key(seed), 1)
        return int(np.asarray(out.response_mask).sum())  # on the host, as Tunix returns it

    def call(seed: int) -> tuple[float, int]:
        valid, t = timed(draw_valid, seed, wait=False)
        return t, valid

    first, _ = call(0)
    times, valid = zip(*(call(i + 1) for i in range(_SAMPLER_ITERS.value)), strict=True)
    slots = _SAMPLER_BATCH.value * _GEN_LEN.value
    return {
        "batch": _SAMPLER_BATCH.value,
        "new_tokens_per_seq": _GEN_LEN.value,
        "first_call_s_incl_compile": first,
        "call_time_s": summarize(list(times)),
        "tokens_per_s": summarize([slots / t for t in times]),
        "tokens_per_s_at_median_time": slots / statistics.median(times),
        "valid_tokens_returned_per_call": summarize([float(v) for v in valid]),
    }


def n_params(model: ModelConfig, recipe: PrecisionRecipe) -> int:
    params, _ = init_variables(model, recipe, jax.random.key(0))
    return sum(int(np.prod(x.shape)) for x in jax.tree.leaves(params))


def main(argv: list[str]) -> None:
    del argv
    t0 = time.perf_counter()
    model, recipe = QWEN3_TINY, PrecisionRecipe.preset(_PRECISION.value)
    result: dict[str, Any] = {
        "library": "calclip_jax",
        "versions": {"jax": jax.__version__, "python": sys.version.split()[0]},
        "cpu": cpu_description(),
        "precision": _PRECISION.value,
        "share_prompt": _SHARE_PROMPT.value,
        "n_params": n_params(model, recipe),
        "wait_idle": wait_for_idle(_WAIT_IDLE.value, log) if _WAIT_IDLE.value > 0 else None,
        "cpu_noise": {},
    }
    for name, fn in (("grpo", run_grpo), ("sampler", run_sampler)):
        before = cpu_sample()
        log(f"{name} ...")
        result[name] = fn(model, recipe)
        result["cpu_noise"][name] = noise = cpu_noise(before, cpu_sample())
        if is_noisy(noise):
            log(f"WARNING: other processes used {noise['other_procs_cores']:.2f} cores during "
                f"{name}; timings are inflated")  # fmt: skip
    result["total_wall_s"] = time.perf_counter() - t0
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    app.run(main)
