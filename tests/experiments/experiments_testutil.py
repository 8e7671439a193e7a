"""Tiny experiment configs for end-to-end tests (seconds per RL step on a CPU)."""

from __future__ import annotations

from ml_collections import ConfigDict

from calclip_jax.config import base_config
from configs.arms import apply_overrides

TINY_RUN = {  # a 1-layer d=32 model, 4 prompts x 4 samples, 3 RL steps (also test_multihost's)
    "model.d_model": 32,
    "model.n_layers": 1,
    "model.n_heads": 2,
    "model.n_kv_heads": 1,
    "model.head_dim": 16,
    "model.d_ff": 64,
    "sft.updates": 20,
    "sft.eval_every": 20,
    "sft.batch_size": 16,
    "rollout.prompts_per_step": 4,
    "rollout.samples_per_prompt": 4,
    "rollout.max_new_tokens": 4,
    "train.steps": 3,
    "train.num_minibatches": 2,
    "train.learning_rate": 1e-3,
    "eval.every": 2,
    "eval.num_prompts": 8,
    "log.checkpoint_every": 2,
    "log.samples_every": 2,
    "log.quiet": True,
}


def tiny_config(cache_dir: str, **overrides) -> ConfigDict:
    """A config small enough for CI: `TINY_RUN` on 1-digit addition, a ratio dump mid-run."""
    c = base_config()
    apply_overrides(
        c,
        {
            "task.knobs": ConfigDict({"max_digits": 1, "partial_credit": True, "num_test": 16}),
            **TINY_RUN,
            "sft.cache_dir": cache_dir,
            "log.ratios_every": 2,  # a dump mid-run: later steps must still run
        },
    )
    apply_overrides(c, overrides)
    return c


def slice_gguf(src: str, dst: str, n_layers: int) -> str:
    """A copy of llama GGUF `src` with only its first `n_layers` blocks (metadata, tokenizer and
    the other tensors unchanged, quantized bytes copied as they are): a small real model."""
    import gguf

    reader = gguf.GGUFReader(src)
    writer = gguf.GGUFWriter(dst, arch="llama")
    for field in reader.fields.values():
        if field.name == gguf.Keys.General.ARCHITECTURE or field.name.startswith("GGUF."):
            continue
        kind = field.types[0]
        sub = field.types[-1] if kind == gguf.GGUFValueType.ARRAY else None
        value = n_layers if field.name == "llama.block_count" else field.contents()
        writer.add_key_value(field.name, value, kind, sub_type=sub)
    keep = [
        t
        for t in reader.tensors
        if not t.name.startswith("blk.") or int(t.name.split(".")[1]) < n_layers
    ]
    for t in keep:
        writer.add_tensor_info(t.name, t.data.shape, t.data.dtype, t.data.nbytes, t.tensor_type)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    for t in keep:
        writer.write_tensor_data(t.data, tensor_endianess=reader.endianess)
    writer.close()
    return dst
