"""The clipped-token trace of a finished run, from a checkpoint: what `log.trace_dumps` would
have written at that step, for a run that did not trace while it ran.

The checkpoint's parameters (and, under delayed scaling, its amax histories) rescore the rows of
the run's earlier ratio dumps whole, in the trainer's precision and in the BF16 shadow, by the
forwards of their `old_logp_full` and `old_logp_ref_full` (`make_logprob_fn`, as
`PPOUpdater.whole_batch_logp` and `whole_batch_shadow_logp`): the trace file is the one the run
itself would have written at that step (`train.clipped_trace.rescore_dumps`).
"""

from __future__ import annotations

from pathlib import Path

import jax

from calclip_jax.parallel.multihost import to_host
from calclip_jax.probes.eval_checkpoint import EvalError, read_checkpoint, run_spec_of
from calclip_jax.train.clipped_trace import rescore_dumps
from calclip_jax.train.forward import FORWARD_KEYS
from calclip_jax.train.minibatch_forwards import make_logprob_fn
from calclip_jax.train.state import fresh_fp8_meta, init_variables, on_default_device
from calclip_jax.workdir import run_record as R
from calclip_jax.workdir.ratio_dumps import TRACE_KEY
from calclip_jax.workdir.run_logger import write_npz


def trace_from_checkpoint(
    workdir: str | Path, step: int, count: int, overwrite: bool = False
) -> tuple[Path, list[int]]:
    """Writes the trace of RL step `step` (the `count` latest ratio dumps before it, rescored by
    checkpoint `step`) to `run_record.trace_path`; returns its path and the traced steps.
    EvalError when the checkpoint is missing or damaged, no earlier dump holds its rows, or the
    trace exists (unless `overwrite`)."""
    if count < 1:
        raise EvalError(f"count must be >= 1, got {count}")
    out = R.trace_path(workdir, step)
    if out.exists() and not overwrite:
        raise EvalError(f"{out} exists (the run traced step {step}); pass overwrite to replace it")
    spec = run_spec_of(workdir)
    abstract_params, abstract_meta = jax.eval_shape(
        lambda: init_variables(spec.model, spec.update.recipe, jax.random.key(0))
    )
    delayed = spec.update.recipe.any_delayed  # else the meta holds nothing the forward reads
    like = {"params": on_default_device(abstract_params)}
    if delayed:
        like["fp8_meta"] = on_default_device(abstract_meta)
    restored, step = read_checkpoint(workdir, step, lambda c, at: c.restore_fields(at, like))
    cfg = spec.update
    forward = lambda recipe: make_logprob_fn(
        spec.model, recipe, cfg.temperature, cfg.logprob_chunk, cfg.shared_prompt
    )
    logp, shadow_logp = forward(cfg.recipe), forward(cfg.shadow_recipe)
    meta = restored["fp8_meta"] if delayed else fresh_fp8_meta(spec.model, cfg.recipe)
    params = restored["params"]
    inputs = lambda rows: {k: rows[k] for k in FORWARD_KEYS}
    score = lambda rows: to_host(logp(params, meta, inputs(rows)))
    shadow = lambda rows: to_host(shadow_logp(params, {}, inputs(rows)))
    trace = rescore_dumps(workdir, step, count, score, shadow)
    if not trace:
        raise EvalError(f"{workdir}: no ratio dump with its rows before step {step}")
    write_npz(out, trace)
    return out, sorted(int(k[len(TRACE_KEY) :]) for k in trace if k.startswith(TRACE_KEY))
