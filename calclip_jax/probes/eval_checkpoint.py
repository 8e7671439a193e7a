"""Scores a run's checkpoint on a split with the run's own config (its config.json): only the
parameters (and delayed-scaling amax histories when the sampler uses the trainer's) are read
from the checkpoint, never the optimizer state."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import jax

from calclip_jax.config import RunSpec, build_run_spec, parse
from calclip_jax.data import SPLITS, load_split
from calclip_jax.rollout.generate import max_prompt_len
from calclip_jax.train.evaluate import pass_rate
from calclip_jax.train.state import fresh_fp8_meta, init_variables, on_default_device
from calclip_jax.workdir import run_record as R
from calclip_jax.workdir.checkpoints import Checkpointer
from calclip_jax.workdir.checksums import manifest_problem

T = TypeVar("T")


class EvalError(ValueError):
    """The workdir, step or split cannot be evaluated (the message says why)."""


def run_spec_of(workdir: str | Path, precision: str | None = None) -> RunSpec:
    """The run's spec from its config.json; with `precision`, its rollout (and so its
    evaluation) in that precision instead (ConfigError names a bad one)."""
    config = R.load_config(workdir)
    if config is None:
        raise EvalError(f"{R.config_path(workdir)}: missing, not a run's workdir")
    run = parse(config)
    if precision is not None:
        rollout = dataclasses.replace(run.rollout, precision=precision)
        run = dataclasses.replace(run, rollout=rollout)
    return build_run_spec(run)


def checkpoint_step(checkpointer: Checkpointer, folder: Path, step: int | None) -> int:
    """`step` if `checkpointer` holds it, else (step None) the latest."""
    steps = checkpointer.all_steps()
    if not steps:
        raise EvalError(f"{folder}: no finished checkpoint")
    if step is None:
        return steps[-1]
    if step not in steps:
        raise EvalError(f"{folder}: no checkpoint at step {step}; steps: {steps}")
    return step


def restore_params(spec: RunSpec, checkpointer: Checkpointer, step: int) -> tuple[Any, Any]:
    """(params, sampler fp8_meta) of checkpoint `step`; the meta as the RL loop's sampler uses
    it: the trainer's amax histories when both precisions use delayed scaling, fresh ones when
    only the sampler does, None without delayed scaling."""
    params, meta = jax.eval_shape(
        lambda: init_variables(spec.model, spec.update.recipe, jax.random.key(0))
    )
    trainer_meta = spec.rollout_recipe.any_delayed and spec.update.recipe.any_delayed
    like = {"params": on_default_device(params)}
    if trainer_meta:
        like["fp8_meta"] = on_default_device(meta)
    restored = checkpointer.restore_fields(step, like)
    if not spec.rollout_recipe.any_delayed:
        return restored["params"], None
    if trainer_meta:
        return restored["params"], restored["fp8_meta"]
    return restored["params"], fresh_fp8_meta(spec.model, spec.rollout_recipe)


def read_checkpoint(
    workdir: str | Path, step: int | None, read: Callable[[Checkpointer, int], T]
) -> tuple[T, int]:
    """(`read(checkpointer, step)`, step) for the run's intact checkpoint `step` (None: the
    latest); EvalError when the run has no checkpoints, not that step, or a damaged one."""
    folder = R.checkpoints_path(workdir)
    if not folder.is_dir():
        raise EvalError(f"{folder}: no checkpoints")
    checkpointer = Checkpointer(os.fspath(workdir))
    try:
        step = checkpoint_step(checkpointer, folder, step)
        problem = manifest_problem(folder / str(step))
        if problem is not None:
            raise EvalError(f"{folder / str(step)}: damaged checkpoint ({problem})")
        return read(checkpointer, step), step
    finally:
        checkpointer.close()


def restore_checkpoint(
    workdir: str | Path, step: int | None, precision: str | None = None
) -> tuple[RunSpec, Any, Any, int]:
    """(run spec, params, fp8 meta, step) of the run's checkpoint `step` (None: the latest), the
    spec's rollout in `precision` when given; EvalError as `read_checkpoint`."""
    spec = run_spec_of(workdir, precision)
    (params, meta), step = read_checkpoint(
        workdir, step, lambda checkpointer, at: restore_params(spec, checkpointer, at)
    )
    return spec, params, meta, step


def evaluate_checkpoint(
    workdir: str | Path,
    *,
    step: int | None = None,
    split: str = "test",
    num_prompts: int | None = None,
    samples: int = 0,
    precision: str | None = None,
) -> dict[str, Any]:
    """Greedy accuracy (and, with `samples` > 0, the sampled pass rate at the rollout
    temperature) of checkpoint `step` (None: the latest) on the first `num_prompts` prompts of
    `split` (None: the run's eval.num_prompts), in the run's rollout precision or `precision`
    (e.g. "bf16", to judge the policies of FP8 and BF16 arms alike). `greedy_correct` holds the
    greedy verdict (1 correct, 0 not) of each prompt, in the split's order."""
    if split not in SPLITS:
        raise EvalError(f"split must be one of {list(SPLITS)}, got {split!r}")
    spec, params, meta, step = restore_checkpoint(workdir, step, precision)
    run = spec.config
    n = run.eval.num_prompts if num_prompts is None else num_prompts
    examples = list(load_split(spec.task, split, spec.data_dir)[:n])
    prompt_len = max_prompt_len(spec.tokenizer, spec.task)
    record: dict[str, Any] = {
        "workdir": os.fspath(workdir),
        "step": step,
        "split": split,
        "num_prompts": len(examples),
        "precision": run.rollout.precision,
    }
    modes = [("greedy", 0.0, 1)] + ([("sampled", run.rollout.temperature, samples)] * (samples > 0))
    for mode, temperature, num_samples in modes:
        record[mode], shown, texts, finished = pass_rate(
            params, spec, examples, prompt_len, jax.random.key(run.seed),
            num_samples=num_samples, temperature=temperature, fp8_meta=meta,
        )  # fmt: skip
        if mode == "greedy":  # per prompt, in split order: arms scored alike pair per prompt
            correct = spec.task.verify_batch(shown, texts, finished)["correct"]
            record["greedy_correct"] = [int(c) for c in correct]
    return record
