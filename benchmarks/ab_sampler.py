"""The sampler of this checkout against the sampler of a git revision, in one process, interleaved.

Run: ``python -m benchmarks.ab_sampler --rev=c8041e1`` (about 1 minute). On this shared 2-core
machine two benchmark processes run minutes apart can differ by 2x; calls alternating within one
process see the same machine state, so the median of the per-pair time ratios is the figure to
trust for a change. The revision's `calclip_jax` is extracted with `git archive` into a temporary
folder and imported as its own package (`calclip_jax_at_rev`, its imports rewritten to it), so
each side compiles its own code. Workload: `bench_grpo_step`'s sampler section (its tiny Qwen3,
`--sampler_batch` unpadded prompts x `--gen_len` new tokens, no EOS stop, `--precision`), the
same parameters and keys on both sides. Prints whether both drew the same tokens and log-probs,
then one JSON line: median call times and the median ratio, this checkout / the revision. A null
control, ``--rev=HEAD`` on a clean checkout (the same code on both sides), gave 0.95x and 0.99x on
the AMD EPYC host: the method does not resolve differences under about 5%.
"""

from __future__ import annotations

import importlib
import json
import statistics
import sys
import tempfile
from pathlib import Path
from types import ModuleType
from typing import Any

import jax
import numpy as np
from absl import app, flags

from benchmarks import bench_grpo_step as bench
from benchmarks.revision import REV_PACKAGE, import_revision
from benchmarks.timing import timed
from calclip_jax.fp8 import PrecisionRecipe
from calclip_jax.rollout import sampler
from calclip_jax.train import init_variables
from calclip_jax.workdir.run_info import cpu_description

_REV = flags.DEFINE_string("rev", None, "Git revision to compare against (e.g. HEAD).")
_PAIRS = flags.DEFINE_integer("pairs", 30, "Interleaved (checkout, revision) call pairs.")


def draw(module: ModuleType, params: Any, recipe: Any, prompts: np.ndarray, seed: int) -> Any:
    """One sampler call of `module` (`bench_grpo_step.draw`), (tokens, log-probs) on the host."""
    out = bench.draw(params, bench.QWEN3_TINY, recipe, prompts, jax.random.key(seed), 1,
                     sample_fn=module.sample)  # fmt: skip
    return jax.tree.map(np.asarray, (out.tokens, out.rollout_logp))


def main(argv: list[str]) -> None:
    del argv
    if not _REV.value:
        sys.exit("--rev is required (the git revision to compare against)")
    with tempfile.TemporaryDirectory() as tmp:
        old = import_revision(_REV.value, Path(tmp))
        rev_recipes = importlib.import_module(f"{REV_PACKAGE}.fp8")
        recipes = {
            sampler: PrecisionRecipe.preset(bench._PRECISION.value),
            old: rev_recipes.PrecisionRecipe.preset(bench._PRECISION.value),
        }
        params, _ = init_variables(bench.QWEN3_TINY, recipes[sampler], jax.random.key(0))
        prompts = bench.make_prompts(
            bench._SAMPLER_BATCH.value,
            bench._PROMPT_LEN.value,
            bench.QWEN3_TINY.vocab_size,
            np.random.default_rng(bench._SEED.value + 2),
        )
        first = {m: draw(m, params, r, prompts, 0) for m, r in recipes.items()}  # compiles
        same = all(np.array_equal(a, b) for a, b in zip(first[sampler], first[old], strict=True))
        print(f"same tokens and log-probs: {same}", flush=True)
        times: dict[ModuleType, list[float]] = {sampler: [], old: []}
        for i in range(_PAIRS.value):
            for m in (sampler, old) if i % 2 == 0 else (old, sampler):
                _, t = timed(draw, m, params, recipes[m], prompts, i + 1, wait=False)
                times[m].append(t)
    ratios = [a / b for a, b in zip(times[sampler], times[old], strict=True)]
    result = {
        "rev": _REV.value,
        "precision": bench._PRECISION.value,
        "cpu": cpu_description(),
        "same_tokens_and_logp": same,
        "checkout_call_s": statistics.median(times[sampler]),
        "rev_call_s": statistics.median(times[old]),
        "median_ratio_checkout_over_rev": statistics.median(ratios),
        "pairs": _PAIRS.value,
    }
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    app.run(main)
