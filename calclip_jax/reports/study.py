"""The study's results tree (RESULTS.md): what is where, loading it, and the shared formatting.

    <results>/<phase>/<arm>/   one run folder per arm of each phase (configs/study.py)

The phases, arms and seeds come from the caller as a `StudyLayout` (this package does not import
configs/). Runs of the `granularity` and `seeds` phases are keyed by their arm name, the others
by `<phase>/<arm>`.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np

from calclip_jax.analysis.stats import final_value, finite_mean
from calclip_jax.reports import metrics as M
from calclip_jax.reports import plots
from calclip_jax.workdir import run_record as R

UNPREFIXED_PHASES = ("granularity", "seeds")  # their runs are keyed by the arm name alone
LADDER = (  # label, TIS arm, TIS + CalClip arm (configs/study.py ladder phases)
    ("E4M3 (MXFP8)", "fp8_mx_tis", "fp8_mx_tis_calib"),
    ("E5M2", "fp8_mx_tis_e5m2", "fp8_mx_tis_calib_e5m2"),
    ("E2M1 (MXFP4)", "fp4_mx_tis", "fp4_mx_tis_calib"),
)

# group -> (arms, run names at seeds 0, 1, ... with the arm's name as "{}")
SeedRuns = Mapping[str, tuple[Sequence[str], Sequence[str]]]


@dataclasses.dataclass(frozen=True)
class StudyLayout:
    """What the report needs of the study's definition (configs/study.py, configs/arms.py)."""

    phases: tuple[str, ...]  # a phase without a folder under the results is skipped
    search_phases: tuple[str, ...]  # the boundary-search phases
    real_model_phases: tuple[str, ...]
    granularities: tuple[str, ...]  # FP8 preset suffixes: fp8_<g>_tis[_calib] arms
    seed_runs: SeedRuns

    @property
    def own_figure_phases(self) -> tuple[str, ...]:
        """Phases with a curve figure and a distortion table of their own."""
        return (*self.search_phases, *self.real_model_phases)


def seed_runs(
    headline: Sequence[str],
    extra_seeds: Sequence[int],
    stress_arms: Sequence[str],
    stress_dapo_arms: Sequence[str],
    stress_seeds: Sequence[int],
) -> dict[str, tuple[tuple[str, ...], tuple[str, ...]]]:
    """The seeds table's groups: GRPO and DAPO headline arms, GRPO and DAPO stress arms."""
    headline, extra = tuple(headline), tuple(extra_seeds)
    return {
        "GRPO": (headline, ("{}", *(f"{{}}__seed{s}" for s in extra))),
        "DAPO": (headline, ("dapo/dapo_{}", *(f"dapo_seeds/dapo_{{}}__seed{s}" for s in extra))),
        "GRPO stress": (
            tuple(stress_arms),
            ("stress/{}", *(f"stress_seeds/{{}}__seed{s}" for s in stress_seeds)),
        ),
        "DAPO stress, Countdown": (
            tuple(stress_dapo_arms),
            ("stress_dapo/{}", *(f"stress_dapo_seeds/{{}}__seed{s}" for s in stress_seeds)),
        ),
    }


def mean(x: np.ndarray | None) -> float:
    """Mean over all logged steps (NaN when none)."""
    return finite_mean(x, default=math.nan)


def final(x: np.ndarray | None) -> float:
    """`stats.final_value`: mean over the last FINAL_STEPS logged steps (NaN when none)."""
    return final_value(x, default=math.nan)


def fmt(v: float, pct: bool = False) -> str:
    if v is None or not math.isfinite(v):
        return "-"
    return f"{100 * v:.2f}%" if pct else f"{v:.3f}"


def check_results(root: Path, phases: Sequence[str]) -> None:
    """ValueError when `root` is no folder or holds no run under a phase folder: the report would
    be empty tables and blank figures."""
    if not root.is_dir():
        raise ValueError(f"--results={root}: no such folder")
    if not any(R.find_arms(root / phase) for phase in phases):
        raise ValueError(
            f"--results={root}: no runs in any phase folder; expected <results>/<phase>/<arm>/ "
            f"with phases {', '.join(phases)}"
        )


def load_all(root: Path, phases: Sequence[str]) -> dict[str, dict]:
    """arm name -> {"dir", "cols", "config"} for every arm of every phase present."""
    arms = {}
    for phase in phases:
        for name, path in R.find_arms(root / phase).items():
            cols = M.load_columns(path)
            if cols.get("step") is None or cols["step"].size == 0:
                continue
            key = name if phase in UNPREFIXED_PHASES else f"{phase}/{name}"
            arms[key] = {"dir": path, "cols": cols, "config": R.load_config(path) or {}}
    return arms


def granularity_rows(prefix: str, granularities: Sequence[str]) -> list[tuple[str, str, str]]:
    """(label, TIS arm, calibrated arm) per granularity: `<prefix>fp8_<g>_tis[_calib]`."""
    return [(g, f"{prefix}fp8_{g}_tis", f"{prefix}fp8_{g}_tis_calib") for g in granularities]


def phase_rows(phase: str) -> list[tuple[str, str, str]]:
    """The distortion table's rows of an own-figure phase: the ladder's formats, else tensor and
    block granularity."""
    if phase.startswith("ladder"):
        return [(lbl, f"{phase}/{t}", f"{phase}/{c}") for lbl, t, c in LADDER]
    return granularity_rows(f"{phase}/", ("tensor", "block"))


def study_arm(run: str) -> str:
    """The arm a study run belongs to: without `__seed<N>`, its `<phase>_seeds/` folder read as
    `<phase>/` (the seed-0 run's), so every seed of an arm is one legend entry."""
    arm = plots.seed_group(run)
    phase, sep, rest = arm.partition("/")
    if sep and phase.endswith("_seeds"):
        base = phase.removesuffix("_seeds")
        return rest if base == "" else f"{base}/{rest}"
    return arm


def has_ratio_dumps(arm: dict) -> bool:
    """Whether the run wrote ratio dumps."""
    return (Path(arm["dir"]) / R.RATIOS_DIR).is_dir()
