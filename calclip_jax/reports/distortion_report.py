"""Markdown tables and a figure of `distortion.distortion_stats` output (experiments/distortion)."""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from matplotlib.figure import Figure

from calclip_jax.analysis.ratio_noise import PROB_EDGES
from calclip_jax.reports import plots  # selects the Agg backend when headless


def bin_labels(edges: Sequence[float] = PROB_EDGES) -> list[str]:
    """'p < 0.05', '0.05-0.2', ..., '>= 0.99' for the probability bins of `edges`."""
    pairs = list(itertools.pairwise(edges))
    labels = [f"{lo:g}-{hi:g}" for lo, hi in pairs]
    labels[0] = f"p < {pairs[0][1]:g}"
    if pairs[-1][1] > 1.0:
        labels[-1] = f">= {pairs[-1][0]:g}"
    return labels


def _num(x: float | None, digits: int = 3) -> str:
    return "-" if x is None or not math.isfinite(x) else f"{x:.{digits}f}"


def _pct(x: float | None) -> str:
    return "-" if x is None or not math.isfinite(x) else ("0" if x == 0 else f"{100 * x:.2f}%")


def _times(share: float, share_ref: float, inflation: float | None) -> str:
    if inflation is not None:
        return f"{inflation:.1f}x"
    return "inf" if math.isfinite(share) and share > 0 and share_ref == 0 else "-"


def _pair(d: dict[str, Any], fmt: Any = _num) -> str:
    return f"{fmt(d['neg'])} / {fmt(d['pos'])}"


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return "\n".join(lines + ["| " + " | ".join(r) + " |" for r in rows]) + "\n"


def _per_bin(values: dict[str, list[float]], fmt: Any = _num) -> list[str]:
    return [f"{fmt(n)} / {fmt(p)}" for n, p in zip(values["neg"], values["pos"], strict=True)]


def noise_tables(stats: dict[str, Any], width: float, edges: Sequence[float]) -> str:
    """Log-prob noise at theta_0 (by sign, by bin) and ratio noise d (per k, by bin at k = K)."""
    precs = stats["precisions"]
    labels = bin_labels(edges)
    out = ["### Log-prob noise at theta_0, e = logp_P - logp_BF16 (A<0 / A>0)\n\n"]
    over = f"abs e > {width:.2f}"
    out.append(
        _table(
            ["precision", "std e", "p99 abs e", over, f"{over}, all tokens"],
            [
                [
                    p,
                    _pair(s["logp_noise"]["std"]),
                    _pair(s["logp_noise"]["p99_abs"]),
                    _pair(s["logp_noise"]["share_over_width"], _pct),
                    _pct(s["logp_noise"]["share_over_width"]["all"]),
                ]
                for p, s in precs.items()
            ],
        )
    )
    out.append("\nstd e by old-policy probability (A<0 / A>0):\n\n")
    rows = [[p, *_per_bin(s["logp_noise"]["std_by_bin"])] for p, s in precs.items()]
    out.append(_table(["precision", *labels], rows))
    out.append("\n### Ratio noise d = log r_P - log r_BF16 after k updates: std (A<0 / A>0)\n\n")
    ks = [u["k"] for u in next(iter(precs.values()))["updates"]] if precs else []
    rows = [[p, *[_pair(u["ratio_noise"]["std"]) for u in s["updates"]]] for p, s in precs.items()]
    out.append(_table(["precision", *[f"k={k}" for k in ks]], rows))
    if ks:
        out.append(f"\nstd d by old-policy probability at k={ks[-1]} (A<0 / A>0):\n\n")
        rows = [
            [p, *_per_bin(s["updates"][-1]["ratio_noise"]["std_by_bin"])] for p, s in precs.items()
        ]
        out.append(_table(["precision", *labels], rows))
    return "".join(out)


def clip_table(stats: dict[str, Any], bounds: tuple[float, float]) -> str:
    """Clip shares per precision and k: FP8 vs BF16 on the same tokens, and their ratio."""
    lo, hi = bounds
    header = [
        "precision",
        "k",
        f"P lower, A<0 (r < {lo:g})",
        "BF16 lower, A<0",
        "P / BF16",
        f"P upper, A>0 (r > {hi:g})",
        "BF16 upper, A>0",
        "P / BF16",
    ]
    rows = []
    for p, s in stats["precisions"].items():
        for u in s["updates"]:
            c = u["clip"]
            rows.append(
                [
                    p,
                    str(u["k"]),
                    _pct(c["lower_neg"]),
                    _pct(c["lower_neg_ref"]),
                    _times(c["lower_neg"], c["lower_neg_ref"], c["lower_neg_inflation"]),
                    _pct(c["upper_pos"]),
                    _pct(c["upper_pos_ref"]),
                    _times(c["upper_pos"], c["upper_pos_ref"], c["upper_pos_inflation"]),
                ]
            )
    return "### Clip shares, P vs BF16 (same parameters, same tokens)\n\n" + _table(header, rows)


def count_table(stats: dict[str, Any], edges: Sequence[float]) -> str:
    """Tokens per sign and probability bin."""
    t = stats["tokens"]
    rows = [[tag, *[str(n) for n in t["by_bin"][tag]], str(t[tag])] for tag in ("neg", "pos")]
    head = f"### Tokens ({t['total']} in all, {t['zero']} with A = 0)\n\n"
    return head + _table(["sign", *bin_labels(edges), "all"], rows)


def to_markdown(
    stats: dict[str, Any],
    bounds: tuple[float, float],
    width: float,
    edges: Sequence[float] = PROB_EDGES,
    title: str = "FP8 ratio distortion on sampled text",
    preamble: str = "",
) -> str:
    """Every table, ready to paste into RESULTS.md."""
    size = "; ".join(f"k={k}: {_pair(s)}" for k, s in enumerate(stats["update_size"], start=1))
    parts = [
        f"## {title}\n\n{preamble}",
        f"How far the updates move the BF16 ratio, std log r_BF16 (A<0 / A>0): {size}.\n\n",
        noise_tables(stats, width, edges),
        "\n",
        clip_table(stats, bounds),
        "\n",
        count_table(stats, edges),
    ]
    return "".join(parts)


def plot_distortion(
    stats: dict[str, Any], edges: Sequence[float] = PROB_EDGES, save: str | Path | None = None
) -> Figure:
    """Four panels: std e at theta_0 and std d at k = K by probability bin (A<0 solid, A>0
    dashed), and per k the lower (A<0) and upper (A>0) clip shares, each precision vs BF16."""
    plt = plots.plt
    fig, axes = plt.subplots(2, 2, figsize=(12, 7.5))
    x = range(len(edges) - 1)
    precs = stats["precisions"]
    for i, (p, s) in enumerate(precs.items()):
        color = f"C{i % 10}"
        last = s["updates"][-1]["ratio_noise"]["std_by_bin"] if s["updates"] else None
        panels = [(axes[0, 0], s["logp_noise"]["std_by_bin"]), (axes[0, 1], last)]
        for ax, by_bin in panels:
            if by_bin is None:
                continue
            ax.plot(x, by_bin["neg"], color=color, marker="o", label=f"{p} A<0")
            ax.plot(x, by_bin["pos"], color=color, marker="s", linestyle="--", label=f"{p} A>0")
        ks = [u["k"] for u in s["updates"]]
        for ax, key in ((axes[1, 0], "lower_neg"), (axes[1, 1], "upper_pos")):
            ax.plot(ks, [100 * u["clip"][key] for u in s["updates"]], color=color, marker="o")
            ax.lines[-1].set_label(p)
            if i == 0:
                ref = [100 * u["clip"][f"{key}_ref"] for u in s["updates"]]
                ax.plot(ks, ref, color="black", marker="x", linestyle=":", label="bf16")
    k_last = next((s["updates"][-1]["k"] for s in precs.values() if s["updates"]), 0)
    titles = [
        "std of e = logp_P - logp_BF16 at theta_0",
        f"std of d = log r_P - log r_BF16 at k={k_last}",
        "A<0 tokens below the lower bound (%)",
        "A>0 tokens above the upper bound (%)",
    ]
    for ax, title in zip(axes.flat, titles, strict=True):
        ax.set_title(title)
        ax.legend(fontsize=7)
    for ax in axes[0]:
        ax.set_xticks(list(x), bin_labels(edges), fontsize=8)
        ax.set_xlabel("old-policy probability (BF16, theta_0)")
    for ax in axes[1]:
        ax.set_xlabel("updates k")
        ax.set_xticks(list(range(1, k_last + 1)))
    fig.tight_layout()
    if save is not None:
        fig.savefig(save, dpi=120)
    return fig
