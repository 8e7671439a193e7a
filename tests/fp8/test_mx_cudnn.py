"""MX GEMMs choose cuDNN's block-scaled GEMM by the platform lowered for, not the local device:
exported for ``cuda`` / ``tpu`` from this CPU, and ``jax.nn.scaled_matmul``'s numbers on CPU
(jax >= 0.11) against the float64 dot of the dequantized operands."""

from __future__ import annotations

import types

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from gemm_reference import assert_close, emulated

from calclip_jax.analysis.dot_dtypes import custom_call_targets, dot_operand_types, exported_text
from calclip_jax.fp8 import TensorPrecision, fp8_dot_general, mx_cudnn, quantize
from calclip_jax.fp8.mx_cudnn import CUDNN_MX_CALL, scaled_matmul_gemm, use_cudnn_mx

DN = (((1,), (0,)), ((), ()))
MX, MX_GRAD = TensorPrecision("e4m3", "mx"), TensorPrecision("e5m2", "mx")
UNCHECKED = [jax.export.DisabledSafetyCheck.custom_call(CUDNN_MX_CALL)]
ARGS = jax.ShapeDtypeStruct((16, 96), jnp.float32), jax.ShapeDtypeStruct((96, 40), jnp.float32)


def _step(x, w):
    """Forward and both gradient GEMMs of one MX fp8_dot_general."""
    y = lambda x, w: fp8_dot_general(x, w, DN, lhs_prec=MX, rhs_prec=MX, grad_prec=MX_GRAD)
    return jax.value_and_grad(lambda x, w: jnp.sum(y(x, w)), (0, 1))(x, w)


def _export(platform: str) -> str:
    """The step exported for ``platform``, traced afresh (the setting is read at trace time)."""
    fresh = jax.jit(lambda x, w: _step(x, w))
    return exported_text(fresh, *ARGS, platforms=(platform,), disabled_checks=UNCHECKED)


def test_cuda_export_from_a_cpu_holds_the_portable_float8_dots():
    """No local Blackwell: the cuda lowering is what every CUDA GPU runs (H100 / H200 included)."""
    assert not mx_cudnn.local_cuda_supports_mx()
    text = _export("cuda")
    assert CUDNN_MX_CALL not in custom_call_targets(text)
    types_ = dot_operand_types(text)
    assert len(types_) == 3 and all(a.startswith("f8") and b.startswith("f8") for a, b in types_)


def test_cudnn_mx_goes_only_into_the_cuda_lowering():
    with use_cudnn_mx(True):
        cuda, tpu = _export("cuda"), _export("tpu")
        x, w = (np.random.default_rng(0).standard_normal(a.shape, np.float32) for a in ARGS)
        on_cpu = jax.jit(lambda x, w: _step(x, w))(x, w)
    assert custom_call_targets(cuda).count(CUDNN_MX_CALL) == 3  # forward, dX, dW
    assert not dot_operand_types(cuda)
    assert CUDNN_MX_CALL not in custom_call_targets(tpu)
    assert len(dot_operand_types(tpu)) == 3
    # Lowered for this CPU, the same setting runs the chunked dots: bitwise the default program.
    default = jax.jit(lambda x, w: _step(x, w))(x, w)
    for got, want in zip(jax.tree.leaves(on_cpu), jax.tree.leaves(default), strict=True):
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


CASES = [([], False), (["9.0"], False), (["10.0"], True), (["10.0", "9.0"], False)]


@pytest.mark.parametrize("capabilities,want", [*CASES, (["gfx942"], False)])
def test_local_devices_decide_by_compute_capability(monkeypatch, capabilities, want):
    """Hopper (9.0) lacks cuDNN block-scaled GEMMs, Blackwell (10.0) has them; ROCm names no
    number; and an explicit ``use_cudnn_mx`` wins."""
    gpus = [types.SimpleNamespace(platform="gpu", compute_capability=c) for c in capabilities]
    cpu = [types.SimpleNamespace(platform="cpu")]
    monkeypatch.setattr(jax, "devices", lambda: gpus or cpu)
    assert mx_cudnn.local_cuda_supports_mx() is want
    assert mx_cudnn.cudnn_mx_enabled() is want
    for setting in (True, False):
        with use_cudnn_mx(setting):
            assert mx_cudnn.cudnn_mx_enabled() is setting
    assert mx_cudnn.cudnn_mx_enabled() is want


def _runs_on_cpu() -> bool:
    """jax.nn.scaled_matmul has a CPU lowering (a dequantize-and-dot decomposition) from 0.11."""
    return tuple(int(v) for v in jax.__version__.split(".")[:2]) >= (0, 11)


@pytest.mark.parametrize("k", [96, 100])
def test_scaled_matmul_on_cpu(k):
    """jax >= 0.11: its numbers equal the float64 dot of the dequantized MX operands within
    float32 accumulation (K padded to 32 with zeros). jax 0.10: it has no CPU lowering."""
    rng = np.random.default_rng(k)
    x, w = rng.standard_normal((8, k)) * 3, rng.standard_normal((5, k))
    a, b = (quantize(jnp.asarray(v, jnp.float32)[None], "e4m3", "mx") for v in (x, w))
    if not _runs_on_cpu():
        with pytest.raises(NotImplementedError, match=r"scaled_matmul.*cpu"):
            scaled_matmul_gemm(a, b)
        return
    for fn in (scaled_matmul_gemm, jax.jit(scaled_matmul_gemm)):
        got = fn(a, b)[0]
        assert_close(got, emulated(x, "e4m3", "mx"), emulated(w, "e4m3", "mx").T)
