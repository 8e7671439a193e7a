"""A small synthetic rollout batch for train-step tests (no sampler, no task)."""

from __future__ import annotations

import dataclasses

import jax
import numpy as np
import optax

from calclip_jax.config import TrainConfig
from calclip_jax.fp8 import PrecisionRecipe
from calclip_jax.model import ModelConfig
from calclip_jax.model.shared_prompt import PromptGroups
from calclip_jax.rl.presets import get_preset
from calclip_jax.train import (
    CalibrationConfig,
    PPOUpdater,
    UpdateConfig,
    create_train_state,
    init_variables,
    make_optimizer,
    make_update_step,
)
from calclip_jax.train.ppo_update import minibatch_keys

TINY = ModelConfig(
    vocab_size=32,
    d_model=32,
    n_layers=1,
    n_heads=2,
    n_kv_heads=1,
    head_dim=16,
    d_ff=64,
)


def rollout_batch(
    batch: int = 8,
    prompt: int = 4,
    response: int = 8,
    seed: int = 0,
    vocab: int = 32,
    group: int = 1,
) -> dict[str, np.ndarray]:
    """Left-padded prompts + responses with ragged lengths, +-1 advantages, noisy rollout logp.
    With `group` > 1, rows i*group .. i*group+group-1 share prompt i (its tokens and padding:
    i % prompt pad columns), as the sampler lays out a group."""
    rng = np.random.default_rng(seed)
    t = prompt + response
    tokens = rng.integers(3, vocab, size=(batch, t)).astype(np.int32)
    attn = np.ones((batch, t), np.int32)
    attn[::2, 0] = 0  # left padding on every other row
    if group > 1:
        pad_R = np.repeat(np.arange(batch // group) % prompt, group)
        attn[:, :prompt] = np.arange(prompt)[None] >= pad_R[:, None]
        tokens[:, :prompt] = np.repeat(tokens[::group, :prompt], group, axis=0)
    tokens[attn == 0] = 0
    resp = np.zeros((batch, t), np.int32)
    lengths = rng.integers(2, response + 1, size=batch)
    for i, n in enumerate(lengths):
        resp[i, prompt : prompt + n] = 1
        attn[i, prompt + n :] = 0
        tokens[i, prompt + n :] = 0
    positions = np.maximum(np.cumsum(attn, axis=1) - 1, 0).astype(np.int32)
    adv = np.where(np.arange(batch) % 2 == 0, 1.0, -1.0).astype(np.float32)
    rollout_logp = (-1.5 + 0.1 * rng.standard_normal((batch, t))).astype(np.float32) * resp
    return {
        "tokens": tokens,
        "positions": positions,
        "attn_mask": attn,
        "response_mask": resp,
        "advantages": adv,
        "rollout_logp": rollout_logp,
    }


def make_setup(
    recipe: str = "bf16", seed: int = 0, lr: float = 1e-2, model: ModelConfig = TINY, **step_kwargs
):
    """(update_cfg, tx, state) for the tiny model (or ``model``)."""
    fields = {
        "rl": get_preset("grpo"),
        "calibration": CalibrationConfig(),
        "temperature": 1.0,
        "logprob_chunk": None,
        "shared_prompt": None,
        "micro_batches": 1,
        "same_forward": False,
        "delayed_scales": "batch",
    }
    update_cfg = UpdateConfig(recipe=PrecisionRecipe.preset(recipe), **{**fields, **step_kwargs})
    import jax

    params, meta = init_variables(model, update_cfg.recipe, jax.random.key(seed))
    tx = make_optimizer(TrainConfig(learning_rate=lr))
    state = create_train_state(params, meta, tx, update_cfg.rl.clip_bounds)
    return update_cfg, tx, state


def prepared(
    update_cfg,
    state,
    seed: int = 0,
    batch: int = 8,
    calibrate: bool = True,
    model: ModelConfig = TINY,
) -> dict:
    """The whole synthetic batch as one minibatch, with old log-probs at `state` (theta_old)."""
    updater = PPOUpdater(model, update_cfg, None, num_minibatches=1, ref_params=state.params)
    rollout = rollout_batch(batch=batch, seed=seed)
    return updater.prepare(state, rollout, [np.arange(batch)], calibrate)[0]


def one_rl_step_sgd(
    preset: str, micro: int, lr: float, shared: bool = False, calibrate=True, same_forward=False
):
    """One RL step (2 minibatches of 8 rows, KL on, calibrating at every update after the
    first) with SGD: (params before, params after, metrics per update)."""
    groups = PromptGroups(2, 8) if shared else None
    calib = CalibrationConfig(enabled=calibrate, period=1, ema_beta=0.0)
    cfg, _, state = make_setup(
        preset,
        calibration=calib,
        shared_prompt=groups,
        micro_batches=micro,
        same_forward=same_forward,
    )
    cfg = dataclasses.replace(cfg, rl=dataclasses.replace(cfg.rl, kl_beta=0.05))
    tx = optax.sgd(lr)  # the update is the gradient itself (no Adam sign of a rounding)
    state = create_train_state(state.params, state.fp8_meta, tx, cfg.rl.clip_bounds)
    step = jax.jit(make_update_step(TINY, cfg, tx))
    ref = jax.tree.map(lambda p: p * 0.9, state.params)  # a KL reference away from the policy
    updater = PPOUpdater(TINY, cfg, step, epochs=1, num_minibatches=2, ref_params=ref)
    assert set(minibatch_keys(cfg)) >= {"old_logp", "ref_logp"}
    batch = rollout_batch(batch=16, seed=5, group=2 if shared else 1)
    before = jax.tree.map(np.asarray, state.params)
    after, metrics, _ = updater.update(state, batch, np.random.default_rng(1), rl_step=1)
    return before, jax.tree.map(np.asarray, after.params), metrics
