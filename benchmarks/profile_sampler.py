"""Where the sampler's time goes on the Tunix benchmark's workload: call time and XLA op kinds.

Run: ``python -m benchmarks.profile_sampler`` (about 1 minute). Times `--calls` sampler calls of
`bench_grpo_step`'s sampler section (its model, prompts and `draw`: `--sampler_batch` prompts x
`--gen_len` new tokens, `--precision`), then records a `jax.profiler` trace of `--traced` more
calls and prints each op kind's time per call and share of all op time (XLA-CPU thunk names,
numeric suffixes dropped: `ynn_fusion` are the GEMM fusions, `transpose_copy_fusion` the
layout copies). `--by_source` splits each kind by the model code that emitted it (the op's
`op_name` in the compiled HLO, layer indices dropped: `Transformer/L/attn/...`), tracing calls
of the sampler under one outer `jax.jit`, whose compiled HLO names the traced ops.
"""

from __future__ import annotations

import statistics

import jax
import numpy as np
from absl import app, flags

from benchmarks import bench_grpo_step as bench
from benchmarks import profile_trace
from benchmarks.profile_trace import OpTimes, op_kind, op_sources, traced_op_kinds
from benchmarks.timing import timed
from calclip_jax.fp8 import PrecisionRecipe
from calclip_jax.train import init_variables

_CALLS = flags.DEFINE_integer("calls", 15, "Timed sampler calls.")
_TRACED = flags.DEFINE_integer("traced", 5, "Sampler calls in the profiler trace.")
_TOP = flags.DEFINE_integer("top", 12, "Op kinds printed.")
_BY_SOURCE = flags.DEFINE_bool("by_source", False, "Split op kinds by the code that emitted them.")


def print_op_kinds(kinds: OpTimes, unit: str, count_unit: str, per_count: int = 1) -> None:
    """`profile_trace.print_op_kinds` of the `--top` kinds."""
    profile_trace.print_op_kinds(kinds, unit, count_unit, per_count, _TOP.value)


def main(argv: list[str]) -> None:
    del argv
    model, recipe = bench.QWEN3_TINY, PrecisionRecipe.preset(bench._PRECISION.value)
    params, _ = init_variables(model, recipe, jax.random.key(bench._SEED.value))
    rng = np.random.default_rng(bench._SEED.value + 2)
    prompts = bench.make_prompts(
        bench._SAMPLER_BATCH.value, bench._PROMPT_LEN.value, model.vocab_size, rng
    )

    def call(seed: int) -> None:
        out = bench.draw(params, model, recipe, prompts, jax.random.key(seed), 1)
        np.asarray(out.response_mask)  # on the host, as the benchmark's call

    call(0)  # compile
    times = [timed(call, i + 1, wait=False)[1] for i in range(_CALLS.value)]
    median = statistics.median(times)
    tokens = bench._SAMPLER_BATCH.value * bench._GEN_LEN.value
    print(f"sampler call: median {median * 1e3:.1f} ms over {len(times)} calls "
          f"({tokens / median:.0f} tokens/s)")  # fmt: skip

    steps = bench._GEN_LEN.value  # decode steps per call (the prefill's ops count in with them)
    if not _BY_SOURCE.value:
        kinds = traced_op_kinds(lambda i: call(1000 + i), _TRACED.value)
        print_op_kinds(kinds, "call", "decode step", steps)
        return
    whole = jax.jit(lambda p, key: bench.draw(p, model, recipe, prompts, key, 1).response_mask)
    compiled = whole.lower(params, jax.random.key(0)).compile()  # traced: its ops are named here
    sources = op_sources(compiled.as_text())
    run = lambda i: np.asarray(compiled(params, jax.random.key(1000 + i)))
    run(-1)  # a first execution, untraced
    by_source = lambda name: f"{op_kind(name)}  {sources.get(name, '?')}"
    print_op_kinds(traced_op_kinds(run, _TRACED.value, by_source), "call", "decode step", steps)


if __name__ == "__main__":
    app.run(main)
