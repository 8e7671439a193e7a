"""A seeded run's folder name: `<arm>__seed<N>` (a sweep expands its seeds into these names)."""

from __future__ import annotations

import re

SEED_SUFFIX = re.compile(r"__seed(?P<seed>-?\d+)$")


def seeded_name(arm: str, seed: int) -> str:
    """The run name of `arm` at `seed`."""
    return f"{arm}__seed{int(seed)}"


def split_seeded_name(run_name: str) -> tuple[str, int | None]:
    """(arm, seed) of a seeded run name; (run_name, None) without the suffix."""
    match = SEED_SUFFIX.search(run_name)
    if match is None:
        return run_name, None
    return run_name[: match.start()], int(match["seed"])
