"""Checkpoint resolution: a built-in name, a .gguf file or an HF directory -> (config, params)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jax.numpy as jnp

from calclip_jax.model.config import ModelConfig
from calclip_jax.model.gguf_import import gguf_config, load_gguf_checkpoint
from calclip_jax.model.hf_config import config_from_hf, read_hf_config
from calclip_jax.model.hf_import import load_hf_checkpoint
from calclip_jax.model.safetensors_io import tensor_files
from calclip_jax.shipped import SHIPPED, shipped_file


def resolve_checkpoint(name_or_path: str | Path) -> Path:
    """The checkpoint path of a built-in name (a file shipped by a pip package, found through its
    distribution metadata without importing it), a .gguf file or an HF checkpoint directory."""
    if str(name_or_path) in SHIPPED:
        return shipped_file(str(name_or_path))
    path = Path(name_or_path)
    if path.is_file() and path.suffix == ".gguf":
        return path
    if path.is_dir() and (path / "config.json").exists():
        return path
    raise ValueError(
        f"unknown checkpoint {str(name_or_path)!r}: not a built-in name {sorted(SHIPPED)}, "
        "a .gguf file or a directory with config.json + safetensors"
    )


def load_checkpoint(
    name_or_path: str | Path, dtype: Any = jnp.float32
) -> tuple[ModelConfig, dict[str, Any]]:
    """(ModelConfig, params) of a built-in name, a .gguf file or an HF directory."""
    path = resolve_checkpoint(name_or_path)
    if path.is_file():
        return load_gguf_checkpoint(path, dtype)
    return load_hf_checkpoint(path, dtype)


def checkpoint_config(name_or_path: str | Path) -> ModelConfig:
    """The ModelConfig of a checkpoint, read from its metadata (no tensors loaded)."""
    path = resolve_checkpoint(name_or_path)
    if path.is_file():
        return gguf_config(path)
    has_lm_head = "lm_head.weight" in tensor_files(path)  # as `load_hf_checkpoint` decides
    return config_from_hf(read_hf_config(path), has_lm_head=has_lm_head)
