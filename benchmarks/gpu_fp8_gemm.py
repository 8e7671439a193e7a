"""GPU benchmark: BF16 vs FP8 (tensor, channel, block, MX) GEMMs and a ~1B-parameter train step.

Run on an H100/H200 (jax[cuda]): ``python -m benchmarks.gpu_fp8_gemm``, sized to finish within
10 minutes on an H200 (mostly compiling five programs of a 16-layer model; not yet run on one).
Every line is printed as soon as it is measured (JSON), so a run cut short keeps what it
measured. Sections:
1. ``gemm``: one n x n x n GEMM forward + both gradients (``fp8_dot_general``) per precision:
   median step time, TFLOP/s (3 GEMMs of 2 n^3), speed-up over BF16.
2. ``hlo``: custom calls in each compiled train step (cuBLASLt FP8 GEMMs are
   ``__cublas$lt$matmul$f8``; BF16 GEMMs ``__cublas$gemm`` / ``__cublas$lt$matmul``; cuDNN
   block-scaled ``__cudnn$blockScaledDot``), so one sees which GEMMs really ran in float8; for
   MX, ``cudnn_mx``: whether its GEMMs took cuDNN (only on compute capability >= 10, not H200).
3. ``step``: the train step of the ``llama3_1b`` shapes (1.24B parameters, tied head): forward,
   backward (every dense GEMM per the preset, lm_head and attention BF16), AdamW on float32
   master weights; median step time, model TFLOP/s (6 x dense params x tokens), speed-up.
``--smoke`` runs everything at toy sizes (any backend, e.g. this CPU) to check the script.
XLA flags: unless XLA_FLAGS is set, ``--xla_gpu_enable_triton_gemm=false`` keeps GEMMs out of
Triton fusions so the cuBLAS(Lt) rewrite sees them (set XLA_FLAGS yourself to compare).
"""

from __future__ import annotations

import os

os.environ.setdefault("XLA_FLAGS", "--xla_gpu_enable_triton_gemm=false")

import collections
import json
import re

import jax
import jax.numpy as jnp
import numpy as np
import optax
from absl import app, flags

from benchmarks.timing import time_calls, timed
from calclip_jax.fp8 import PrecisionRecipe, fp8_dot_general, matmul_precisions
from calclip_jax.fp8.mx_cudnn import cudnn_mx_enabled
from calclip_jax.model import ModelConfig
from calclip_jax.train.forward import batch_logprobs
from calclip_jax.train.state import init_variables

PRESETS = ("bf16", "fp8_tensor", "fp8_channel", "fp8_block", "fp8_mx")
DN = (((1,), (0,)), ((), ()))

_N = flags.DEFINE_integer("n", 8192, "GEMM size of section 1.")
_MODEL = flags.DEFINE_string("model", "llama3_1b", "ModelConfig preset of the train step.")
_LAYERS = flags.DEFINE_integer("layers", None, "Override the model's layer count.")
_BATCH = flags.DEFINE_integer("batch", 4, "Sequences per train step.")
_SEQ = flags.DEFINE_integer("seq", 2048, "Tokens per sequence.")
_REPS = flags.DEFINE_integer("reps", 10, "Timed calls per program (median).")
_PRESETS = flags.DEFINE_list("presets", list(PRESETS), "Precision presets to compare.")
_SMOKE = flags.DEFINE_bool("smoke", False, "Toy sizes: check the script on any backend.")


def emit(record: dict) -> None:
    print(json.dumps(record), flush=True)


def custom_calls(hlo: str) -> dict[str, int]:
    return dict(collections.Counter(re.findall(r'custom_call_target="([^"]+)"', hlo)))


def gemm_step(preset: str):
    """Jitted (loss, (dx, dw)) of one `fp8_dot_general` in `preset`, the cotangent `c` an
    argument: a closed-over n x n array would be a constant XLA folds the gradient's
    quantization into at compile time (minutes at n = 8192), and the timing would leave it out."""
    act, wgt, grad = matmul_precisions(PrecisionRecipe.preset(preset), "dense")

    def loss(x, w, c):
        y = fp8_dot_general(x, w, DN, lhs_prec=act, rhs_prec=wgt, grad_prec=grad)
        return jnp.sum(y * c)

    return jax.jit(jax.value_and_grad(loss, (0, 1)))


def gemm_section(n: int, reps: int) -> None:
    kx, kw, kc = jax.random.split(jax.random.key(0), 3)
    x = jax.random.normal(kx, (n, n), jnp.float32)
    w = jax.random.normal(kw, (n, n), jnp.float32) / n**0.5
    c = jax.random.normal(kc, (n, n), jnp.float32)
    base = None
    for preset in _PRESETS.value:
        try:
            step = gemm_step(preset)
            compiled, compile_s = timed(lower_compile, step, x, w, c, wait=False)
            t = time_calls(compiled, x, w, c, reps=reps)
        except Exception as err:  # one preset's failure keeps the others' figures
            emit({"section": "gemm", "preset": preset, "error": f"{type(err).__name__}: {err}"})
            continue
        base = t if preset == "bf16" else base
        emit(
            {
                "section": "gemm",
                "preset": preset,
                "n": n,
                "ms": round(t * 1e3, 3),
                "compile_s": round(compile_s, 2),
                "tflops": round(3 * 2 * n**3 / t / 1e12, 1),
                "speedup_vs_bf16": None if base is None else round(base / t, 3),
            }
        )


def dense_params(cfg: ModelConfig) -> int:
    per_layer = sum(d_in * d_out for d_in, d_out in cfg.dense_features().values())
    return cfg.n_layers * per_layer + cfg.vocab_size * cfg.d_model  # + the (tied) head


def make_train_step(cfg: ModelConfig, recipe: PrecisionRecipe, tx: optax.GradientTransformation):
    def loss(params, batch):
        logp, _, _ = batch_logprobs(cfg, recipe, params, None, batch, chunk=512)
        return -jnp.sum(logp) / jnp.sum(batch["response_mask"])

    def step(params, opt_state, batch):
        value, grads = jax.value_and_grad(loss)(params, batch)
        updates, opt_state = tx.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, value

    return jax.jit(step, donate_argnums=(0, 1))


def lower_compile(fn, *args):
    """The executable of jitted `fn` for `args`, compiled ahead of time."""
    return fn.lower(*args).compile()


def step_section(cfg: ModelConfig, batch_size: int, seq: int, reps: int) -> None:
    rng = np.random.default_rng(0)
    tokens = rng.integers(0, cfg.vocab_size, (batch_size, seq)).astype(np.int32)
    batch = {
        "tokens": jnp.asarray(tokens),
        "positions": jnp.broadcast_to(jnp.arange(seq, dtype=jnp.int32), (batch_size, seq)),
        "attn_mask": jnp.ones((batch_size, seq), jnp.int32),
        "response_mask": jnp.ones((batch_size, seq), jnp.int32),
    }
    flops = 6 * dense_params(cfg) * batch_size * seq
    emit({"section": "step", "model_params": dense_params(cfg), "tokens": batch_size * seq})
    tx = optax.adamw(1e-5)
    base = None
    for preset in _PRESETS.value:
        try:
            t = step_preset(cfg, preset, tx, batch, reps)
        except Exception as err:  # one preset's failure keeps the others' figures
            emit({"section": "step", "preset": preset, "error": f"{type(err).__name__}: {err}"})
            continue
        base = t if preset == "bf16" else base
        emit(
            {
                "section": "step",
                "preset": preset,
                "ms": round(t * 1e3, 2),
                "model_tflops": round(flops / t / 1e12, 1),
                "speedup_vs_bf16": None if base is None else round(base / t, 3),
            }
        )


FP8_GEMM_CALL = "__cublas$lt$matmul$f8"  # cuBLASLt's float8 GEMM


def compiled_memory(compiled) -> dict[str, float]:
    """GiB of the compiled program's buffers (XLA's memory analysis)."""
    m = compiled.memory_analysis()
    fields = ("argument", "output", "temp", "generated_code")
    return {f: round(getattr(m, f"{f}_size_in_bytes", 0) / 2**30, 3) for f in fields}


def step_preset(cfg: ModelConfig, preset: str, tx: optax.GradientTransformation, batch: dict,
                reps: int) -> float:  # fmt: skip
    """Compiles and times `preset`'s train step; emits its custom calls, memory and, on a GPU,
    whether every FP8 preset's step holds cuBLASLt FP8 GEMMs."""
    recipe = PrecisionRecipe.preset(preset)
    params, _ = init_variables(cfg, recipe, jax.random.key(0))
    opt_state = tx.init(params)
    step = make_train_step(cfg, recipe, tx)
    compiled, compile_s = timed(lower_compile, step, params, opt_state, batch, wait=False)
    calls = custom_calls(compiled.as_text())
    record = {"section": "hlo", "preset": preset, "custom_calls": calls}
    record.update(compile_s=round(compile_s, 1), memory_gib=compiled_memory(compiled))
    if preset == "fp8_mx":  # cuDNN block-scaled GEMMs only where every GPU has them (sm_100+)
        record["cudnn_mx"] = cudnn_mx_enabled()
    if jax.default_backend() == "gpu" and preset != "bf16":
        record["fp8_gemms"] = calls.get(FP8_GEMM_CALL, 0)
        record["fp8_gemm_check"] = "ok" if record["fp8_gemms"] else f"no {FP8_GEMM_CALL}"
    emit(record)
    state = [params, opt_state]

    def run() -> jax.Array:
        state[0], state[1], value = compiled(state[0], state[1], batch)
        return value

    return time_calls(run, reps=reps)


def main(argv: list[str]) -> None:
    del argv
    emit(
        {
            "jax": jax.__version__,
            "backend": jax.default_backend(),
            "devices": [str(d) for d in jax.devices()],
            "xla_flags": os.environ.get("XLA_FLAGS"),
        }
    )
    smoke = _SMOKE.value
    cfg = ModelConfig.preset("tiny" if smoke else _MODEL.value)
    if _LAYERS.value:
        cfg = ModelConfig.from_dict({**cfg.to_dict(), "n_layers": _LAYERS.value})
    reps = 2 if smoke else _REPS.value
    gemm_section(256 if smoke else _N.value, reps)
    step_section(cfg, 2 if smoke else _BATCH.value, 16 if smoke else _SEQ.value, reps)


if __name__ == "__main__":
    app.run(main)
