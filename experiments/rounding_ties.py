"""Checkpoint-grid artifacts: a config's starting linear weights on rounding boundaries, per
precision, and how the config's SFT warm start reaches the weights each precision's forward uses.

    python -m experiments.rounding_ties --config=configs/smollm2.py [--warm_start]

Table 1: the share of weights the precision represents exactly, and the share within a relative
1e-6 of a rounding boundary (a tie), against the share random values would have. Table 2 (with --warm_start): the SFT's float32 update w0 -> w1
against the same update after rounding, ||Q(w1) - Q(w0)|| / ||w1 - w0|| and their cosine. A
grid the format represents exactly erases an update smaller than half its step; weights that sat
on ties round in the update's direction (results/RESULTS.md, section 6).
"""

from __future__ import annotations

import jax
import numpy as np
from absl import app, flags
from ml_collections import config_flags

from calclip_jax.analysis.rounding_ties import (
    exact_share,
    near_tie_share,
    random_share,
    update_gain,
)
from calclip_jax.config import build_run_spec
from calclip_jax.data import load_split
from calclip_jax.fp8.recipe import TensorPrecision
from calclip_jax.fp8.vocabulary import GRANULARITIES
from calclip_jax.train.sft import starting_params, warm_start

_CONFIG = config_flags.DEFINE_config_file("config", None, "Config file[:arm].")
_WARM = flags.DEFINE_bool("warm_start", False, "Also measure the config's SFT update (cached).")

PRECISIONS = {"bf16": TensorPrecision("bf16")} | {
    f"e4m3 {g}": TensorPrecision("e4m3", g) for g in GRANULARITIES
}


def linear_weights(params) -> list[jax.Array]:
    """The dense kernels [K, N] (every 2-D leaf but the embedding), in tree order."""
    leaves = jax.tree_util.tree_flatten_with_path(params)[0]
    return [w for path, w in leaves if w.ndim == 2 and "embed" not in jax.tree_util.keystr(path)]


def main(argv: list[str]) -> None:
    del argv
    spec = build_run_spec(_CONFIG.value)
    base = linear_weights(starting_params(spec))
    sizes = np.array([w.size for w in base], np.float64)
    print(f"{int(sizes.sum()):,} linear weights in {len(base)} kernels of the starting params")
    print(
        "| precision | represented exactly | on a rounding boundary | random values | ratio |\n"
        "|---|---|---|---|---|"
    )
    for name, prec in PRECISIONS.items():
        exact = float(np.average([exact_share(w, prec) for w in base], weights=sizes))
        share = float(np.average([near_tie_share(w, prec) for w in base], weights=sizes))
        expected = random_share(prec.dtype)
        print(
            f"| {name} | {exact:.1%} | {share:.3%} | {expected:.4%} | {share / expected:.0f}x |",
            flush=True,
        )
    if not _WARM.value:
        return
    splits = {s: load_split(spec.task, s, spec.data_dir) for s in ("train", "test")}
    tuned = linear_weights(warm_start(spec, splits)[0])
    print("\nThe SFT update as each forward sees it (median over kernels)")
    print("| precision | gain ||Q(w1) - Q(w0)|| / ||w1 - w0|| | cosine |\n|---|---|---|")
    for name, prec in PRECISIONS.items():
        gains, cosines = zip(*(update_gain(w0, w1, prec) for w0, w1 in zip(base, tuned)))
        print(f"| {name} | {np.median(gains):.1f} | {np.median(cosines):.2f} |", flush=True)


if __name__ == "__main__":
    app.run(main)
