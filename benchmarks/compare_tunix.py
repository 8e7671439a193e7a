"""calclip_jax against Tunix on Tunix's GRPO benchmark workload: interleaved pairs, ratios.

Run from the repo root (Tunix's venv first, once: ``bash ../shared/anchors/tunix_setup.sh``):
``python -m benchmarks.compare_tunix --pairs=3`` (about 1 minute a pair). Each pair runs
`benchmarks/bench_grpo_step.py` and the anchor's `tunix_grpo_bench.py` as two fresh processes
(their order alternates from pair to pair), each after waiting for an idle machine; a run that
other processes disturbed (> 0.1 core) is repeated once. Prints one line per pair and a final
JSON line: the machine's CPU and the medians over pairs of each ratio, calclip_jax / Tunix (time:
< 1 is faster; sampler tokens/s: > 1 is faster). The ratios depend on the CPU (the README's
figures name theirs).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
from typing import Any

from absl import app, flags

from benchmarks.machine_noise import is_noisy
from calclip_jax.workdir.run_info import cpu_description

_PAIRS = flags.DEFINE_integer("pairs", 3, "Interleaved (calclip_jax, Tunix) pairs.")
_ANCHORS = flags.DEFINE_string(
    "anchors", "../shared/anchors", "Folder of tunix_grpo_bench.py (the performance anchor)."
)
_TUNIX_PYTHON = flags.DEFINE_string(
    "tunix_python",
    os.path.expanduser("~/.cache/tunix-venv/bin/python"),
    "Interpreter of Tunix's venv (made by the anchor's tunix_setup.sh).",
)
_WAIT_IDLE = flags.DEFINE_float("wait_idle", 60.0, "Seconds each run waits for an idle machine.")
_EXTRA = flags.DEFINE_list("bench_flags", [], "Flags passed to both benchmarks (e.g. steps=10).")
_OURS = flags.DEFINE_list(
    "calclip_flags", [], "Flags passed to bench_grpo_step only (e.g. share_prompt)."
)


def run_json(cmd: list[str]) -> dict[str, Any]:
    """Runs a benchmark; its last stdout line is its JSON result."""
    proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
    if proc.returncode:
        sys.exit(f"{' '.join(cmd)} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def noisy(result: dict[str, Any]) -> bool:
    return any(is_noisy(n) for n in result["cpu_noise"].values())


def measured(cmd: list[str], name: str) -> dict[str, Any]:
    result = run_json(cmd)
    if noisy(result):
        print(f"  {name}: disturbed by other processes {result['cpu_noise']}; repeating once",
              flush=True)  # fmt: skip
        result = run_json(cmd)
    return result


def figures(result: dict[str, Any]) -> dict[str, float]:
    """The compared medians of one run: seconds per phase, sampler tokens/s."""
    g = result["grpo"]
    ref = g.get("ref_logps_s") or g.get("logprobs_s")
    return {
        "step_s": g["step_time_s"]["median"],
        "rollout_s": g["rollout_s"]["median"],
        "logprobs_s": ref["median"] if ref else 0.0,
        "update_s": g["policy_update_s"]["median"],
        "sampler_tokens_per_s": result["sampler"]["tokens_per_s"]["median"],
    }


def main(argv: list[str]) -> None:
    del argv
    tunix_bench = os.path.join(_ANCHORS.value, "tunix_grpo_bench.py")
    for path in (tunix_bench, _TUNIX_PYTHON.value):
        if not os.path.exists(path):
            sys.exit(f"{path} not found: run `bash {_ANCHORS.value}/tunix_setup.sh` first")
    extra = [f"--{f}" for f in _EXTRA.value] + [f"--wait_idle={_WAIT_IDLE.value}"]
    commands = {
        "calclip_jax": [
            *(sys.executable, "-m", "benchmarks.bench_grpo_step"),
            *extra,
            *(f"--{f}" for f in _OURS.value),
        ],
        "tunix": [_TUNIX_PYTHON.value, tunix_bench, "--quiet", *extra],
    }
    pairs = []
    for i in range(_PAIRS.value):
        order = ("calclip_jax", "tunix") if i % 2 == 0 else ("tunix", "calclip_jax")
        got = {name: figures(measured(commands[name], name)) for name in order}
        ours, theirs = got["calclip_jax"], got["tunix"]
        ratios = {k: ours[k] / theirs[k] for k in theirs if theirs[k]}
        pairs.append({"calclip_jax": got["calclip_jax"], "tunix": got["tunix"], "ratio": ratios})
        print(f"pair {i + 1}: " + ", ".join(f"{k} {v:.3f}x" for k, v in ratios.items()), flush=True)
        for name in order:
            figs = ", ".join(f"{k} {v:.4g}" for k, v in got[name].items())
            print(f"  {name}: {figs}", flush=True)
    median = {k: statistics.median(p["ratio"][k] for p in pairs) for k in pairs[0]["ratio"]}
    result = {"cpu": cpu_description(), "pairs": pairs, "median_ratio": median}
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    app.run(main)
