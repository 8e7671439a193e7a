"""The prepared GPU run (`benchmarks.gpu_run`) runs end to end at toy sizes on this CPU: one JSON
file with every section, a figure or a recorded error for every preset and arm, the float8 GEMM
check "not applicable on cpu", the Markdown tables; a spent budget skips with its reason, the
deadline ends the process after recording why; the GEMM section passes the cotangent as an
argument (no n x n constant for XLA to fold)."""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import re
import subprocess
import sys
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
from experiments_testutil import slice_gguf
from subprocess_env import one_device_env

from benchmarks.gpu_gemm import gemm_step
from benchmarks.gpu_hlo import custom_calls, fp8_gemm_check
from benchmarks.gpu_train_step import LOGPROB_CHUNK, initial_params, random_batch, step_logprobs
from calclip_jax.fp8 import PrecisionRecipe
from calclip_jax.model import ModelConfig
from calclip_jax.shipped import shipped_file

PRESETS = ("bf16", "fp8_tensor", "fp8_channel", "fp8_block", "fp8_mx")
ARMS = ("bf16", "fp8_block_tis_calib")
# section -> (the row's name key, its names, the figure a row that ran must have)
EXPECTED = {
    "gemm": ("preset", PRESETS, "fwd_bwd_ms"),
    "step": ("preset", PRESETS, "step_ms"),
    "fp8_check": ("preset", PRESETS[1:], "status"),
    "rl": ("arm", ARMS, "step_ms"),
}


def real_model_slice(tmp_path: Path) -> str | None:
    """A 1-layer slice of the shipped SmolLM2 GGUF (CI's Python 3.11 leg has it), or None where
    gguf or the file is missing: gpu_run --smoke then runs a toy model, so the test never skips."""
    if importlib.util.find_spec("gguf") is None:
        return None
    try:
        src = shipped_file("smollm2-135m-instruct")
    except FileNotFoundError:
        return None
    return slice_gguf(str(src), str(tmp_path / "smollm2_1l.gguf"), 1)


def run_gpu_run(out: Path, *args: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "benchmarks.gpu_run", f"--out={out}", *args]
    return subprocess.run(
        cmd, capture_output=True, text=True, check=False, timeout=600, env=one_device_env()
    )


def test_gpu_run_smoke_writes_every_section(tmp_path):
    checkpoint = real_model_slice(tmp_path)
    args = ["--smoke"] + ([f"--rl_checkpoint={checkpoint}"] if checkpoint else [])
    proc = run_gpu_run(tmp_path / "out", *args)
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = json.loads((tmp_path / "out" / "gpu_run.json").read_text())
    header = data["header"]
    assert header["device_kind"] and header["jax"] and "triton_gemm=false" in header["xla_flags"]
    assert data["finished"] == {"outcome": "completed", "fp8_check": "not applicable on cpu"}
    errors = []
    for section, (key, names, figure) in EXPECTED.items():
        assert data["sections"][section]["status"] == "done", section
        rows = data["sections"][section]["rows"]
        assert [r[key] for r in rows] == list(names), section
        for row in rows:
            assert isinstance(row.get(figure), (int, float, str)) or row.get("error"), row
            errors += [f"{section} {row[key]}: {row['error']}"] if "error" in row else []
    assert not errors, errors  # on this CPU every preset and arm runs
    for row in data["sections"]["fp8_check"]["rows"]:
        assert row["status"] == "not applicable on cpu"
    for row in data["sections"]["step"]["rows"]:
        assert row["memory_gib"]["temp"] >= 0 and row["compile_s"] >= 0
    rl_models = {r["model"] for r in data["sections"]["rl"]["rows"]}
    assert rl_models == {checkpoint or "toy (fresh, 1 layer)"}
    printed = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    assert len([r for r in printed if "preset" in r or "arm" in r]) == sum(
        len(names) for _, names, _ in EXPECTED.values()
    )
    table = (tmp_path / "out" / "gpu_run.md").read_text()
    for section, (key, _, figure) in EXPECTED.items():
        assert f"## {section}" in table
        assert re.search(rf"^\| {key} \|.* {figure} \|", table, re.M), section


def test_gpu_run_skips_what_a_spent_budget_leaves(tmp_path):
    proc = run_gpu_run(tmp_path, "--smoke", "--sections=gemm", "--gemm_budget_s=0")
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = json.loads((tmp_path / "gpu_run.json").read_text())
    gemm = data["sections"]["gemm"]["rows"]
    assert [r["preset"] for r in gemm] == list(PRESETS)
    assert all(r["skipped"].startswith("section budget") for r in gemm)
    assert {s: data["sections"][s]["status"] for s in EXPECTED} == {
        "gemm": "done", "step": "not requested", "fp8_check": "not requested", "rl": "not requested"
    }  # fmt: skip


def test_deadline_ends_the_process_after_recording_why(tmp_path):
    code = (
        "import time\n"
        "from benchmarks.gpu_budget import start_deadline\n"
        "from benchmarks.gpu_report import GpuReport\n"
        f"report = GpuReport({str(tmp_path)!r}, {{'device_kind': 'none'}}, ['gemm'])\n"
        "start_deadline(0.2, lambda: report.finish('deadline of 0.2 s'))\n"
        "time.sleep(30)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 3, proc.stderr[-3000:]
    data = json.loads((tmp_path / "gpu_run.json").read_text())
    assert data["finished"] == {"outcome": "deadline of 0.2 s"}
    assert "deadline of 0.2 s" in (tmp_path / "gpu_run.md").read_text()


def test_gemm_section_closes_over_no_operand():
    """No [n, n] constant in the lowered GEMM program (a closed-over cotangent is one: 1 found
    before the fix)."""
    x = jnp.ones((64, 64))
    for preset in PRESETS:
        text = gemm_step(preset).lower(x, x, x).as_text()
        assert not re.search(r"constant dense<[^>]*> : tensor<64x64x", text), preset


def test_fp8_gemm_check_names_what_the_program_holds():
    hlo = (
        'custom-call(a, b), custom_call_target="__cublas$lt$matmul$f8"\n'
        'custom-call(c, d), custom_call_target="__cublas$gemm"\n'
    )
    calls = custom_calls(hlo)
    assert calls == {"__cublas$lt$matmul$f8": 1, "__cublas$gemm": 1}
    assert fp8_gemm_check(calls, "gpu") == {"status": "ok", "fp8_gemms": 1}
    bf16_only = {"__cublas$gemm": 3}
    assert fp8_gemm_check(bf16_only, "gpu") == {
        "status": "missing", "fp8_gemms": 0, "calls_found": bf16_only
    }  # fmt: skip
    assert fp8_gemm_check(calls, "cpu") == {"status": "not applicable on cpu"}


def test_step_section_computes_the_trainers_logprobs():
    """gpu_train_step builds the trainer's forward from calclip_jax.model alone (calclip_jax.train
    needs ml_collections): its params and log-probs are bitwise init_variables' and
    batch_logprobs' (an lm_head in chunks and an FP8 one)."""
    from calclip_jax.train.forward import batch_logprobs
    from calclip_jax.train.state import init_variables

    cfg = ModelConfig.from_dict({**ModelConfig.preset("tiny").to_dict(), "n_layers": 1})
    params = initial_params(cfg)
    want = init_variables(cfg, PrecisionRecipe.preset("bf16"), jax.random.key(0))[0]
    assert jax.tree.all(jax.tree.map(lambda a, b: bool(jnp.array_equal(a, b)), params, want))
    batch = random_batch(cfg, 2, 16)
    fp8 = PrecisionRecipe.preset("fp8_tensor")
    recipes = {
        "bf16": PrecisionRecipe.preset("bf16"),
        "fp8_block": PrecisionRecipe.preset("fp8_block"),
        "fp8_tensor, FP8 lm_head": dataclasses.replace(fp8, lm_head=fp8.weights),
    }
    for preset, recipe in recipes.items():
        got = jax.jit(lambda p, r=recipe: step_logprobs(cfg, r, p, batch))(params)
        ref = jax.jit(
            lambda p, r=recipe: batch_logprobs(cfg, r, p, None, batch, chunk=LOGPROB_CHUNK)[0]
        )(params)
        np.testing.assert_array_equal(np.asarray(got), np.asarray(ref), err_msg=preset)
