"""calclip_jax against Hugging Face TRL on the real-model workload: interleaved pairs, ratios,
the FLOP floor.

Run from the repo root (TRL's venv first, once: ``bash ../shared/anchors/trl_setup.sh``):
``python -m benchmarks.compare_trl --pairs=2`` (about 20 minutes a pair on a 2-core CPU). Each
pair runs `benchmarks/bench_smollm2_step.py` and the anchor's `trl_grpo_bench.py` (the same
workload: 16 prompts x 8 samples, 32 new tokens, 4 minibatch updates, KL 0.04, float32) as two
fresh processes, their order alternating, each after waiting for an idle machine; a run other
processes disturbed (> 0.1 core) is repeated once. Peak memory is each process's peak RSS (from
`wait4`). First, `trl_flops_floor.py` counts the step's FLOPs and measures this machine's
sustained GEMM rate: the floor is the necessary ("minimal") FLOPs at that rate.

Prints one line per pair and a final JSON line: medians over pairs of each ratio calclip_jax /
TRL (time and memory: < 1 is better; rollout tokens/s: > 1 is better), the step over the floor,
and the update's share of the sustained GEMM rate (its necessary FLOPs / its time / the rate).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
from typing import Any

from absl import app, flags

from benchmarks.machine_noise import is_noisy
from calclip_jax.workdir.run_info import cpu_description

_PAIRS = flags.DEFINE_integer("pairs", 2, "Interleaved (calclip_jax, TRL) pairs.")
_ANCHORS = flags.DEFINE_string(
    "anchors", "../shared/anchors", "Folder of trl_grpo_bench.py and trl_flops_floor.py."
)
_TRL_PYTHON = flags.DEFINE_string(
    "trl_python",
    os.path.expanduser("~/.cache/trl-venv/bin/python"),
    "Interpreter of TRL's venv (made by the anchor's trl_setup.sh).",
)
_STEPS = flags.DEFINE_integer("steps", 4, "Measured RL steps per run (both sides).")
_WARMUP = flags.DEFINE_integer("warmup", 1, "Unmeasured RL steps per run (both sides).")
_WAIT_IDLE = flags.DEFINE_float("wait_idle", 60.0, "Seconds each run waits for an idle machine.")
_OURS = flags.DEFINE_multi_string(
    "calclip_flag", [], "A flag for bench_smollm2_step only (e.g. --calclip_flag=--precision=bf16)."
)
_SKIP_TRL = flags.DEFINE_bool("skip_trl", False, "Only calclip_jax's runs (no ratios to TRL).")

UPDATES = 4  # minibatch updates per RL step: the workload's


def peak_rss_gb(cmd: list[str]) -> tuple[dict[str, Any], float]:
    """Runs a benchmark: (its last stdout line as JSON, the process's own peak RSS in GB, from
    `wait4`; stderr goes to a temporary file, so neither pipe can fill up)."""
    with tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, text=True)
        out = proc.stdout.read() if proc.stdout else ""
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        if proc.returncode:
            err.seek(0)
            sys.exit(f"{' '.join(cmd)} failed ({proc.returncode}):\n{err.read()[-3000:]}")
    return json.loads(out.strip().splitlines()[-1]), usage.ru_maxrss / 2**20


def ours_figures(r: dict[str, Any]) -> dict[str, float]:
    return {
        "step_s": r["step_time_s"]["median"],
        "rollout_s": r["rollout_s"]["median"],
        "logprobs_s": r["logprobs_s"]["median"],
        "update_s": r["policy_update_s"]["median"],
        "rollout_tokens_per_s": r["rollout_gen_tokens_per_s"],
    }


def trl_figures(r: dict[str, Any]) -> dict[str, float]:
    m = r["median"]
    return {
        "step_s": m["step_s"],
        "rollout_s": m["gen_s"],
        "logprobs_s": m["ref_logp_s"] + m.get("old_logp_s", 0.0),
        "update_s": m["update_s"],
        "rollout_tokens_per_s": m["gen_slot_tokens_per_s"],
    }


def noisy(result: dict[str, Any]) -> bool:
    noise = result.get("cpu_noise")
    return noise is not None and is_noisy(noise)


def measured(cmd: list[str], name: str) -> tuple[dict[str, Any], float]:
    result, rss = peak_rss_gb(cmd)
    if noisy(result):
        print(f"  {name}: disturbed by other processes; repeating once", flush=True)
        result, rss = peak_rss_gb(cmd)
    return result, rss


def floor(anchors: str) -> dict[str, Any]:
    """trl_flops_floor.py's JSON (this interpreter: it has JAX, whose GEMM rate is the best)."""
    script = os.path.join(anchors, "trl_flops_floor.py")
    out = subprocess.run(
        [sys.executable, script, "--updates", str(UPDATES)],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str]) -> None:
    del argv
    trl_bench = os.path.join(_ANCHORS.value, "trl_grpo_bench.py")
    if not _SKIP_TRL.value:
        for path in (trl_bench, _TRL_PYTHON.value):
            if not os.path.exists(path):
                sys.exit(f"{path} not found: run `bash {_ANCHORS.value}/trl_setup.sh` first")
    fl = floor(_ANCHORS.value)
    rate = max(fl["gemm_gflops"].get(lib) or 0.0 for lib in ("numpy", "jax", "torch")) * 1e9
    minimal = fl["flops"]["minimal"]
    floor_s = minimal["total"] / rate
    update_flops = minimal["policy_forward_backward"]
    print(f"floor: {minimal['total'] / 1e12:.2f} TFLOP necessary at {rate / 1e9:.0f} GFLOP/s "
          f"= {floor_s:.1f} s", flush=True)  # fmt: skip
    steps = [f"--steps={_STEPS.value}", f"--warmup={_WARMUP.value}"]
    commands = {
        "calclip_jax": [
            *(sys.executable, "-m", "benchmarks.bench_smollm2_step"),
            *steps,
            f"--wait_idle={_WAIT_IDLE.value}",
            *_OURS.value,
        ],
        "trl": [
            *(_TRL_PYTHON.value, trl_bench, *steps, "--prompts=16", "--num_generations=8"),
            *("--max_completion_length=32", f"--updates_per_step={UPDATES}"),
        ],
    }
    names = ["calclip_jax"] + ([] if _SKIP_TRL.value else ["trl"])
    pairs = []
    for i in range(_PAIRS.value):
        order = names if i % 2 == 0 else names[::-1]
        got = {}
        for name in order:
            result, rss = measured(commands[name], name)
            figs = (ours_figures if name == "calclip_jax" else trl_figures)(result)
            got[name] = {**figs, "peak_rss_gb": rss}
        ours = got["calclip_jax"]
        pair: dict[str, Any] = {
            **got,
            "step_over_floor": ours["step_s"] / floor_s,
            "update_gemm_share": update_flops / ours["update_s"] / rate,
        }
        if "trl" in got:
            pair["ratio"] = {k: ours[k] / got["trl"][k] for k in ours if got["trl"][k]}
        pairs.append(pair)
        line = f"pair {i + 1}: step/floor {pair['step_over_floor']:.2f}, update at "
        line += f"{pair['update_gemm_share']:.0%} of the GEMM rate"
        if "ratio" in pair:
            line += ", " + ", ".join(f"{k} {v:.3f}x" for k, v in pair["ratio"].items())
        print(line, flush=True)
        for name in order:
            print("  " + name + ": " + ", ".join(f"{k} {v:.4g}" for k, v in got[name].items()),
                  flush=True)  # fmt: skip
    keys = ("step_over_floor", "update_gemm_share")
    result = {
        "cpu": cpu_description(),
        "floor": {
            "seconds": floor_s,
            "gflops": rate / 1e9,
            "tflop_minimal": minimal["total"] / 1e12,
        },
        "pairs": pairs,
        "median": {k: statistics.median(p[k] for p in pairs) for k in keys},
    }
    if "ratio" in pairs[0]:
        result["median_ratio"] = {
            k: statistics.median(p["ratio"][k] for p in pairs) for k in pairs[0]["ratio"]
        }
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    app.run(main)
