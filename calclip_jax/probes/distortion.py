"""The FP8-vs-BF16 ratio distortion on sampled text, every precision on identical parameters
(experiments/distortion.py is its command line; results/RESULTS.md explains the procedure)."""

from __future__ import annotations

import dataclasses
import json
import math
import os
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from ml_collections import ConfigDict

from calclip_jax.analysis import distortion as D
from calclip_jax.analysis.ratio_noise import PROB_EDGES
from calclip_jax.config import RunSpec, build_run_spec, check_devices, resolved_record
from calclip_jax.config.spec import precision_recipe
from calclip_jax.data import load_split
from calclip_jax.fp8 import PrecisionRecipe
from calclip_jax.probes.first_batch import (
    LOGP_KEYS,
    RL_STEP,
    SAMPLER_PRECISION,
    first_rollout_batch,
)
from calclip_jax.reports import distortion_report as report
from calclip_jax.train.ppo_update import make_logprob_fn, plan_rng
from calclip_jax.train.sft import warm_start
from calclip_jax.train.trainer import run_trainer
from calclip_jax.train.update_step import update_flags

REFERENCE = SAMPLER_PRECISION  # the sampler's and the reference precision
PRECISIONS = ("bf16", "fp8_tensor", "fp8_channel", "fp8_block", "fp8_mx")


def update_path(
    spec: RunSpec, params: Any, batch: dict[str, np.ndarray], updates: int, precision: str
) -> Iterator[tuple[Any, dict[str, float]]]:
    """Yields (theta_k, the update's metrics) for k = 0..`updates` (no metrics at k = 0): the
    run's update step in `precision` on the run's minibatch plan, calibration off. Every theta_k
    is placed on the mesh alike, so all forwards run the same program. Consume theta_k before
    the next item: the step donates its state."""
    run = spec.config
    cfg = dataclasses.replace(
        spec.update,
        recipe=precision_recipe("update_precision", precision, None),
        calibration=dataclasses.replace(spec.update.calibration, enabled=False),
    )
    own = jax.tree.map(jnp.copy, params)  # donated below; the caller keeps theta_0
    per_epoch = run.train.num_minibatches
    trainer = run_trainer(spec, own, update=cfg, epochs=-(-updates // per_epoch))
    state, step, updater = trainer.state, trainer.update_step, trainer.updater
    rng = plan_rng(run.seed, RL_STEP)
    plan = updater.plan(len(batch["tokens"]), rng)[:updates]
    yield state.params, {}
    for i, mb in enumerate(updater.prepare(state, batch, plan, calibrate=False)):
        mb = updater.update_inputs(state, mb, shadow=False) if i else mb
        state, metrics = step(state, mb, update_flags(i == 0, False))
        yield state.params, {k: float(v) for k, v in jax.device_get(metrics).items()}


def check_precisions(names: Sequence[str]) -> list[str]:
    """The reference first, then the others in order; delayed scaling is rejected."""
    out = [REFERENCE, *[p for p in dict.fromkeys(names) if p != REFERENCE]]
    for name in out:
        if precision_recipe("precisions", name, None).any_delayed:
            raise ValueError(f"{name}: delayed scaling needs amax-history state; not measured")
    return out


def measure(
    spec: RunSpec,
    params: Any,
    batch: dict[str, np.ndarray],
    precisions: Sequence[str],
    updates: int,
    update_precision: str,
    log: Callable[[str], None] = print,
) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray], list[dict[str, float]]]:
    """(old_logp[P] [B, T], logp[P] [K + 1, B, T], update metrics): whole-batch log-probs at
    theta_0 and theta_0..theta_K per precision. Raises if r_P != 1 at theta_0."""
    u = spec.update
    fns = {
        p: make_logprob_fn(spec.model, PrecisionRecipe.preset(p), u.temperature, u.logprob_chunk)
        for p in precisions
    }
    inputs = {k: batch[k] for k in LOGP_KEYS}
    mask = np.asarray(batch["response_mask"]).astype(bool)
    fwd = lambda p, theta: np.asarray(jax.device_get(fns[p](theta, {}, inputs)), np.float32)
    path = update_path(spec, params, batch, updates, update_precision)
    theta_0, _ = next(path)
    old = {p: fwd(p, theta_0) for p in precisions}
    logp: dict[str, list[np.ndarray]] = {p: [] for p in precisions}

    def forwards(k: int, theta: Any) -> None:
        for p in precisions:
            t0 = time.perf_counter()
            logp[p].append(fwd(p, theta))
            big = float(np.abs(logp[p][k] - old[p])[mask].max(initial=0.0))
            log(f"{p} k={k}: max abs log r {big:.4g} ({time.perf_counter() - t0:.1f}s)")
            if k == 0 and big != 0.0:
                raise RuntimeError(
                    f"{p}: r != 1 at theta_0 (max abs log r {big:.3g}): a nondeterministic "
                    "forward? on GPU, XLA_FLAGS=--xla_gpu_deterministic_ops=true"
                )

    forwards(0, theta_0)
    metrics = []
    for k, (theta, m) in enumerate(path, 1):
        metrics.append(m)
        forwards(k, theta)
    return old, {p: np.stack(v) for p, v in logp.items()}, metrics


def finite_json(x: Any) -> Any:
    """NaN / inf -> None, recursively (strict JSON)."""
    if isinstance(x, dict):
        return {k: finite_json(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [finite_json(v) for v in x]
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x


def write_outputs(
    out: str, record: dict[str, Any], arrays: dict[str, np.ndarray], markdown: str
) -> None:
    """distortion.json, distortion.md, distortion.png and tokens.npz in `out`."""
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "distortion.json"), "w") as f:
        json.dump(finite_json(record), f, indent=1)
    with open(os.path.join(out, "distortion.md"), "w") as f:
        f.write(markdown)
    np.savez_compressed(os.path.join(out, "tokens.npz"), **arrays)
    fig = report.plot_distortion(record["stats"], PROB_EDGES, os.path.join(out, "distortion.png"))
    report.plots.plt.close(fig)


def run_distortion(
    config: ConfigDict,
    out: str,
    *,
    num_prompts: int | None = None,
    updates: int = 4,
    precisions: Sequence[str] = PRECISIONS,
    update_precision: str = "bf16",
    command: Sequence[str] = (),
    log: Callable[[str], None] = print,
) -> dict[str, Any]:
    """The whole measurement; writes `out` and returns what distortion.json holds."""
    if updates < 1:
        raise ValueError(f"updates must be >= 1, got {updates}")
    config = config.copy_and_resolve_references()  # --num_prompts edits it
    if num_prompts is not None:
        config.rollout.prompts_per_step = num_prompts
    spec = build_run_spec(config)
    run = spec.config
    check_devices(run, jax.device_count())  # before SFT
    precisions = check_precisions(precisions)
    t0 = time.perf_counter()
    splits = {s: load_split(spec.task, s, spec.data_dir) for s in ("train", "test")}
    params, sft_report = warm_start(spec, splits, log)
    t1 = time.perf_counter()
    got = first_rollout_batch(spec, params, splits["train"])
    batch = got.batch
    log(f"rollout: {len(batch['tokens'])} rows, reward {got.metrics['reward_mean']:.3f}")
    t2 = time.perf_counter()
    old, logp, update_metrics = measure(
        spec, params, batch, precisions, updates, update_precision, log
    )
    t3 = time.perf_counter()
    bounds = spec.update.rl.clip_bounds
    stats = D.distortion_stats(old, logp, batch["response_mask"], batch["advantages"], bounds)
    settings = {
        "num_prompts": run.rollout.prompts_per_step,
        "samples_per_prompt": run.rollout.samples_per_prompt,
        "rows": len(batch["tokens"]),
        "updates": updates,
        "update_precision": update_precision,
        "update_plan": f"{updates} minibatch updates, {run.train.num_minibatches} per epoch",
        "sampler_precision": REFERENCE,
        "reference": REFERENCE,
        "precisions": precisions,
        "temperature": spec.update.temperature,
        "logprob_chunk": spec.update.logprob_chunk,
        "clip_bounds": list(bounds),
        "clip_width": D.CLIP_WIDTH,
        "prob_edges": list(PROB_EDGES),
    }
    record = {
        "command": list(command),
        "config": json.loads(config.to_json()),
        "resolved": resolved_record(spec),
        "settings": settings,
        "sft": sft_report,
        "rollout": got.metrics,
        "update_metrics": update_metrics,
        "stats": stats,
        "time_s": {"warm_start": t1 - t0, "rollout": t2 - t1, "measure": t3 - t2},
    }
    preamble = (
        f"{spec.checkpoint or 'fresh model'}, task {spec.task.name} {spec.task.data_knobs()}; "
        f"{settings['rows']} sampled rows ({settings['num_prompts']} prompts x "
        f"{settings['samples_per_prompt']}, BF16 sampler, T = {settings['temperature']:g}); "
        f"theta_1..theta_{updates}: {settings['update_plan']} in {update_precision}; "
        f"clip bounds {bounds[0]:g} / {bounds[1]:g}.\n\n"
    )
    markdown = report.to_markdown(stats, bounds, D.CLIP_WIDTH, PROB_EDGES, preamble=preamble)
    arrays = {
        "mask": np.asarray(batch["response_mask"]).astype(bool),
        "advantages": np.asarray(batch["advantages"]),
        "tokens": np.asarray(batch["tokens"]),
        "rollout_logp": np.asarray(batch["rollout_logp"]),
        "prob_edges": np.asarray(PROB_EDGES),
        "clip_bounds": np.asarray(bounds),
        **{f"old_logp_{p}": v for p, v in old.items()},
        **{f"logp_{p}": v for p, v in logp.items()},
    }
    write_outputs(out, record, arrays, markdown)
    log(markdown)
    return record
