"""Reading safetensors checkpoints (single file or sharded with an index) into NumPy.

Uses the `safetensors` NumPy API; bfloat16 tensors, which NumPy cannot name, are read from the
file's header offsets as `ml_dtypes.bfloat16`.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import ml_dtypes
import numpy as np
from safetensors import safe_open

INDEX_FILE = "model.safetensors.index.json"
SINGLE_FILE = "model.safetensors"


def tensor_files(path: str | Path) -> dict[str, Path]:
    """Maps tensor name -> file holding it, from the shard index or the single-file checkpoint."""
    path = Path(path)
    if (path / INDEX_FILE).exists():
        weight_map = json.loads((path / INDEX_FILE).read_text())["weight_map"]
        files = {name: path / fname for name, fname in weight_map.items()}
        for f in set(files.values()):
            if not f.exists():
                raise FileNotFoundError(
                    f"shard {f.name} listed in {INDEX_FILE} is missing in {path}"
                )
        return files
    shards = sorted(path.glob("*.safetensors"))
    if not shards:
        raise FileNotFoundError(f"no {SINGLE_FILE} or {INDEX_FILE} in {path}")
    files = {}
    for f in shards:
        with safe_open(str(f), framework="np") as handle:
            files.update({name: f for name in handle.keys()})  # noqa: SIM118
    return files


def _read_bf16(file: Path, name: str) -> np.ndarray:
    with open(file, "rb") as fh:
        (header_len,) = struct.unpack("<Q", fh.read(8))
        info = json.loads(fh.read(header_len))[name]
        start, end = info["data_offsets"]
        fh.seek(8 + header_len + start)
        raw = fh.read(end - start)
    return np.frombuffer(raw, dtype=ml_dtypes.bfloat16).reshape(info["shape"])


def read_tensor(file: Path, name: str) -> np.ndarray:
    """One tensor as a NumPy array (bfloat16 stays ml_dtypes.bfloat16)."""
    with safe_open(str(file), framework="np") as handle:
        try:
            return handle.get_tensor(name)
        except TypeError:  # dtype NumPy does not know (bfloat16)
            return _read_bf16(file, name)


def tensor_shape(file: Path, name: str) -> tuple[int, ...]:
    """Shape of one tensor without reading its data."""
    with safe_open(str(file), framework="np") as handle:
        return tuple(handle.get_slice(name).get_shape())
