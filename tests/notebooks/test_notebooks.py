"""The notebooks run top to bottom (nbclient, kernel python3 = this interpreter) against a tiny
sweep made once per session, against a partial sweep (an arm without metrics, an arm cut off
mid-run), against an empty directory, and with raw ratio dumps for the histograms.

The tiny sweep (`configs/sweep_granularity.py:tiny`: 3 arms x 4 RL steps of a 1-layer model) takes
80-130 s on a 2-core CPU; deselect with `-m "not notebooks"` for a quick local loop.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import numpy as np
import pytest
from nbclient import NotebookClient
from subprocess_env import one_device_env

pytestmark = pytest.mark.notebooks

REPO = Path(__file__).resolve().parents[2]
NOTEBOOK_DIR = REPO / "notebooks"
NAMES = ("ratio_distortion", "training_dynamics", "granularity_sweep")
TINY_ARMS = ("bf16", "fp8_tensor_tis", "fp8_tensor_tis_calib")
CALIB_ARM = "fp8_tensor_tis_calib"
FIGURES = {  # figures each notebook must draw on the full tiny sweep (CALCLIP_FIG_DIR/<name>.png)
    "ratio_distortion": {
        "ratio_quantiles",
        "ratio_tails",
        "clip_fractions_by_granularity",
        "calibrated_bounds",
    },
    "training_dynamics": {"training_curves", "entropy_surge"},
    "granularity_sweep": {
        "bars_final_reward",
        "bars_final_eval_accuracy",
        "bars_mismatch_k3",
        "clip_fractions_fp8_vs_shadow",
    },
}
NO_DUMPS = "No ratio dumps in this workdir"


def _sweep_env(cache: Path) -> dict[str, str]:
    """A one-device run's environment, with the SFT / tfds caches in a fresh directory."""
    return one_device_env(XDG_CACHE_HOME=str(cache))


@pytest.fixture(scope="session")
def tiny_sweep(tmp_path_factory) -> Path:
    """A finished tiny granularity sweep (made once per test session)."""
    out = tmp_path_factory.mktemp("notebooks") / "tiny_sweep"
    cmd = [
        sys.executable,
        "-m",
        "experiments.sweep",
        "--config=configs/sweep_granularity.py:tiny",
        f"--workdir={out}",
        "--quiet",
        "--parallel=3",  # arms wait on the one SFT warm start (file lock), then run side by side
    ]
    proc = subprocess.run(
        cmd,
        cwd=REPO,
        env=_sweep_env(out.parent / "cache"),
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    assert proc.returncode == 0, f"tiny sweep failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    assert all((out / arm / "summary.json").exists() for arm in TINY_ARMS), sorted(out.iterdir())
    return out


def run_notebook(name: str, results: Path, fig_dir: Path, monkeypatch) -> str:
    """Executes notebooks/<name>.ipynb reading `results`; returns all its text/markdown output."""
    monkeypatch.setenv("CALCLIP_RESULTS", str(results))
    monkeypatch.setenv("CALCLIP_FIG_DIR", str(fig_dir))
    nb = nbformat.read(NOTEBOOK_DIR / f"{name}.ipynb", as_version=4)
    client = NotebookClient(
        nb,
        timeout=300,
        kernel_name="python3",
        resources={"metadata": {"path": str(NOTEBOOK_DIR)}},
    )
    client.execute()  # raises CellExecutionError on the first failing cell
    texts = []
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            texts.append(out.get("text", ""))
            data = out.get("data", {})
            texts += [data.get("text/markdown", ""), data.get("text/plain", "")]
    return "\n".join(texts)


def saved_figures(fig_dir: Path) -> set[str]:
    return {p.stem for p in fig_dir.glob("*.png")} if fig_dir.exists() else set()


def copy_run(src: Path, dst: Path, *, metrics_lines: int | None = None) -> None:
    """Copies a run's config/metrics/summary; metrics_lines cuts it off like a killed run."""
    dst.mkdir(parents=True)
    shutil.copy(src / "config.json", dst / "config.json")
    if metrics_lines is None:
        shutil.copy(src / "metrics.jsonl", dst / "metrics.jsonl")
        shutil.copy(src / "summary.json", dst / "summary.json")
    elif metrics_lines > 0:
        lines = (src / "metrics.jsonl").read_text().splitlines(keepends=True)
        cut = lines[metrics_lines]
        kept = "".join(lines[:metrics_lines]) + cut[: len(cut) // 2]
        (dst / "metrics.jsonl").write_text(kept)


MAX_NOTEBOOK_BYTES = 600_000  # committed with outputs (notebooks/commit_outputs.py): small
MAX_IMAGE_BYTES = 300_000  # one base64 PNG


def test_notebooks_committed_with_small_outputs():
    for name in NAMES:
        path = NOTEBOOK_DIR / f"{name}.ipynb"
        nb = nbformat.read(path, as_version=4)
        nbformat.validate(nb)
        assert nb.metadata["kernelspec"]["name"] == "python3"
        code = [c for c in nb.cells if c.cell_type == "code"]
        assert "CALCLIP_RESULTS" in code[0].source, f"{name}: first cell must pick the directory"
        assert [c.execution_count for c in code] == list(range(1, len(code) + 1)), name
        outputs = [out for c in code for out in c.outputs]
        assert not [o for o in outputs if o.output_type == "error"], f"{name}: an error stored"
        images = [o.data["image/png"] for o in outputs if "image/png" in o.get("data", {})]
        assert images, f"{name}: figures not stored"
        assert max(len(i) for i in images) <= MAX_IMAGE_BYTES, f"{name}: downscale its images"
        assert path.stat().st_size <= MAX_NOTEBOOK_BYTES, name
        assert str(REPO) not in path.read_text(), f"{name}: a machine's path in the outputs"


@pytest.mark.parametrize("name", NAMES)
def test_notebook_on_tiny_sweep(name, tiny_sweep, tmp_path, monkeypatch):
    text = run_notebook(name, tiny_sweep, tmp_path / "figs", monkeypatch)
    missing = FIGURES[name] - saved_figures(tmp_path / "figs")
    assert not missing, f"{name} drew no {sorted(missing)}"
    assert "3 runs, 3 finished" in text
    if name == "ratio_distortion":
        assert NO_DUMPS in text
    if name == "training_dynamics":
        assert "surge" in text and all(arm in text for arm in TINY_ARMS)


def test_notebooks_on_partial_and_empty_dirs(tiny_sweep, tmp_path, monkeypatch):
    partial = tmp_path / "partial"
    copy_run(tiny_sweep / "bf16", partial / "bf16")
    copy_run(tiny_sweep / "fp8_tensor_tis", partial / "fp8_tensor_tis", metrics_lines=0)
    copy_run(tiny_sweep / CALIB_ARM, partial / CALIB_ARM, metrics_lines=2)
    for name in NAMES:
        text = run_notebook(name, partial, tmp_path / f"figs_{name}", monkeypatch)
        assert "no metrics yet" in text and "incomplete" in text, name
        assert saved_figures(tmp_path / f"figs_{name}"), f"{name} drew nothing"
    empty = tmp_path / "does_not_exist"
    for name in NAMES:
        text = run_notebook(name, empty, tmp_path / f"figs_empty_{name}", monkeypatch)
        assert "No runs found" in text, name
        assert not saved_figures(tmp_path / f"figs_empty_{name}")


def add_resolved_bounds(workdir: Path, bounds: tuple[float, float] = (0.8, 1.2)) -> None:
    """config.json with the resolved section (`run_record.clip_bounds` reads it)."""
    config = json.loads((workdir / "config.json").read_text())
    resolved = {**config.get("resolved", {}), "clip_bounds": list(bounds)}
    (workdir / "config.json").write_text(json.dumps({**config, "resolved": resolved}))


def test_ratio_histograms_from_dumps(tiny_sweep, tmp_path, monkeypatch):
    sweep = tmp_path / "with_dumps"
    rng = np.random.default_rng(0)
    for arm, with_ref in ((CALIB_ARM, True), ("bf16", False)):
        copy_run(tiny_sweep / arm, sweep / arm)
        add_resolved_bounds(sweep / arm)
        (sweep / arm / "ratios").mkdir()
        mask_BT = np.zeros((8, 6), np.float32)
        mask_BT[:, 2:] = 1.0
        arrays = {
            "ratio": np.exp(rng.normal(0.0, 0.15, (8, 6))).astype(np.float32),
            "advantages": rng.normal(size=8).astype(np.float32),  # [B]: broadcast to tokens
            "mask": mask_BT,
        }
        if with_ref:
            arrays["ratio_ref"] = np.exp(rng.normal(0.0, 0.05, (8, 6))).astype(np.float32)
            arrays["old_prob"] = rng.uniform(0.0, 1.0, (8, 6)).astype(np.float32)
        np.savez(sweep / arm / "ratios" / "step_000004.npz", **arrays)
    text = run_notebook("ratio_distortion", sweep, tmp_path / "figs", monkeypatch)
    assert NO_DUMPS not in text
    assert "static bounds not drawn" not in text  # both configs carry resolved.clip_bounds
    assert {f"ratio_hist_{CALIB_ARM}", "ratio_hist_bf16"} <= saved_figures(tmp_path / "figs")
    assert "precision_noise" in saved_figures(tmp_path / "figs")  # the FP8 arm with a shadow
    assert "std d A<0" in text
