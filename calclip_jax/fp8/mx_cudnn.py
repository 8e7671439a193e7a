"""MX GEMMs through ``jax.nn.scaled_matmul`` (cuDNN block-scaled GEMM, E8M0 scales) on CUDA.

The choice is made per lowering platform (``lax.platform_dependent``): a program lowered for
``cuda`` holds ``scaled_matmul`` (custom call ``__op$block_scaled_dot``) when ``cudnn_mx_enabled``,
every other platform (cpu, tpu, rocm) the portable chunked float8 dots. cuDNN's block-scaled GEMM
needs compute capability >= 10 (Blackwell); Hopper (H100 / H200, sm_90) lacks it, and a program
exported for ``cuda`` does not say which GPU will run it. So ``cudnn_mx_enabled`` is, unless set
with ``use_cudnn_mx``, True only where every local CUDA device has compute capability >= 10: a
``cuda`` export from a CPU or a Hopper holds the chunked dots, which every CUDA GPU runs (float8
cuBLASLt GEMMs). ``use_cudnn_mx(True)`` puts ``scaled_matmul`` into ``cuda`` lowerings anyway
(e.g. exporting for Blackwell from elsewhere; ``jax.export`` then needs
``DisabledSafetyCheck.custom_call("__op$block_scaled_dot")``, a target without a compatibility
guarantee). The setting is read at trace time (a function jitted and traced before keeps its
program). ``scaled_matmul`` itself runs on CPU from jax 0.11 (a dequantize-and-dot
decomposition); jax 0.10 has no CPU or TPU lowering for it, so with cuDNN MX enabled a single
export for both ``cuda`` and ``tpu`` fails there (export one platform at a time).
"""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Callable, Iterator

import jax
import jax.numpy as jnp
from jax import lax

from calclip_jax.fp8.grouping import MX_BLOCK
from calclip_jax.fp8.quantize import QuantizedArray

CUDNN_MX_CALL = "__op$block_scaled_dot"  # the custom call jax.nn.scaled_matmul lowers to on cuda
_OVERRIDE: contextvars.ContextVar[bool | None] = contextvars.ContextVar("cudnn_mx", default=None)


@contextlib.contextmanager
def use_cudnn_mx(enabled: bool | None) -> Iterator[None]:
    """Within the block, ``cuda`` lowerings of MX GEMMs use cuDNN (True), the chunked dots
    (False), or the local devices decide (None)."""
    token = _OVERRIDE.set(enabled)
    try:
        yield
    finally:
        _OVERRIDE.reset(token)


def local_cuda_supports_mx() -> bool:
    """True when there are local CUDA devices and all have compute capability >= 10."""
    devices = [d for d in jax.devices() if d.platform == "gpu"]
    try:
        return bool(devices) and all(float(d.compute_capability) >= 10.0 for d in devices)
    except (AttributeError, TypeError, ValueError):  # no capability, or a ROCm "gfx..." name
        return False


def cudnn_mx_enabled() -> bool:
    """Whether ``cuda`` lowerings of MX GEMMs use cuDNN (see the module docstring)."""
    override = _OVERRIDE.get()
    return local_cuda_supports_mx() if override is None else override


def scaled_matmul_gemm(a: QuantizedArray, b: QuantizedArray) -> jnp.ndarray:
    """float32 ``bmk,bnk->bmn`` of two MX operands by ``jax.nn.scaled_matmul`` (K zero-padded to
    a multiple of 32)."""
    k = a.values.shape[-1]
    pad = (0, 0), (0, 0), (0, -k % MX_BLOCK)
    values = [jnp.pad(op.values, pad) for op in (a, b)]
    scales = [op.scale.astype(jnp.float8_e8m0fnu) for op in (a, b)]
    return jax.nn.scaled_matmul(*values, *scales, preferred_element_type=jnp.float32)


def mx_gemm(
    a: QuantizedArray,
    b: QuantizedArray,
    portable: Callable[[QuantizedArray, QuantizedArray], jnp.ndarray],
) -> jnp.ndarray:
    """``scaled_matmul_gemm`` where lowered for ``cuda`` with cuDNN MX enabled, else
    ``portable(a, b)``."""
    if not cudnn_mx_enabled():
        return portable(a, b)
    return lax.platform_dependent(a, b, cuda=scaled_matmul_gemm, default=portable)
