"""Exports a run's checkpoint as a Hugging Face model directory (transformers loads it as is).

    python -m experiments.export --workdir=runs/smollm2 [--step=20] --out=runs/smollm2_hf \
        [--dtype=bfloat16]

Writes config.json in the architecture of the checkpoint the run started from
(`model.checkpoint`: an HF directory, a .gguf file or a built-in name), model.safetensors
(float32 by default: the trainer's master weights exactly) and that checkpoint's tokenizer
(tokenizer.json, tokenizer_config.json with its chat template). Default: the latest checkpoint.
A run from a fresh model has no such architecture and is refused.
"""

from __future__ import annotations

import sys

from absl import app, flags, logging

from calclip_jax.model.hf_export import DTYPES
from calclip_jax.probes.export_checkpoint import ExportError, export_run

_WORKDIR = flags.DEFINE_string("workdir", None, "A run's workdir (config.json + checkpoints/).")
_STEP = flags.DEFINE_integer("step", None, "RL step of the checkpoint; default: the latest.")
_OUT = flags.DEFINE_string("out", None, "Output directory; must be new or empty.")
_DTYPE = flags.DEFINE_enum("dtype", "float32", sorted(DTYPES), "Tensor dtype of the export.")
flags.mark_flags_as_required(["workdir", "out"])


def main(argv: list[str]) -> None:
    del argv
    try:
        record = export_run(_WORKDIR.value, _OUT.value, step=_STEP.value, dtype=_DTYPE.value)
    except ExportError as err:
        sys.exit(f"export: {err}")
    print(
        f"{record['workdir']} step {record['step']} -> {record['out']} ({record['dtype']}; "
        f"from {record['checkpoint']}): {', '.join(record['files'])}"
    )


if __name__ == "__main__":
    logging.set_verbosity(logging.WARNING)
    app.run(main)
