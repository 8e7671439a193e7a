"""Export of our parameter tree as a Hugging Face checkpoint directory (config.json +
model.safetensors), the inverse of `hf_import.load_hf_checkpoint`.

Our kernels are [in, out] and HF Linear weights [out, in], so they are transposed back; RoPE uses
HF's rotate_half layout in both (a GGUF's interleaved q/k rows were undone on import), RMSNorm
weights are plain scales in both, a tied head writes no lm_head.weight, and a fused gate/up
kernel (`mlp.fuse_gate_up`) is split back into gate_proj and up_proj. Float32 is written exactly:
the import of the export is bit-identical to the tree.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np
from flax import traverse_util
from safetensors.numpy import save_file

from calclip_jax.model.config import ModelConfig
from calclip_jax.model.gguf_import import gguf_hf_extras
from calclip_jax.model.hf_config import config_from_hf, read_hf_config
from calclip_jax.model.hf_import import expected_tensors, is_linear_weight
from calclip_jax.model.mlp import GATE_UP
from calclip_jax.model.safetensors_io import SINGLE_FILE

DTYPES: dict[str, Any] = {"float32": np.float32, "bfloat16": ml_dtypes.bfloat16}
CONFIG_FILE = "config.json"
DEFAULT_MAX_POSITIONS = 4096  # max_position_embeddings when the source does not say


def hf_family(cfg: ModelConfig) -> str:
    """The HF model_type that holds `cfg`: qwen3 (qk_norm), qwen2 (q/k/v biases), else llama."""
    if cfg.qk_norm and cfg.attention_bias:
        raise ValueError("no supported HF architecture has both qk_norm and q/k/v-only biases")
    return "qwen3" if cfg.qk_norm else "qwen2" if cfg.attention_bias else "llama"


def hf_config_dict(
    cfg: ModelConfig, dtype: str = "float32", base: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """config.json of `cfg` with torch_dtype `dtype`.

    `base` (the source checkpoint's config.json, or extra keys such as token ids and
    max_position_embeddings) is kept, with the architecture's keys set from `cfg`. Raises
    ValueError unless the HF import reads back exactly `cfg`.
    """
    if dtype not in DTYPES:
        raise ValueError(f"dtype {dtype!r}; allowed: {sorted(DTYPES)}")
    family = hf_family(cfg)
    arch = {"llama": "LlamaForCausalLM", "qwen2": "Qwen2ForCausalLM", "qwen3": "Qwen3ForCausalLM"}
    out = {"max_position_embeddings": DEFAULT_MAX_POSITIONS, **(base or {})}
    out.pop("dtype", None)  # transformers >= 5 spells torch_dtype so; one key, set below
    out.update(
        architectures=[arch[family]],
        model_type=family,
        vocab_size=cfg.vocab_size,
        hidden_size=cfg.d_model,
        intermediate_size=cfg.d_ff,
        num_hidden_layers=cfg.n_layers,
        num_attention_heads=cfg.n_heads,
        num_key_value_heads=cfg.n_kv_heads,
        head_dim=cfg.head_dim,
        hidden_act="silu",
        rms_norm_eps=cfg.norm_eps,
        rope_theta=cfg.rope_theta,
        tie_word_embeddings=cfg.tie_embeddings,
        torch_dtype=dtype,
    )
    if family != "qwen2":  # Qwen2's q/k/v biases are implied; llama's / qwen3's key adds o_proj's
        out["attention_bias"] = False
    if family != "llama":
        out["use_sliding_window"] = False
    for key in ("rope_scaling", "rope_parameters"):  # plain RoPE (hf_config refuses any other)
        out.pop(key, None)
    back = config_from_hf(out, has_lm_head=not cfg.tie_embeddings)
    if back != cfg:
        raise ValueError(f"config.json would import as {back}, not {cfg}")
    return out


def source_config(checkpoint: str | Path) -> dict[str, Any]:
    """The `base_config` of an export from a resolved checkpoint: an HF directory's config.json,
    a GGUF's context length and token ids (`gguf_hf_extras`)."""
    path = Path(checkpoint)
    return gguf_hf_extras(path) if path.is_file() else read_hf_config(path)


def _unfused(flat: dict[tuple[str, ...], Any]) -> dict[tuple[str, ...], Any]:
    """`flat` with each fused gate/up kernel [D, 2F] split back into gate_proj / up_proj."""
    out = {}
    for path, value in flat.items():
        if path[-2:] == (GATE_UP, "kernel"):
            both = np.asarray(value).reshape(value.shape[0], -1, 2)
            out[(*path[:-2], "gate_proj", "kernel")] = both[..., 0]
            out[(*path[:-2], "up_proj", "kernel")] = both[..., 1]
        else:
            out[path] = value
    return out


def hf_tensors(cfg: ModelConfig, params: Any, dtype: str = "float32") -> dict[str, np.ndarray]:
    """HF name -> tensor in HF layout and `dtype`, for every tensor `cfg` needs.

    Raises ValueError naming a missing, mis-shaped or unexported parameter.
    """
    flat = _unfused(traverse_util.flatten_dict(dict(params)))
    out = {}
    for name, path, shape in expected_tensors(cfg):
        if path not in flat:
            raise ValueError(f"params lack {'/'.join(path)} (for {name})")
        array = np.asarray(flat.pop(path), dtype=np.float32)
        if array.shape != shape:
            raise ValueError(f"param {'/'.join(path)} has shape {array.shape}, expected {shape}")
        array = array.T if is_linear_weight(name) else array
        out[name] = np.ascontiguousarray(array.astype(DTYPES[dtype]))
    if flat:
        raise ValueError(f"param {'/'.join(next(iter(flat)))} has no HF tensor for config {cfg}")
    return out


def save_hf_checkpoint(
    out: str | Path,
    cfg: ModelConfig,
    params: Any,
    dtype: str = "float32",
    base_config: Mapping[str, Any] | None = None,
) -> list[Path]:
    """Writes out/config.json and out/model.safetensors (`dtype`); returns the two paths.

    `base_config`: see `hf_config_dict`. `out` is created if needed.
    """
    out = Path(out)
    config = hf_config_dict(cfg, dtype, base_config)
    tensors = hf_tensors(cfg, params, dtype)
    out.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(out / SINGLE_FILE), metadata={"format": "pt"})
    (out / CONFIG_FILE).write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    return [out / CONFIG_FILE, out / SINGLE_FILE]
