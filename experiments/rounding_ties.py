"""Checkpoint-grid artifacts: a config's starting linear weights on rounding boundaries, per
precision, and how the config's SFT warm start reaches the weights each precision's forward uses.

    python -m experiments.rounding_ties --config=configs/smollm2.py [--warm_start]

Table 1: the share of weights each precision represents exactly, and the share within a relative
1e-6 of a rounding boundary (a tie), against the share random values would have.
Table 2 (with --warm_start): the SFT's float32 update w0 -> w1 against the same update after
rounding, ||Q(w1) - Q(w0)|| / ||w1 - w0|| and their cosine, and the ties left after it. Weights
on ties round in the update's direction, a whole step of the format.
Table 3 (with --warm_start): what that does to the log-probs of sampled responses
(results/RESULTS.md, section 6).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import jax
import numpy as np
from absl import app, flags
from ml_collections import config_flags

from calclip_jax.analysis.rounding_ties import (
    as_dense_weight,
    exact_share,
    near_tie_share,
    random_share,
    update_gain,
)
from calclip_jax.config import RunSpec, build_run_spec
from calclip_jax.data import load_split
from calclip_jax.fp8 import PrecisionRecipe
from calclip_jax.fp8.recipe import TensorPrecision
from calclip_jax.fp8.vocabulary import GRANULARITIES
from calclip_jax.probes.first_batch import LOGP_KEYS, first_rollout_batch
from calclip_jax.train.ppo_update import make_logprob_fn
from calclip_jax.train.sft import starting_params, warm_start

_CONFIG = config_flags.DEFINE_config_file("config", None, "Config file[:arm].")
_WARM = flags.DEFINE_bool("warm_start", False, "Also measure the config's SFT update (cached).")
_ROWS = flags.DEFINE_integer("rows", 16, "Sampled responses for table 3 (with --warm_start).")

PRECISIONS = {"bf16": TensorPrecision("bf16")} | {
    f"e4m3 {g}": TensorPrecision("e4m3", g) for g in GRANULARITIES
}


def is_dense_kernel(path: Any, w: jax.Array) -> bool:
    """A dense kernel [K, N]: every 2-D leaf but the embedding."""
    return w.ndim == 2 and "embed" not in jax.tree_util.keystr(path)


def linear_weights(params: Any) -> list[jax.Array]:
    """The dense kernels, in tree order."""
    leaves = jax.tree_util.tree_flatten_with_path(params)[0]
    return [w for path, w in leaves if is_dense_kernel(path, w)]


def map_linear(fn: Callable[..., jax.Array], *trees: Any) -> Any:
    """`fn` applied to the dense kernels of `trees` (leaf by leaf), the first tree elsewhere."""

    def leaf(path, w, *rest):
        return fn(w, *rest) if is_dense_kernel(path, w) else w

    return jax.tree_util.tree_map_with_path(leaf, *trees)


def logprob_errors(spec: RunSpec, base: Any, tuned: Any, train: Sequence[Any]) -> None:
    """Table 3: on responses the warm start samples (BF16), how far log-probs move from the
    float32 warm start when only the weights are rounded (float32 forward otherwise): Q(w1), and
    Q(w0) + (w1 - w0), the SFT update added after rounding the checkpoint."""
    batch = first_rollout_batch(spec, tuned, train).batch
    batch = {k: np.asarray(batch[k])[: _ROWS.value] for k in LOGP_KEYS}
    mask = batch["response_mask"].astype(bool)
    logprobs = make_logprob_fn(spec.model, PrecisionRecipe.preset("fp32"))
    reference = np.asarray(logprobs(tuned, None, batch))

    def error(params: Any) -> str:
        diff = np.abs(np.asarray(logprobs(params, None, batch)) - reference)[mask]
        return f"{diff.mean():.3f} / {diff.max():.2f}"

    print(f"\nLog-prob error vs the float32 warm start, {_ROWS.value} sampled responses, weights")
    print("rounded, float32 forward (mean / max abs)")
    print("| weights | Q(w1) | Q(w0) + (w1 - w0) |\n|---|---|---|")
    print(f"| w0 (the checkpoint, no SFT) | {error(base)} | - |")
    for name, prec in PRECISIONS.items():
        rounded = map_linear(lambda w, p=prec: as_dense_weight(w, p), tuned)
        shifted = map_linear(lambda w0, w1, p=prec: as_dense_weight(w0, p) + (w1 - w0), base, tuned)
        print(f"| {name} | {error(rounded)} | {error(shifted)} |", flush=True)


def main(argv: list[str]) -> None:
    del argv
    spec = build_run_spec(_CONFIG.value)
    base = linear_weights(starting_params(spec))  # w0
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
    tuned_params = warm_start(spec, splits)[0]
    tuned = linear_weights(tuned_params)
    print("\nThe SFT update as each forward sees it (median over kernels), and the ties left")
    print(
        "| precision | gain ||Q(w1) - Q(w0)|| / ||w1 - w0|| | cosine | on a tie after the SFT |\n"
        "|---|---|---|---|"
    )
    for name, prec in PRECISIONS.items():
        gains, cosines = zip(
            *(update_gain(w0, w1, prec) for w0, w1 in zip(base, tuned, strict=True)), strict=True
        )
        ties = float(np.average([near_tie_share(w, prec) for w in tuned], weights=sizes))
        print(
            f"| {name} | {np.median(gains):.1f} | {np.median(cosines):.2f} | "
            f"{ties / random_share(prec.dtype):.0f}x random |",
            flush=True,
        )
    logprob_errors(spec, starting_params(spec), tuned_params, splits["train"])


if __name__ == "__main__":
    app.run(main)
