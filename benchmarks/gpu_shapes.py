"""A real model's shapes without its weights, for a machine the weights cannot travel to.

The shipped SmolLM2-135M-Instruct GGUF is 98 MB, more than a lent GPU's working tree may carry.
`write_shapes` keeps a llama GGUF's metadata (sizes, the tokenizer's vocabulary and merges, the
chat template) and each tensor's name and shape, but no tensor data: a "shapes file" of about
2 MB, itself a GGUF (the tensor list is a JSON string under SHAPES_KEY). `inflate` turns it back
into a full GGUF of random weights on local disk (float16; linear and embedding weights
N(0, INIT_STD^2) as HF's Llama init, norm weights 1), which `model.checkpoint` loads through the
normal GGUF path: the real model's sizes, tokenizer and chat template with random weights. Every
RL-step figure of `bench_smollm2_step`'s workload then is the real model's (EOS never stops a
row there, so a step's work does not depend on the weights); rewards, and what training does to
them, are not.

    python -m benchmarks.gpu_kit   # writes .gpu_kit/smollm2_shapes.gguf (see gpu_kit.py)
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import numpy as np

from calclip_jax.gguf_file import import_gguf, open_gguf

# the carry kit's files (`benchmarks.gpu_kit` writes them; gpu_run reads them on the device)
KIT_DIR = ".gpu_kit"
SHAPES_FILE = f"{KIT_DIR}/smollm2_shapes.gguf"
MANIFEST_FILE = f"{KIT_DIR}/kit.json"
SHAPES_KEY = "calclip.shapes.tensors"  # JSON [[name, [ne...], source type], ...]
SOURCE_KEY = "calclip.shapes.source"  # the file the shapes came from
WEIGHTS_KEY = "calclip.random_weights"  # in an inflated file: how its weights were drawn
INIT_STD = 0.02  # HF LlamaConfig.initializer_range
BLOCK_COUNT = "llama.block_count"


def _copy_fields(reader: Any, writer: Any, override: dict[str, Any], skip: tuple[str, ...]) -> None:
    """Every metadata field of `reader` into `writer` with its GGUF type, `override`'s values
    instead of the file's; `skip`ped names (and the architecture and GGUF.* ones) left out."""
    gguf = import_gguf()
    for field in reader.fields.values():
        name = field.name
        if name == gguf.Keys.General.ARCHITECTURE or name.startswith("GGUF.") or name in skip:
            continue
        kind = field.types[0]
        sub = field.types[-1] if kind == gguf.GGUFValueType.ARRAY else None
        value = override[name] if name in override else field.contents()
        writer.add_key_value(name, value, kind, sub_type=sub)


def write_shapes(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> str:
    """The shapes file of llama GGUF `src` at `dst`: its metadata and its tensors' names, shapes
    (GGUF `ne` order) and types, no tensor data."""
    gguf = import_gguf()
    reader = gguf.GGUFReader(os.fspath(src))
    tensors = [[t.name, [int(n) for n in t.shape], t.tensor_type.name] for t in reader.tensors]
    Path(dst).parent.mkdir(parents=True, exist_ok=True)
    writer = gguf.GGUFWriter(os.fspath(dst), arch="llama")
    _copy_fields(reader, writer, {}, ())
    writer.add_string(SOURCE_KEY, Path(src).name)
    writer.add_string(SHAPES_KEY, json.dumps(tensors))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    writer.close()
    return os.fspath(dst)


def _string(reader: Any, key: str) -> str | None:
    field = reader.fields.get(key)
    return None if field is None else field.contents()


def is_shapes_file(path: str | os.PathLike[str]) -> bool:
    """Whether `path` is a GGUF shapes file (`write_shapes`), not a checkpoint."""
    if not str(path).endswith(".gguf") or not Path(path).is_file():
        return False
    return _string(open_gguf(path), SHAPES_KEY) is not None  # parsed once: a checkpoint's
    # loader reuses the parse


def shapes_summary(path: str | os.PathLike[str]) -> dict[str, Any]:
    """{"source", "layers", "tensors", "params"} of a shapes file."""
    reader = open_gguf(path)
    tensors = json.loads(_string(reader, SHAPES_KEY))
    return {
        "source": _string(reader, SOURCE_KEY),
        "layers": int(reader.fields[BLOCK_COUNT].contents()),
        "tensors": len(tensors),
        "params": int(sum(np.prod(ne) for _, ne, _ in tensors)),
    }


def _layer(name: str) -> int | None:
    return int(name.split(".")[1]) if name.startswith("blk.") else None


def random_tensor(name: str, ne: list[int], rng: np.random.Generator) -> np.ndarray:
    """float16 in numpy order (`ne` reversed): norm weights 1, every other tensor
    N(0, INIT_STD^2)."""
    shape = tuple(reversed(ne))
    if "norm" in name.split(".")[-2]:
        return np.ones(shape, np.float16)
    return (rng.standard_normal(shape, dtype=np.float32) * INIT_STD).astype(np.float16)


def inflate(
    shapes: str | os.PathLike[str],
    dst: str | os.PathLike[str],
    n_layers: int | None = None,
    seed: int = 0,
) -> str:
    """A llama GGUF at `dst` with the shapes file's metadata and a random float16 tensor per
    listed tensor (`random_tensor`), written one tensor at a time; `n_layers` keeps the first
    blocks only (None: all)."""
    gguf = import_gguf()
    reader = open_gguf(shapes)
    listed = _string(reader, SHAPES_KEY)
    if listed is None:
        raise ValueError(
            f"{shapes} is no shapes file (no {SHAPES_KEY}): write it with write_shapes"
        )
    total = int(reader.fields[BLOCK_COUNT].contents())
    layers = total if n_layers is None else min(n_layers, total)
    tensors = [
        (name, ne)
        for name, ne, _ in json.loads(listed)
        if _layer(name) is None or _layer(name) < layers
    ]
    how = f"N(0, {INIT_STD}^2) float16, norms 1, seed {seed}, {layers} of {total} layers"
    Path(dst).parent.mkdir(parents=True, exist_ok=True)
    writer = gguf.GGUFWriter(os.fspath(dst), arch="llama")
    override = {BLOCK_COUNT: layers, "general.file_type": int(gguf.LlamaFileType.MOSTLY_F16)}
    _copy_fields(reader, writer, override, (SHAPES_KEY,))
    writer.add_string(WEIGHTS_KEY, how)
    rng = np.random.default_rng(seed)
    for name, ne in tensors:
        shape = tuple(reversed(ne))
        f16 = gguf.GGMLQuantizationType.F16
        writer.add_tensor_info(name, shape, np.dtype(np.float16), int(np.prod(shape)) * 2, f16)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_ti_data_to_file()
    for name, ne in tensors:
        writer.write_tensor_data(random_tensor(name, ne, rng))
    writer.close()
    return os.fspath(dst)
