"""The real model's phases, this checkout against a git revision, in one process, interleaved.

Run: ``python -m benchmarks.ab_smollm2 --rev=HEAD --part=sampler`` (needs the shipped checkpoint,
as `bench_smollm2_step`; minutes). `ab_sampler`'s method (the revision's `calclip_jax` extracted
with `git archive` and imported as its own package, calls alternating A, B, B, A, ... within one
process, the median of the per-pair time ratios) on `bench_smollm2_step`'s workload
(SmolLM2-135M-Instruct, `configs/smollm2.py`'s defaults, `--precision`, `--set=key=value`),
one of its phases (`--part`, `smollm2_phases`: `sampler`, one rollout call, `--sampler` the
checkout's `sample(sampler=...)` while the revision takes its default; `forward`, a minibatch's
log-probs; `update`, their gradient; `step`, the whole update step, optimizer included).

Prints whether both sides give the same outputs (bitwise, else the largest difference), then one
JSON line: median call times, the median ratio checkout / revision of wall times and of the
process's CPU times (all its threads; less inflated than wall time when other processes compete
for the cores), the CPU and the load.
"""

from __future__ import annotations

import functools
import importlib
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import jax
import numpy as np
from absl import app, flags

from benchmarks import bench_smollm2_step as bench
from benchmarks import smollm2_phases as phases
from benchmarks.machine_noise import cpu_noise, cpu_sample
from benchmarks.revision import REV_PACKAGE, import_revision
from benchmarks.timing import timed
from calclip_jax.model.shared_prompt import PromptGroups
from calclip_jax.rollout import sampler as checkout_sampler
from calclip_jax.train import forward as checkout_forward
from calclip_jax.workdir.run_info import cpu_description

_REV = flags.DEFINE_string("rev", None, "Git revision to compare against (e.g. HEAD).")
_PART = flags.DEFINE_enum("part", "sampler", list(phases.PHASES), "What to time.")
_PAIRS = flags.DEFINE_integer("pairs", 5, "Interleaved (checkout, revision) call pairs.")
_SAMPLER = flags.DEFINE_string("sampler", "gumbel", "The checkout sampler's `sampler` argument.")


def log(msg: str) -> None:
    print(f"[ab_smollm2] {msg}", file=sys.stderr, flush=True)


def compare(a: Any, b: Any) -> str:
    """'bitwise equal', else the largest absolute difference of the leaves (and the largest
    relative to its leaf's largest magnitude)."""
    pairs = list(zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True))
    if all(np.array_equal(np.asarray(x), np.asarray(y)) for x, y in pairs):
        return "bitwise equal"
    diff = max(float(np.max(np.abs(np.asarray(x, np.float64) - y))) for x, y in pairs)
    rel = max(
        float(np.max(np.abs(np.asarray(x, np.float64) - y)) / max(np.max(np.abs(y)), 1e-30))
        for x, y in pairs
    )
    return f"differ: largest |difference| {diff:.3g}, relative to the leaf's largest {rel:.3g}"


def main(argv: list[str]) -> None:
    del argv
    if not _REV.value:
        sys.exit("--rev is required (the git revision to compare against)")
    w = phases.load_workload(*bench.workload_flags())
    run = w.spec.config
    with tempfile.TemporaryDirectory() as tmp:
        rev_sampler = import_revision(_REV.value, Path(tmp))
        rev_fp8 = importlib.import_module(f"{REV_PACKAGE}.fp8")
        if _PART.value == "sampler":
            recipe = rev_fp8.PrecisionRecipe.preset(run.rollout.precision)
            sides = {
                "checkout": phases.sampler_call(
                    w, checkout_sampler, w.spec.rollout_recipe, sampler=_SAMPLER.value
                ),
                "rev": phases.sampler_call(w, rev_sampler, recipe),
            }
        elif _PART.value == "step":
            batch, _ = phases.minibatch(w)
            config = bench.workload_config(*bench.workload_flags())
            sides = {
                "checkout": phases.update_step_call(w, "calclip_jax", batch, config),
                "rev": phases.update_step_call(w, REV_PACKAGE, batch, config),
            }
        else:
            batch, cot = phases.minibatch(w)
            rev_forward = importlib.import_module(f"{REV_PACKAGE}.train.forward")
            rev_groups = importlib.import_module(f"{REV_PACKAGE}.model.shared_prompt").PromptGroups
            recipe = rev_fp8.PrecisionRecipe.preset(run.train.precision)
            program = functools.partial(phases.logprob_program, w, _PART.value)
            fns = {
                "checkout": program(
                    checkout_forward, w.spec.update.recipe, PromptGroups, batch, cot
                ),
                "rev": program(rev_forward, recipe, rev_groups, batch, cot),
            }
            sides = {k: (lambda i, f=f: jax.block_until_ready(f(w.params))) for k, f in fns.items()}
        first = {k: f(0) for k, f in sides.items()}  # compiles
        same = compare(first["checkout"], first["rev"])
        log(f"outputs: {same}")
        del first
        times: dict[str, list[float]] = {"checkout": [], "rev": []}
        cpu: dict[str, list[float]] = {"checkout": [], "rev": []}
        before = cpu_sample()
        for i in range(_PAIRS.value):
            for k in ("checkout", "rev") if i % 2 == 0 else ("rev", "checkout"):
                c0 = time.process_time()
                _, t = timed(sides[k], i + 1, wait=False)
                times[k].append(t)
                cpu[k].append(time.process_time() - c0)
            log(f"pair {i + 1}: " + ", ".join(
                f"{k} {v[-1]:.2f} s (CPU {cpu[k][-1]:.2f} s)" for k, v in times.items()
            ))  # fmt: skip
    ratios = [a / b for a, b in zip(times["checkout"], times["rev"], strict=True)]
    cpu_ratios = [a / b for a, b in zip(cpu["checkout"], cpu["rev"], strict=True)]
    print(json.dumps({
        "part": _PART.value,
        "rev": _REV.value,
        "precision": run.train.precision,
        "sampler": _SAMPLER.value if _PART.value == "sampler" else None,
        "overrides": list(bench._SET.value),
        "cpu": cpu_description(),
        "outputs": same,
        "checkout_s": statistics.median(times["checkout"]),
        "rev_s": statistics.median(times["rev"]),
        "median_ratio_checkout_over_rev": statistics.median(ratios),
        "ratios": ratios,
        "median_cpu_ratio_checkout_over_rev": statistics.median(cpu_ratios),
        "cpu_ratios": cpu_ratios,
        "cpu_noise": cpu_noise(before, cpu_sample()),
    }), flush=True)  # fmt: skip


if __name__ == "__main__":
    app.run(main)
