"""The calibrating arms' bounds over RL steps (calclip_jax.reports.calibration_figure)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import numpy as np

from calclip_jax.reports.calibration_figure import calibrating_arms, calibration_bounds
from calclip_jax.reports.paired_arms import load_seeded_runs
from calclip_jax.workdir.run_record import METRICS_FILE, metrics_line

NAN = float("nan")


def _write_run(folder: Path, rows: list[dict]) -> None:
    folder.mkdir(parents=True)
    (folder / METRICS_FILE).write_text("".join(metrics_line(r) for r in rows))


def _sweep(root: Path) -> Path:
    """A calibrating arm (asks for 0.01-0.05, held at 0.6) and a TIS arm, seed 1, 6 RL steps."""
    calib = [
        {
            "step": t,
            "reward_mean": 0.5,
            "clip_lower": 0.6,
            "clip_upper": 1.4,
            "calib_lower_raw": 0.01 * t if t % 2 else NAN,  # calibrations at odd steps only
            "calib_q_lower": 0.0,
        }
        for t in range(1, 7)
    ]
    _write_run(root / "calib__seed1", calib)
    _write_run(root / "tis__seed1", [{"step": t, "reward_mean": 0.4} for t in range(1, 7)])
    return root


def test_only_arms_that_calibrated_are_drawn(tmp_path):
    runs = load_seeded_runs(_sweep(tmp_path))
    assert calibrating_arms(runs) == ["calib"]
    fig = calibration_bounds(runs, save=tmp_path / "bounds.png")
    assert (tmp_path / "bounds.png").read_bytes().startswith(b"\x89PNG")
    low = fig.axes[0]
    assert low.get_yscale() == "log"
    (line,) = low.get_lines()
    assert list(line.get_ydata()) == [0.6] * 6
    asked = np.ma.filled(low.collections[0].get_offsets(), np.nan)[:, 1]
    np.testing.assert_allclose(asked[np.isfinite(asked)], [0.01, 0.03, 0.05])
    assert calibration_bounds({"tis": runs["tis"]}) is None


def test_an_arms_seeds_share_its_colour_and_differ_in_line_style(tmp_path):
    root = _sweep(tmp_path)
    rows = [{"step": t, "clip_lower": 0.6, "calib_lower_raw": 0.02} for t in range(1, 7)]
    _write_run(root / "calib__seed2", rows)
    lines = calibration_bounds(load_seeded_runs(root)).axes[0].get_lines()
    assert [line.get_label() for line in lines] == ["calib (seed 1)", "calib (seed 2)"]
    assert lines[0].get_color() == lines[1].get_color()
    assert lines[0].get_linestyle() != lines[1].get_linestyle()


def test_cli_draws_the_bounds_figure(tmp_path):
    sweep = _sweep(tmp_path / "sweep")
    out = tmp_path / "bounds.png"
    cmd = [sys.executable, "-m", "experiments.paired_report", f"--sweep={sweep}", "--n_boot=50"]
    cmd += ["--baseline=tis", f"--bounds_figure={out}"]
    subprocess.run(cmd, capture_output=True, text=True, check=True)
    assert out.read_bytes().startswith(b"\x89PNG")
