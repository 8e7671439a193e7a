"""Import of llama-architecture GGUF checkpoints (llama.cpp format) into our parameter tree.

Tensors are dequantized to float32 with the `gguf` package (optional extra `llm`). The tree and
shape checks are the HF import's (`expected_tensors`): GGUF names are mapped onto HF names, and
llama.cpp's interleaved-RoPE permutation of the q/k projection rows is undone, so the result is
what the HF safetensors import of the same model gives.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import jax.numpy as jnp
import numpy as np

from calclip_jax.gguf_file import import_gguf, open_gguf
from calclip_jax.model.config import ModelConfig
from calclip_jax.model.hf_import import (
    check_names,
    expected_tensors,
    insert_param,
    is_linear_weight,
)

SUPPORTED_TYPES = ("F32", "F16", "BF16", "Q8_0", "Q4_0", "Q4_1")
_TOP = {"model.embed_tokens": "token_embd", "model.norm": "output_norm", "lm_head": "output"}
_LAYER = {
    "input_layernorm": "attn_norm",
    "post_attention_layernorm": "ffn_norm",
    "self_attn.q_proj": "attn_q",
    "self_attn.k_proj": "attn_k",
    "self_attn.v_proj": "attn_v",
    "self_attn.o_proj": "attn_output",
    "mlp.gate_proj": "ffn_gate",
    "mlp.up_proj": "ffn_up",
    "mlp.down_proj": "ffn_down",
}


def gguf_name(hf_name: str) -> str:
    """The GGUF tensor name of an HF llama tensor, e.g. model.layers.3.mlp.up_proj.weight ->
    blk.3.ffn_up.weight."""
    stem, kind = hf_name.rsplit(".", 1)
    layer = re.fullmatch(r"model\.layers\.(\d+)\.(.+)", stem)
    if layer:
        return f"blk.{layer[1]}.{_LAYER[layer[2]]}.{kind}"
    return f"{_TOP[stem]}.{kind}"


def unpermute_qk(w_out_in: np.ndarray, n_heads: int) -> np.ndarray:
    """Inverse of llama.cpp's q/k permutation: per head, interleaved rotary pairs (GGUF) back to
    the rotate_half halves of HF. `n_heads` is the projection's head count (kv heads for k)."""
    half = w_out_in.shape[0] // n_heads // 2
    w = w_out_in.reshape(n_heads, half, 2, *w_out_in.shape[1:])
    return w.swapaxes(1, 2).reshape(w_out_in.shape)


def _value(reader: Any, key: str, default: Any = None) -> Any:
    """A scalar or string metadata value (raw `parts`/`data` access works across gguf versions)."""
    field = reader.fields.get(key)
    if field is None:
        if default is None:
            raise ValueError(f"GGUF metadata has no {key!r}")
        return default
    if len(field.data) != 1:
        raise ValueError(f"GGUF metadata {key!r} is an array; only per-model scalars are supported")
    part = field.parts[field.data[0]]
    if field.types[0] == import_gguf().GGUFValueType.STRING:
        return bytes(part).decode("utf-8")
    return part.item()


def _f32(value: float) -> float:
    """The shortest decimal of a float32 metadata value (1e-05, not 9.999999747378752e-06)."""
    return float(str(np.float32(value)))


def config_from_gguf(reader: Any) -> ModelConfig:
    """ModelConfig from GGUF metadata (llama.* keys); tied embeddings when output.weight is absent.

    Raises ValueError on other architectures and on RoPE variants we do not implement.
    """
    arch = _value(reader, "general.architecture")
    if arch != "llama":
        raise ValueError(f"GGUF architecture {arch!r} is not supported; allowed: ('llama',)")
    tensors = {t.name: t for t in reader.tensors}
    if "token_embd.weight" not in tensors:
        raise ValueError("GGUF file has no token_embd.weight tensor")
    d_model = _value(reader, "llama.embedding_length")
    heads = _value(reader, "llama.attention.head_count")
    head_dim = _value(reader, "llama.attention.key_length", d_model // heads)
    rope_dims = _value(reader, "llama.rope.dimension_count", head_dim)
    scaling = _value(reader, "llama.rope.scaling.type", "none")
    if rope_dims != head_dim or scaling != "none" or "rope_freqs.weight" in tensors:
        raise ValueError(
            f"GGUF rope (dimension_count={rope_dims}, head_dim={head_dim}, scaling={scaling!r}, "
            f"rope_freqs={'rope_freqs.weight' in tensors}): only plain full-width RoPE is supported"
        )
    return ModelConfig(
        vocab_size=int(tensors["token_embd.weight"].shape[-1]),  # ne order: [d_model, vocab]
        d_model=d_model,
        n_layers=_value(reader, "llama.block_count"),
        n_heads=heads,
        n_kv_heads=_value(reader, "llama.attention.head_count_kv", heads),
        head_dim=head_dim,
        d_ff=_value(reader, "llama.feed_forward_length"),
        rope_theta=_f32(_value(reader, "llama.rope.freq_base", 10000.0)),
        norm_eps=_f32(_value(reader, "llama.attention.layer_norm_rms_epsilon")),
        tie_embeddings="output.weight" not in tensors,
    )


def gguf_hf_extras(path: str | Path) -> dict[str, Any]:
    """What an HF config.json of a GGUF's model holds beyond its ModelConfig: the context length
    (max_position_embeddings) and the tokenizer's bos / eos / pad ids, where the file gives them."""
    reader = open_gguf(path)
    keys = {
        "max_position_embeddings": "llama.context_length",
        "bos_token_id": "tokenizer.ggml.bos_token_id",
        "eos_token_id": "tokenizer.ggml.eos_token_id",
        "pad_token_id": "tokenizer.ggml.padding_token_id",
    }
    return {name: int(_value(reader, key)) for name, key in keys.items() if key in reader.fields}


def read_gguf_tensor(tensor: Any) -> np.ndarray:
    """A reader tensor dequantized to float32 in numpy order (GGUF `ne` reversed)."""
    gguf = import_gguf()
    kind = tensor.tensor_type.name
    if kind not in SUPPORTED_TYPES:
        raise ValueError(
            f"GGUF tensor {tensor.name!r} has unsupported type {kind}; supported: {SUPPORTED_TYPES}"
        )
    shape = tuple(int(n) for n in reversed(tensor.shape.tolist()))
    array = gguf.quants.dequantize(tensor.data, tensor.tensor_type)
    return np.asarray(array, dtype=np.float32).reshape(shape)


def gguf_config(path: str | Path) -> ModelConfig:
    """The ModelConfig of a llama GGUF file (its metadata and tensor shapes only)."""
    return config_from_gguf(open_gguf(path))


def load_gguf_checkpoint(path: str | Path, dtype: Any = jnp.float32) -> tuple[ModelConfig, dict]:
    """(ModelConfig, params) from a llama GGUF file; same tree as `load_hf_checkpoint`.

    Raises ValueError naming the first missing, unexpected, mis-shaped or unsupported tensor.
    """
    path = Path(path)
    reader = open_gguf(path)
    cfg = config_from_gguf(reader)
    tensors = {t.name: t for t in reader.tensors}
    wanted = [
        (gguf_name(name), name, param_path, shape)
        for name, param_path, shape in expected_tensors(cfg)
    ]
    check_names(tensors, [g for g, _, _, _ in wanted], cfg, path, "output.weight")
    heads = {"attn_q": cfg.n_heads, "attn_k": cfg.n_kv_heads}
    params: dict[str, Any] = {}
    for name, hf_name, param_path, shape in wanted:
        linear = is_linear_weight(hf_name)
        hf_shape = shape[::-1] if linear else shape
        got = tuple(int(n) for n in reversed(tensors[name].shape.tolist()))
        if got != hf_shape:
            raise ValueError(f"tensor {name!r} in {path} has shape {got}, expected {hf_shape}")
        array = read_gguf_tensor(tensors[name])
        proj = name.split(".")[-2]
        if proj in heads and name.endswith(".weight"):
            array = unpermute_qk(array, heads[proj])
        insert_param(params, param_path, jnp.asarray(array.T if linear else array, dtype=dtype))
    return cfg, params
