"""Where the real-model RL step's time goes: `bench_smollm2_step`'s workload (SmolLM2-135M-Instruct
GRPO, TRL's anchor workload through `configs/smollm2.py`), per phase and per XLA op kind.

Run: ``python -m benchmarks.profile_smollm2 --by_source`` (needs the shipped checkpoint, as
`bench_smollm2_step`; a few minutes; more on a loaded machine). Takes `bench_smollm2_step`'s
flags (`--precision`, `--arm`, `--prompts`, `--group`, `--new_tokens`, `--set=key=value`,
`--steps`, `--warmup`).

`--phase=step` (the default) runs `--warmup` RL steps of the run's own collector and trainer
(compiling), times `--steps` more per phase (rollout, log-prob forwards, update: medians), then
records a `jax.profiler` trace of one more RL step. `--phase=sampler|forward|update` runs one
phase alone (`smollm2_phases`: a rollout call; a minibatch's log-probs; their gradient, the model
part of an update), `--calls` timed calls (medians of wall and process CPU time), then a trace of
`--traced` more.

For each compiled program (by op time: the sampler `jit__sample_jit`, the log-prob forwards
`jit_forwards`, the update `jit_step`, ...) it prints its op time per RL step / call (all
threads' op events summed: a share, not a wall time), and its `--top` op kinds. `--by_source`
splits each kind by the model code behind it (the op's `op_name` in the program's optimized
HLO, which XLA dumps as it compiles: `Transformer/L/attn/...`, layer indices dropped), marks
the ops that run a GEMM (`*`: a dot, or a fusion holding one) and first sums the program's op
time into coarse classes (`category`). XLA-CPU's `dot` thunks (not the YNN fusions) may end
their trace event before the GEMM has run, so a profile can undercount them: compare shares of
one kind between profiles, and times with `ab_smollm2`.
"""

from __future__ import annotations

import collections
import dataclasses
import json
import statistics
import sys
import tempfile
import time

import jax
from absl import app, flags

from benchmarks import bench_smollm2_step as bench
from benchmarks import profile_trace
from benchmarks import smollm2_phases as phases
from benchmarks.timing import PhaseClock
from calclip_jax.config import build_run_spec
from calclip_jax.data import load_split
from calclip_jax.model.shared_prompt import PromptGroups
from calclip_jax.rollout import sampler as sampler_module
from calclip_jax.train import forward as forward_module
from calclip_jax.train.collect import run_collector
from calclip_jax.train.ppo_update import plan_rng
from calclip_jax.train.sft import starting_params
from calclip_jax.train.trainer import run_trainer

_PHASE = flags.DEFINE_enum("phase", "step", ["step", *phases.PHASES], "What to profile.")
_CALLS = flags.DEFINE_integer("calls", 3, "Timed calls of a --phase other than step.")
_TRACED = flags.DEFINE_integer("traced", 1, "Traced calls of a --phase other than step.")
_SAMPLER = flags.DEFINE_string("sampler", "gumbel", "`sample(sampler=...)` of --phase=sampler.")
_TOP = flags.DEFINE_integer("top", 12, "Op kinds printed per program.")
_PROGRAMS = flags.DEFINE_integer("programs", 4, "Programs printed (by op time).")
_BY_SOURCE = flags.DEFINE_bool("by_source", False, "Split op kinds by the code that emitted them.")
_SAVE = flags.DEFINE_string("save", "", "Write the phase times and traced ops to this JSON file.")

Op = tuple[str, str, float, str, bool]  # program, op name, microseconds, source, runs a GEMM


def log(msg: str) -> None:
    print(f"[profile_smollm2] {msg}", file=sys.stderr, flush=True)


def rl_step_profile() -> tuple[list[dict[str, float]], list[tuple[str, str, float]], str]:
    """(phase times of the --steps measured RL steps, the ops of one traced RL step, unit)."""
    config = bench.workload_config(*bench.workload_flags())
    spec = build_run_spec(config)
    run = spec.config
    train = load_split(spec.task, "train", spec.data_dir)
    collector = run_collector(spec, train)
    collector = dataclasses.replace(collector, tokenizer=bench.NoEosTokenizer(spec.tokenizer))
    trainer = run_trainer(spec, starting_params(spec))
    state, updater = trainer.state, trainer.updater
    clock = PhaseClock(updater)

    def rl_step(step: int) -> dict[str, float]:
        nonlocal state
        t0 = time.perf_counter()
        got = collector.collect(state.params, None, step)
        rollout = time.perf_counter() - t0
        state, _, _ = updater.update(state, got.batch, plan_rng(run.seed, step), step)
        times = {"rollout": rollout, **clock.take(), "step": time.perf_counter() - t0}
        log(f"RL step {step}: " + " ".join(f"{k} {v:.2f}" for k, v in times.items()))
        return times

    n_warm = bench._WARMUP.value
    for step in range(1, n_warm + 1):
        rl_step(step)
    timed = [rl_step(n_warm + i + 1) for i in range(bench._STEPS.value)]
    print(f"SmolLM2 RL step ({run.train.precision}, share_prompt={run.train.share_prompt}), "
          f"medians of {len(timed)}:")  # fmt: skip
    for name in ("step", "rollout", "logprobs", "update", "program"):
        print(f"  {name:9s} {statistics.median(t.get(name, 0.0) for t in timed):7.2f} s")
    with profile_trace.traced() as ops:
        rl_step(n_warm + len(timed) + 1)
    return timed, ops, "RL step"


def phase_profile(phase: str) -> tuple[list[dict[str, float]], list[tuple[str, str, float]], str]:
    """(wall and CPU seconds of --calls calls of `phase`, the ops of --traced more, unit)."""
    w = phases.load_workload(*bench.workload_flags())
    if phase == "sampler":
        call = phases.sampler_call(
            w, sampler_module, w.spec.rollout_recipe, sampler=_SAMPLER.value
        )  # fmt: skip
    else:
        batch, cot = phases.minibatch(w)
        fn = phases.logprob_program(
            w, phase, forward_module, w.spec.update.recipe, PromptGroups, batch, cot
        )
        call = lambda _: jax.block_until_ready(fn(w.params))
    call(0)  # compiles
    timed = []
    for i in range(_CALLS.value):
        c0, t0 = time.process_time(), time.perf_counter()
        call(i + 1)
        timed.append({"wall": time.perf_counter() - t0, "cpu": time.process_time() - c0})
        log(f"{phase} call {i + 1}: {timed[-1]['wall']:.2f} s (CPU {timed[-1]['cpu']:.2f} s)")
    print(f"SmolLM2 {phase} ({w.spec.config.train.precision}), medians of {len(timed)} calls: "
          f"{statistics.median(t['wall'] for t in timed):.2f} s, CPU "
          f"{statistics.median(t['cpu'] for t in timed):.2f} s")  # fmt: skip
    with profile_trace.traced() as ops:
        for i in range(_TRACED.value):
            call(1000 + i)
    return timed, ops, f"{phase} call"


def main(argv: list[str]) -> None:
    del argv
    dump = tempfile.TemporaryDirectory() if _BY_SOURCE.value else None
    if dump is not None:
        profile_trace.set_xla_dump(dump.name)  # before the first computation
    if _PHASE.value == "step":
        timed, ops, unit = rl_step_profile()
        calls = 1
    else:
        timed, ops, unit = phase_profile(_PHASE.value)
        calls = _TRACED.value
    programs = profile_trace.dumped_programs(dump.name) if dump is not None else {}
    if dump is not None:
        dump.cleanup()
    rows = [
        (module, name, dur, *_described(programs.get(module, ({}, set())), name))
        for module, name, dur in ops
    ]
    if _SAVE.value:
        with open(_SAVE.value, "w") as f:
            json.dump({"times": timed, "calls": calls, "ops": rows}, f)
    print_profile(rows, calls, unit, by_source=dump is not None)


def _described(program: tuple[dict[str, str], set[str]], name: str) -> tuple[str, bool]:
    """(the code behind op `name`, whether it runs a GEMM) in its program."""
    sources, gemms = program
    return sources.get(name, "?"), name in gemms


def category(source: str, gemm: bool) -> str:
    """A coarse class of an op by the code behind it (`--by_source` only)."""
    if gemm:
        if "_proj/" in source:
            return "GEMM: dense projections"
        return "GEMM: attention" if "/attn/" in source else "GEMM: lm_head (and other)"
    rules = (
        (("_gumbel", "_uniform", "threefry", "random_bits"), "PRNG (Gumbel noise)"),
        (("log_softmax", "closed_call"), "log-softmax / log-prob stats over the vocabulary"),
        (("/attn/",), "attention: scores, softmax, RoPE, reshapes, cache"),
        (("norm/",), "RMSNorm"),
        (("/mlp/",), "MLP elementwise (SiLU, product)"),
        (("Transformer",), "other model ops (residual adds, embedding)"),
    )
    for keys, name in rules:
        if any(k in source for k in keys):
            return name
    return "other (sampling, loss, optimizer, unnamed copies)"


def print_profile(rows: list[Op], calls: int, unit: str, by_source: bool) -> None:
    """Per program (by op time): its share, GEMM share, op classes and top op kinds, per
    `unit` (`calls` of them traced)."""
    per_program: dict[str, list[Op]] = collections.defaultdict(list)
    for row in rows:
        per_program[row[0]].append(row)
    ms = {m: sum(r[2] for r in o) / 1e3 / calls for m, o in per_program.items()}
    all_ms = sum(ms.values())
    print(f"traced: op time {all_ms / 1e3:.2f} s per {unit} (ops of all threads, summed)")
    for module in sorted(ms, key=lambda m: -ms[m])[: _PROGRAMS.value]:
        ops = per_program[module]
        gemm = sum(r[2] for r in ops if r[4]) / 1e3 / calls
        print(f"\n== {module}: {ms[module] / 1e3:.2f} s ({ms[module] / all_ms:.1%} of op time)"
              + (f", GEMMs {gemm / ms[module]:.1%}" if by_source else ""))  # fmt: skip
        if by_source:
            cats = profile_trace.op_times(
                [(m, category(src, g), d) for m, _, d, src, g in ops], calls, lambda _, c: c
            )
            profile_trace.print_op_kinds(cats, unit, unit, top=len(cats), what="class")
            kind = lambda r: f"{profile_trace.op_kind(r[1])}{'*' * r[4]}  {r[3]}"
        else:
            kind = lambda r: profile_trace.op_kind(r[1])
        kinds = profile_trace.op_times([(r[0], kind(r), r[2]) for r in ops], calls,
                                       lambda _, k: k)  # fmt: skip
        profile_trace.print_op_kinds(kinds, unit, unit, top=_TOP.value)


if __name__ == "__main__":
    app.run(main)
