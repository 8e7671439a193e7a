"""Where the policy update's time goes on the Tunix benchmark's workload: call time and op kinds.

Run: ``python -m benchmarks.profile_update`` (about 1 minute). Builds `bench_grpo_step`'s train
state and updater (its model, optimizer, KL and `--precision`), draws one rollout batch, times
`--calls` updates of it (`PPOUpdater.update_step`, waited on; the log-prob forwards of
`prepare` apart), then records a `jax.profiler` trace of `--traced` more updates and prints each
XLA op kind's time per update (prepare's forwards included) as `profile_sampler` does
(`copy_bitcast_fusion` / `transpose_copy_fusion` are layout copies, `ynn_fusion` and `dot` the
GEMMs).
"""

from __future__ import annotations

import statistics
from typing import Any

import jax
import numpy as np
from absl import app

from benchmarks import bench_grpo_step as bench
from benchmarks import profile_sampler as profile
from benchmarks.timing import timed
from calclip_jax.fp8 import PrecisionRecipe

# --calls (timed updates, after 3 for compilation), --traced, --top: profile_sampler's flags
_CALLS, _TRACED = profile._CALLS, profile._TRACED


def main(argv: list[str]) -> None:
    del argv
    model, recipe = bench.QWEN3_TINY, PrecisionRecipe.preset(bench._PRECISION.value)
    state, updater = bench.build(model, recipe)
    prompts = bench.step_prompts(model, np.random.default_rng(bench._SEED.value + 1))
    batch = bench.rollout(state.params, model, recipe, prompts, jax.random.key(bench._SEED.value))
    batch.pop("reward")
    times: list[float] = []
    step = updater.update_step

    def timed_step(*args: Any) -> Any:
        out, t = timed(step, *args)
        times.append(t)
        return out

    updater.update_step = timed_step

    def update(i: int) -> None:
        nonlocal state
        state, _, _ = updater.update(state, dict(batch), np.random.default_rng([0, i]), i + 1)

    for i in range(3 + _CALLS.value):
        update(i)
    median = statistics.median(times[3:])
    print(f"update: median {median * 1e3:.1f} ms over {_CALLS.value} calls (min "
          f"{min(times[3:]) * 1e3:.1f} ms)")  # fmt: skip

    kinds = profile.traced_op_kinds(lambda i: update(1000 + i), _TRACED.value)
    profile.print_op_kinds(kinds, "update", "update")


if __name__ == "__main__":
    app.run(main)
