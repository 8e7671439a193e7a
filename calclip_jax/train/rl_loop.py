"""A run, top to bottom: config -> SFT warm start -> RL steps -> summary.json.

One RL step (one rollout batch):
  1. rollout: the sampler (rollout precision) draws G responses per prompt, the task verifier
     scores them, group-relative advantages follow (DAPO: dynamic sampling refills the batch);
  2. PPO: epochs x minibatches jitted updates (trainer precision), each one `update_step`: the
     clipped loss at the carried clip bounds, Calibrated Clipping inside, optax update;
  3. greedy evaluation every eval.every RL steps (and at the first and the last);
  4. one metrics row, sample and ratio dumps (with log.trace_dumps, earlier dumps rescored:
     `clipped_trace`), an orbax checkpoint every log.checkpoint_every.
An optimizer update is an "update"; a "step" is an RL step everywhere in this file.

`run_experiment` holds the workdir's lock (`workdir.lock`), refuses a config other than the
one the workdir was started with (`config_record`), resumes from the newest intact checkpoint
(dropping what a killed run logged after it), and returns the summary at once when the workdir
holds a run finished at train.steps or more.
"""

from __future__ import annotations

import dataclasses
import math
import os
import time
from collections.abc import Callable, Sequence
from typing import Any

import jax
from ml_collections import ConfigDict

from calclip_jax.analysis.run_summary import summarize
from calclip_jax.analysis.stats import FINAL_STEPS, finite_mean
from calclip_jax.config import RunConfig, RunSpec, build_run_spec, check_devices, resolved_record
from calclip_jax.data import SPLITS, Example, load_split
from calclip_jax.parallel.multihost import is_leader, leader_first, leader_says, sync
from calclip_jax.train.clipped_trace import write_trace
from calclip_jax.train.collect import Collector, run_collector
from calclip_jax.train.evaluate import greedy_eval
from calclip_jax.train.ppo_update import PPOUpdater, plan_rng
from calclip_jax.train.sft import warm_start
from calclip_jax.train.state import TrainState, fresh_fp8_meta
from calclip_jax.train.timing import compile_seconds, timed
from calclip_jax.train.trainer import run_trainer
from calclip_jax.workdir import run_record as R
from calclip_jax.workdir.checkpoints import Checkpointer
from calclip_jax.workdir.config_record import check_config, write_config
from calclip_jax.workdir.lock import WorkdirBusyError, WorkdirError, WorkdirLock
from calclip_jax.workdir.params_digest import params_digest
from calclip_jax.workdir.run_info import record_start
from calclip_jax.workdir.run_logger import RunLogger
from calclip_jax.workdir.wandb_sink import WandbSink, require_wandb


def say(msg: str) -> None:
    """Print on the leader process only."""
    if is_leader():
        print(msg, flush=True)


@dataclasses.dataclass
class RLParts:
    """Everything built once per run: the state and what reads or writes it."""

    spec: RunSpec
    state: TrainState
    sampler_meta: Callable[[TrainState], Any]  # amax histories the sampler uses (or None)
    collector: Collector
    updater: PPOUpdater
    test: list[Example]
    prompt_len: int
    checkpointer: Checkpointer
    logger: RunLogger


def setup(
    spec: RunSpec, workdir: str, params: Any, train: Sequence[Example], test: Sequence[Example]
) -> RLParts:
    """The trainer (`trainer.run_trainer`, from the warm-start `params`), the rollout collector
    and the run's writers."""
    run = spec.config
    trainer = run_trainer(spec, params)
    state, updater = trainer.state, trainer.updater
    rollout_meta = fresh_fp8_meta(spec.model, spec.rollout_recipe)

    def sampler_meta(s: TrainState) -> Any:
        """A delayed-scaling sampler uses the trainer's amax histories when it has them (weight
        sync carries them along), else its own empty ones; None without delayed scaling."""
        if not spec.rollout_recipe.any_delayed:
            return None
        return s.fp8_meta if spec.update.recipe.any_delayed else rollout_meta

    collector = run_collector(spec, train)
    return RLParts(
        spec=spec,
        state=state,
        sampler_meta=sampler_meta,
        collector=collector,
        updater=updater,
        test=list(test[: run.eval.num_prompts]),
        prompt_len=collector.prompt_len,
        checkpointer=Checkpointer(workdir),
        logger=RunLogger(workdir, active=is_leader(), wandb=open_wandb(spec, workdir)),
    )


def open_wandb(spec: RunSpec, workdir: str) -> WandbSink | None:
    """The W&B run of `log.wandb_project` (leader only), else None."""
    project = spec.config.log.wandb_project
    if project is None or not is_leader():
        return None
    return WandbSink(project, workdir, {**spec.config.to_dict(), "resolved": resolved_record(spec)})


def evaluate(parts: RLParts) -> dict[str, float]:
    """Greedy accuracy, reward and garbled share on the test prompts, in the rollout precision."""
    spec = parts.spec
    ev = greedy_eval(
        parts.state.params,
        spec.model,
        spec.rollout_recipe,
        spec.tokenizer,
        spec.task,
        parts.test,
        parts.prompt_len,
        spec.config.rollout.max_new_tokens,
        fp8_meta=parts.sampler_meta(parts.state),
    )
    return {f"eval_{k}": v for k, v in ev.items()}


def resume(parts: RLParts, log: Callable[[str], None]) -> int:
    """Restores the newest intact checkpoint, if any, and drops the rows, ratio dumps and
    samples logged after it; returns the number of completed RL steps."""
    start, parts.state = parts.checkpointer.restore_latest(parts.state, log)
    parts.logger.truncate_after(start)
    if start:
        log(f"resumed from checkpoint at RL step {start}")
    return start


def rl_step(parts: RLParts, step: int) -> dict[str, float]:
    """RL step `step` (1-based) on `parts.state`; returns its metrics row."""
    run = parts.spec.config
    t0 = time.perf_counter()
    # 1. rollout -> rewards -> advantages
    got = parts.collector.collect(parts.state.params, parts.sampler_meta(parts.state), step)
    t1 = time.perf_counter()
    # 2. PPO: the minibatch updates of this batch
    probe = run.log.ratios_every is not None and step % run.log.ratios_every == 0
    parts.state, per_update, probed = parts.updater.update(
        parts.state, got.batch, plan_rng(run.seed, step), step, probe
    )
    t2 = time.perf_counter()
    if probed is not None:
        parts.logger.write_ratio_dump(step, probed)
        if run.log.trace_dumps:
            write_trace(parts.logger, parts.updater, parts.state, step, run.log.trace_dumps)
    if step % run.log.samples_every == 0 or step == 1:
        parts.logger.write_samples(step, got.samples[: run.log.num_samples])
    row = dict(got.metrics)
    row.update(  # the mean over the batch's updates
        {name: finite_mean([m.get(name) for m in per_update], math.nan) for name in per_update[0]}
    )
    row.update(clip_lower=per_update[-1]["clip_lower"], clip_upper=per_update[-1]["clip_upper"])
    row.update(rollout_time_s=t1 - t0, train_time_s=t2 - t1)
    return row


def rl_loop(parts: RLParts, start: int, log: Callable[[str], None], progress: bool) -> None:
    """RL steps from `start` (the restored step) to train.steps: one metrics row each."""
    run = parts.spec.config
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=run.train.steps, initial=start, desc="rl", dynamic_ncols=True)
    for step in range(start + 1, run.train.steps + 1):
        t0, c0 = time.perf_counter(), compile_seconds()
        row = rl_step(parts, step)
        if step % run.eval.every == 0 or step in (1, run.train.steps):
            row.update(evaluate(parts))
        row["step_time_s"] = time.perf_counter() - t0
        row["compile_time_s"] = min(compile_seconds() - c0, row["step_time_s"])
        if step == start + 1:
            log(f"rl step {step}: {row['step_time_s']:.1f} s, {row['compile_time_s']:.1f} s of it "
                "compiling")  # fmt: skip
        parts.logger.write(step, row)
        if step % run.log.checkpoint_every == 0 or step == run.train.steps:
            parts.checkpointer.save(step, parts.state)
        if bar is not None:
            bar.update(1)
            bar.set_postfix(
                reward=f"{row['reward_mean']:.3f}",
                entropy=f"{row['entropy']:.3f}",
                clipL=f"{row['clip_frac_lower_neg']:.3f}",
            )
    if bar is not None:
        bar.close()
    parts.checkpointer.close()
    parts.logger.close()
    sync("rl_run_done")  # metrics.jsonl is complete before any process reads it


def lock_workdir(workdir: str, log: Callable[[str], None]) -> WorkdirLock | None:
    """The leader's lock on `workdir` (None on the other processes); every process raises
    WorkdirBusyError when the leader could not take it."""
    lock, busy = None, None
    if is_leader():
        try:
            lock = WorkdirLock(workdir).acquire(log)
        except WorkdirBusyError as err:
            busy = err
    if not leader_says(busy is None):
        raise busy or WorkdirBusyError(f"process 0 could not lock {workdir}")
    return lock


def run_experiment(
    config: ConfigDict | RunConfig,
    workdir: str,
    log: Callable[[str], None] = say,
    progress: bool | None = None,
    allow_config_change: bool = False,
) -> dict[str, Any]:
    """Runs (or resumes, or extends, or skips when finished) the experiment; returns its
    summary. Raises WorkdirError when another process holds the workdir, or when the workdir
    holds a run with another config and not `allow_config_change` (`config_record`)."""
    spec = build_run_spec(config)  # validates before anything is compiled
    run = spec.config
    if run.log.wandb_project is not None:
        require_wandb()  # before anything is compiled
    check_devices(run, jax.device_count())  # before SFT, not when the mesh is built after it
    os.makedirs(workdir, exist_ok=True)
    lock = lock_workdir(workdir, log)
    try:
        return _run_locked(config, spec, workdir, log, progress, allow_config_change)
    finally:
        if lock is not None:
            lock.release()


def _run_locked(
    config: ConfigDict | RunConfig,
    spec: RunSpec,
    workdir: str,
    log: Callable[[str], None],
    progress: bool | None,
    allow_config_change: bool,
) -> dict[str, Any]:
    run = spec.config
    changes = check_config(workdir, config, allow_config_change, spec)
    done = R.load_summary(workdir)
    if done is not None and done.get("final_step", 0) >= run.train.steps:
        log(f"{workdir} already holds a finished run ({R.summary_path(workdir)}); nothing to do")
        return done
    if is_leader():
        record_start(workdir)
    t_start = time.perf_counter()
    log(f"task {spec.task.name}; model {spec.model}")
    log(
        f"rollout {run.rollout.precision}, train {run.train.precision}, rl {run.rl.preset}, "
        f"correction {run.correction.mode}, calibration {run.calibration.enabled}"
    )
    with leader_first("tfds_prepare"):  # the leader builds the tfds data once
        splits = {s: load_split(spec.task, s, spec.data_dir) for s in SPLITS}
    with timed() as sft_time:
        params, sft_report = warm_start(spec, splits, log)
    digest = params_digest(params)  # equal digests: runs start from bitwise the same weights
    log(
        f"sft warm start: greedy test accuracy {sft_report['accuracy']:.3f}, params {digest}; "
        f"{sft_time.describe()}"
    )
    parts = setup(spec, workdir, params, splits["train"], splits["test"])
    start = resume(parts, log)
    if start > run.train.steps:
        raise WorkdirError(f"{workdir} holds RL step {start}, past train.steps={run.train.steps}")
    if is_leader():  # config.json changes only once the restore has succeeded
        write_config(workdir, config, spec, changes, after_step=start)
        if done is not None:  # a finished run extended to more steps
            R.remove_summary(workdir)
            log(f"extending the finished run from RL step {start} to {run.train.steps}")
    if progress is None:
        progress = not run.log.quiet and is_leader()
    rl_loop(parts, start, log, progress)
    lg = run.log
    rows = R.read_metrics(workdir)
    summary = summarize(rows, lg.surge_factor, lg.surge_warmup, lg.surge_window)
    summary.update(
        sft_accuracy=sft_report["accuracy"],
        sft_params_digest=digest,
        sft_time_s=sft_time.wall_s,
        sft_compile_time_s=sft_time.compile_s,
        wall_time_s=time.perf_counter() - t_start,
    )
    if is_leader():
        R.save_summary(workdir, summary)
    return summary


def format_summary(s: dict, workdir: str | None = None) -> str:
    """A few lines for the terminal; with `workdir`, where its outputs are (and, for a run from
    a real checkpoint, the command exporting it)."""
    fmt = lambda v: "n/a" if v is None else (f"{v:.3f}" if isinstance(v, float) else str(v))
    secs = lambda k: "n/a" if s.get(k) is None else f"{s[k]:.3g}s"
    where = R.output_paths(workdir) if workdir is not None else {}
    return "\n".join(
        [
            f"steps {s['final_step']}  wall {s['wall_time_s']:.0f}s",
            f"reward        {fmt(s['reward_first'])} -> {fmt(s.get('reward_final'))} (last "
            f"{FINAL_STEPS})",
            f"eval accuracy {fmt(s['eval_accuracy_first'])} -> {fmt(s['eval_accuracy_last'])}",
            f"entropy       {fmt(s['entropy_first'])} -> {fmt(s['entropy_last'])}"
            f" (peak {fmt(s['entropy_peak'])}, surge: {s['entropy_surge']})",
            f"clip frac lower/neg {fmt(s['clip_frac_lower_neg_mean'])} (BF16 shadow "
            f"{fmt(s['clip_frac_lower_neg_ref_mean'])}), upper/pos "
            f"{fmt(s['clip_frac_upper_pos_mean'])} (BF16 shadow "
            f"{fmt(s['clip_frac_upper_pos_ref_mean'])})",
            "rollout-trainer mismatch k3 "
            + ("n/a" if s["mismatch_k3_mean"] is None else f"{s['mismatch_k3_mean']:.2e}"),
            f"time: sft {secs('sft_time_s')} ({secs('sft_compile_time_s')} compiling), first rl "
            f"step {secs('rl_first_step_time_s')}, rl compiling {secs('rl_compile_time_s')}, "
            f"rl step median {secs('rl_step_time_s_median')} (without compiling)",
            *(f"{kind + ':':13} {path}" for kind, path in where.items()),
            *([export_hint(workdir)] if workdir and R.start_checkpoint(workdir) else []),
        ]
    )


def export_hint(workdir: str) -> str:
    """The command exporting a run from a real checkpoint to a Hugging Face directory."""
    out = f"{os.path.normpath(workdir)}_hf"
    return f"{'export:':13} python -m experiments.export --workdir={workdir} --out={out}"
