"""Cost of Calibrated Clipping in the update step, as ratios to the step without calibration.

Run: ``python -m benchmarks.bench_calibration [--preset=small --batch=16 --steps=20]``.
Measures, in one run and interleaved round by round (this machine is shared and noisy), the
median update time with calibration off, at every update (K=1: every RL step calibrates, and
each of its updates after the first does) and at one update in 20 (K=20 with one update per
RL step after the first, the rarest schedule). The paper pays two extra BF16 forwards per
calibration; here one shadow forward runs in the step (the old policy's shadow log-probs are
computed per minibatch in a calibrating RL step, outside the step, and not timed here).
"""

from __future__ import annotations

import statistics

import jax
import numpy as np
from absl import app, flags

from benchmarks.timing import timed
from calclip_jax.config import TrainConfig
from calclip_jax.fp8 import PrecisionRecipe
from calclip_jax.model import ModelConfig
from calclip_jax.parallel.mesh import make_mesh
from calclip_jax.rl.presets import get_preset
from calclip_jax.train import CalibrationConfig, UpdateConfig, init_variables, update_flags
from calclip_jax.train.trainer import build_trainer

_PRESET = flags.DEFINE_string("preset", "small", "Model preset.")
_PRECISION = flags.DEFINE_string("precision", "fp8_block", "Trainer precision preset.")
_BATCH = flags.DEFINE_integer("batch", 16, "Sequences per minibatch.")
_SEQ = flags.DEFINE_integer("seq", 64, "Sequence length.")
_ROUNDS = flags.DEFINE_integer("rounds", 5, "Interleaved measurement rounds.")
_STEPS = flags.DEFINE_integer("steps", 20, "Steps per round and arm (one full calibration period).")


def synthetic_batch(cfg: ModelConfig, batch: int, seq: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    tokens = rng.integers(0, cfg.vocab_size, size=(batch, seq)).astype(np.int32)
    ones = np.ones((batch, seq), np.int32)
    resp = ones.copy()
    resp[:, : seq // 4] = 0
    return {
        "tokens": tokens,
        "attn_mask": ones,
        "response_mask": resp,
        "positions": np.broadcast_to(np.arange(seq, dtype=np.int32), (batch, seq)).copy(),
        "advantages": np.where(np.arange(batch) % 2, 1.0, -1.0).astype(np.float32),
        "rollout_logp": (-2.0 * resp).astype(np.float32),
    }


def round_of_updates(run: list, name: str) -> dict:
    """`--steps` updates of one arm (run = [state, step, batch, times]) dispatched back to back,
    as a training loop runs them; the calibration is due at every update (K=1) or at the first
    of 20. Returns the last update's metrics (waiting on them waits on the round)."""
    state, step, batch, _ = run
    for i in range(_STEPS.value):
        due = name == "K=1" or (name == "K=20" and i % 20 == 0)
        state, m = step(state, batch, update_flags(False, due))
    run[0] = state
    return m


def main(argv: list[str]) -> None:
    del argv
    model_cfg = ModelConfig.preset(_PRESET.value)
    rl = get_preset("dapo")
    arms = {
        "off": CalibrationConfig(enabled=False),
        "K=1": CalibrationConfig(enabled=True, period=1),
        "K=20": CalibrationConfig(enabled=True, period=20),
    }
    rollout = synthetic_batch(model_cfg, _BATCH.value, _SEQ.value)
    mesh = make_mesh(1, 1, 1, jax.devices()[:1])  # the default device, as a plain jit's
    runners = {}
    for name, calib in arms.items():
        cfg = UpdateConfig(
            recipe=PrecisionRecipe.preset(_PRECISION.value),
            rl=rl,
            calibration=calib,
            temperature=1.0,
            logprob_chunk=None,
            shared_prompt=None,
            micro_batches=1,
            same_forward=False,
            delayed_scales="batch",
        )
        params, _ = init_variables(model_cfg, cfg.recipe, jax.random.key(0))
        train = TrainConfig(learning_rate=1e-5)
        trainer = build_trainer(model_cfg, cfg, train, params, mesh, num_minibatches=1)
        state, step, updater = trainer.state, trainer.update_step, trainer.updater
        batch = updater.prepare(state, rollout, [np.arange(_BATCH.value)], calib.enabled)[0]
        state, m = step(state, batch, update_flags(True, False))  # compile; leaves theta_old
        state, m = step(state, batch, update_flags(False, calib.enabled))  # compile
        jax.block_until_ready(m)
        runners[name] = [state, step, batch, []]
    for _ in range(_ROUNDS.value):
        for name, run in runners.items():
            _, t = timed(round_of_updates, run, name)
            run[3].append(t / _STEPS.value)
    base = statistics.median(runners["off"][3])
    print(
        f"model {_PRESET.value}, {_PRECISION.value}, batch {_BATCH.value}x{_SEQ.value}, "
        f"{_ROUNDS.value} rounds x {_STEPS.value} steps, {jax.devices()[0].platform}"
    )
    print(f"{'calibration':<12} {'step ms':>9} {'ratio to off':>13}")
    for name, run in runners.items():
        t = statistics.median(run[3])
        print(f"{name:<12} {1e3 * t:>9.2f} {t / base:>13.3f}")


if __name__ == "__main__":
    app.run(main)
