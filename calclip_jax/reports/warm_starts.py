"""Whether the arms of each seed of a sweep started RL from bitwise the same SFT warm start.

A paired comparison assumes it: the SFT warm start differs between CPUs (model and instruction
set: run_info.py), so an arm run on another machine starts elsewhere, and its difference to the
baseline mixes the two starts with the arms' treatment. Each finished run records
`sft_params_digest` in summary.json.
"""

from __future__ import annotations

from pathlib import Path

from calclip_jax.workdir.run_record import find_arms, load_summary
from calclip_jax.workdir.seed_names import split_seeded_name

Digests = dict[int, dict[str, str]]  # seed -> arm -> digest of its warm start


def seed_digests(sweep_dir: str | Path) -> Digests:
    """The warm-start digest of every finished run under `sweep_dir` that recorded one, by seed
    (a run folder without the `__seed<k>` suffix counts as seed 0)."""
    out: Digests = {}
    for name, path in find_arms(sweep_dir).items():
        digest = (load_summary(path) or {}).get("sft_params_digest")
        if digest is not None:
            arm, seed = split_seeded_name(name)
            out.setdefault(seed or 0, {})[arm] = str(digest)
    return out


def mixed_warm_starts(digests: Digests) -> list[str]:
    """One line per seed whose arms started from more than one warm start, naming the arms of
    each digest; empty when every seed's arms agree."""
    lines = []
    for seed, by_arm in sorted(digests.items()):
        groups: dict[str, list[str]] = {}
        for arm, digest in sorted(by_arm.items()):
            groups.setdefault(digest, []).append(arm)
        if len(groups) > 1:
            parts = "; ".join(f"{d}: {', '.join(arms)}" for d, arms in sorted(groups.items()))
            lines.append(f"seed {seed}: {parts}")
    return lines


def warm_start_line(digests: Digests) -> str:
    """A sentence for the report: each seed's warm-start digest and how many arms recorded it
    (runs that predate the record are not counted)."""
    if not digests:
        return "Warm starts: no finished run recorded its digest."
    parts = []
    for seed, by_arm in sorted(digests.items()):
        values, n = sorted(set(by_arm.values())), len(by_arm)
        parts.append(f"seed {seed} `{'` / `'.join(values)}` (recorded by {n} arm{'s' * (n > 1)})")
    return "Warm starts (sha256 of the SFT params): " + "; ".join(parts) + "."
