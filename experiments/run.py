"""`run_experiment(config, workdir)`: SFT warm start (cached) then RL; the body of train.py."""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from typing import Any

import jax
from ml_collections import ConfigDict

from calclip_jax.analysis import run_record as R
from calclip_jax.analysis.stats import FINAL_STEPS
from calclip_jax.data import SPLITS, Example, load_split
from calclip_jax.fp8 import PrecisionRecipe
from calclip_jax.train.build import RunSpec, build_run_spec
from calclip_jax.train.evaluate import greedy_eval, max_prompt_len
from calclip_jax.train.multihost import is_leader, leader_first
from calclip_jax.train.rl_loop import RLRun
from calclip_jax.train.run_summary import summarize
from calclip_jax.train.sft import SFTConfig, cached_sft, run_sft, sft_cache_key
from calclip_jax.train.state import init_variables


def say(msg: str) -> None:
    if is_leader():
        print(msg, flush=True)


def warm_start(
    config: ConfigDict,
    spec: RunSpec,
    splits: dict[str, Sequence[Example]],
    log: Callable[[str], None],
) -> tuple[Any, dict]:
    """Initial params (seeded) trained by SFT, or the cached result of an identical SFT."""
    params, _ = init_variables(spec.model, spec.step.recipe, jax.random.key(config.seed))
    prompt_len = max_prompt_len(spec.tokenizer, spec.task)
    test = splits["test"][: config.eval.num_prompts]
    fp32 = PrecisionRecipe.preset("fp32")

    def evaluate(p: Any) -> dict[str, float]:
        return greedy_eval(
            p,
            spec.model,
            fp32,
            spec.tokenizer,
            spec.task,
            test,
            prompt_len,
            config.rollout.max_new_tokens,
        )

    s = config.sft
    sft_cfg = SFTConfig(
        steps=s.steps,
        batch_size=s.batch_size,
        learning_rate=s.learning_rate,
        target_accuracy=s.target_accuracy,
        eval_every=s.eval_every,
    )
    if s.steps == 0:
        return params, {"accuracy": evaluate(params)["accuracy"], "steps": 0}
    key = sft_cache_key(spec.model, spec.task, spec.tokenizer.alphabet, sft_cfg, config.seed)
    train_fn = lambda p: run_sft(
        p,
        spec.model,
        spec.task,
        spec.tokenizer,
        splits["train"],
        sft_cfg,
        config.seed,
        evaluate,
        log=log,
    )
    return cached_sft(spec.cache_dir, key, params, train_fn, log=log)


def run_experiment(
    config: ConfigDict, workdir: str, log: Callable[[str], None] = say, progress: bool | None = None
) -> dict[str, Any]:
    """Runs (or resumes, or skips when finished) the experiment; returns its summary."""
    spec = build_run_spec(config)  # validates before anything is compiled
    os.makedirs(workdir, exist_ok=True)
    if R.is_finished(workdir):
        log(f"{workdir} already holds a finished run ({R.SUMMARY_FILE}); nothing to do")
        return R.load_summary(workdir)
    if is_leader():
        with open(os.path.join(workdir, "config.json"), "w") as f:
            f.write(config.to_json(indent=2))
    t_start = time.perf_counter()
    log(f"task {spec.task.name}; model {spec.model}")
    log(
        f"rollout {config.rollout.precision}, train {config.train.precision}, rl "
        f"{config.rl.preset}, correction {config.correction.mode}, calibration "
        f"{config.calibration.enabled}"
    )
    with leader_first("tfds_prepare"):  # the leader builds the tfds data once
        splits = {s: load_split(spec.task, s, spec.data_dir) for s in SPLITS}  # array_record
    params, sft_report = warm_start(config, spec, splits, log)
    log(f"sft warm start: greedy test accuracy {sft_report['accuracy']:.3f}")
    run = RLRun(spec, config, workdir, params, splits["train"], splits["test"], log=log)
    if progress is None:
        progress = not config.log.quiet and is_leader()
    run.run(progress=progress)
    log = config.log
    rows = R.read_metrics(workdir)
    summary = summarize(rows, log.surge_factor, log.surge_warmup, log.surge_window)
    summary.update(sft_accuracy=sft_report["accuracy"], wall_time_s=time.perf_counter() - t_start)
    if is_leader():
        R.save_summary(workdir, summary)
    return summary


def format_summary(s: dict) -> str:
    """A few lines for the terminal."""
    fmt = lambda v: "n/a" if v is None else (f"{v:.3f}" if isinstance(v, float) else str(v))
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
            f"{fmt(s['clip_frac_upper_pos_mean'])}",
            "rollout-trainer mismatch k3 "
            + ("n/a" if s["mismatch_k3_mean"] is None else f"{s['mismatch_k3_mean']:.2e}"),
        ]
    )
