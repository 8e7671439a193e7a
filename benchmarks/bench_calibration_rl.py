"""Cost of Calibrated Clipping per RL step, on the Tunix benchmark's workload with an FP8 trainer.

Run: ``python -m benchmarks.bench_calibration_rl [--precision=fp8_tensor --minibatches=4]``
(about 5 minutes). Three runs of the same RL step (`bench_grpo_step`: rollout, the updater's
log-prob forwards, its minibatch updates) share one process and are interleaved round by round
(this machine is shared and noisy): calibration off, on at every RL step (K = 1) and on every
20th (K = 20, the paper's period). A round is one period of 20 RL steps per run; the period
counts RL steps, so with K = 20 the first RL step of a round calibrates and 19 do not. A
calibrating RL step pays the old policy's BF16 shadow forward per minibatch and one shadow
forward in each of its updates after the first. Prints one JSON line: mean RL step time per
run (median over rounds) and the ratios to calibration off.
"""

from __future__ import annotations

import json
import statistics

import jax
import numpy as np
from absl import app, flags

from benchmarks import bench_grpo_step as grpo
from benchmarks.timing import timed
from calclip_jax.fp8 import PrecisionRecipe
from calclip_jax.rl.calibration import CalibrationConfig

_ROUNDS = flags.DEFINE_integer("rounds", 3, "Interleaved measurement rounds.")
PERIOD_STEPS = 20  # RL steps per round: one period of K = 20
RUNS = {"off": None, "k1": 1, "k20": 20}  # calibration period per run (None: off)


def main(argv: list[str]) -> None:
    del argv
    if flags.FLAGS.minibatches < 2:
        raise app.UsageError("--minibatches must be >= 2: only updates after the first calibrate")
    model, recipe = grpo.QWEN3_TINY, PrecisionRecipe.preset(flags.FLAGS.precision)
    setups = {}
    for name, period in RUNS.items():
        calib = CalibrationConfig(enabled=period is not None, period=period or 1)
        setups[name] = list(grpo.build(model, recipe, calib))
    prompts_rng = np.random.default_rng(0)

    def run_rl_step(name: str, step: int) -> None:
        state, updater = setups[name]
        prompts = grpo.step_prompts(model, prompts_rng)
        key = jax.random.fold_in(jax.random.key(0), step)
        batch = grpo.rollout(state.params, model, recipe, prompts, key)
        batch.pop("reward")
        state, metrics, _ = updater.update(state, batch, np.random.default_rng(step), step)
        setups[name][0] = state
        if step == 1 and updater.calibrates(1):
            assert any(m["calibrated"] for m in metrics), "a calibrating RL step took no sample"

    def rl_step(name: str, step: int) -> float:
        """Wall seconds of one RL step (its metrics come to the host: nothing left to wait on)."""
        return timed(run_rl_step, name, step, wait=False)[1]

    for name in RUNS:  # compile every program of each run (a calibrating and a plain RL step)
        for step in (1, 2):
            rl_step(name, step)
    grpo.log(f"compiled; {_ROUNDS.value} rounds x {PERIOD_STEPS} RL steps x {len(RUNS)} runs")
    means: dict[str, list[float]] = {name: [] for name in RUNS}
    for _ in range(_ROUNDS.value):
        for name in RUNS:
            means[name].append(
                statistics.fmean(rl_step(name, s) for s in range(1, PERIOD_STEPS + 1))
            )
    per_run = {name: statistics.median(v) for name, v in means.items()}
    print(
        json.dumps(
            {
                "precision": flags.FLAGS.precision,
                "minibatches": flags.FLAGS.minibatches,
                "rl_step_s": per_run,
                "ratio_k1": per_run["k1"] / per_run["off"],
                "ratio_k20": per_run["k20"] / per_run["off"],
                "rounds": means,
            }
        ),
        flush=True,
    )


if __name__ == "__main__":
    flags.FLAGS.set_default("precision", "fp8_tensor")
    flags.FLAGS.set_default("minibatches", 4)
    app.run(main)
