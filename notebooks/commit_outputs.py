"""Executes the notebooks against the committed results and stores their outputs in place, with
images downscaled, so the figures show on GitHub without running anything.

    python notebooks/commit_outputs.py            # from the repo root

Each notebook reads its default (the repo's results/) through a relative CALCLIP_RESULTS, so
the stored text holds no machine's paths; PNG outputs are resized to MAX_WIDTH pixels and
palette-quantized; execution timestamps are dropped. CI executes the notebooks itself
(tests/notebooks), never these stored outputs.
"""

from __future__ import annotations

import base64
import io
import os
from pathlib import Path

import nbformat
from nbclient import NotebookClient
from PIL import Image

NOTEBOOK_DIR = Path(__file__).resolve().parent
NAMES = ("training_dynamics", "ratio_distortion", "granularity_sweep")
RESULTS = "../results/granularity"  # relative to notebooks/, the kernel's working directory
MAX_WIDTH = 560
COLOURS = 32  # line plots need few; keeps a tall multi-panel figure near 200 KB


def small_png(data: str) -> str:
    """A base64 PNG at most MAX_WIDTH wide, COLOURS colours."""
    image = Image.open(io.BytesIO(base64.b64decode(data))).convert("RGB")
    if image.width > MAX_WIDTH:
        image = image.resize((MAX_WIDTH, round(image.height * MAX_WIDTH / image.width)))
    buffer = io.BytesIO()
    image.quantize(COLOURS).save(buffer, format="PNG", optimize=True)
    return base64.b64encode(buffer.getvalue()).decode()


def shrink_outputs(nb: nbformat.NotebookNode) -> None:
    for cell in nb.cells:
        cell.get("metadata", {}).pop("execution", None)
        for out in cell.get("outputs", []):
            if "image/png" in out.get("data", {}):
                out["data"]["image/png"] = small_png(out["data"]["image/png"])
                out.get("metadata", {}).pop("image/png", None)


def main() -> None:
    os.environ["CALCLIP_RESULTS"] = RESULTS
    os.environ.pop("CALCLIP_FIG_DIR", None)
    for name in NAMES:
        path = NOTEBOOK_DIR / f"{name}.ipynb"
        nb = nbformat.read(path, as_version=4)
        NotebookClient(
            nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": NOTEBOOK_DIR}}
        ).execute()
        shrink_outputs(nb)
        nbformat.write(nb, path)
        print(f"{path.name}: {path.stat().st_size / 1024:.0f} KiB")


if __name__ == "__main__":
    main()
