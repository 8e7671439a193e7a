"""RunLogger: dashboards get grouped tags (train/, eval/, calib/, mismatch/), metrics.jsonl keeps
the flat keys; W&B is optional (a fake module stands in for wandb) and named when missing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import types
from pathlib import Path
from typing import ClassVar

import pytest
import tensorboardX

from calclip_jax.config import ConfigError
from calclip_jax.workdir import run_record as R
from calclip_jax.workdir.metric_groups import GROUPS, tag
from calclip_jax.workdir.run_logger import RunLogger
from calclip_jax.workdir.wandb_sink import WandbSink, require_wandb

REPO = Path(__file__).resolve().parents[2]
ROW = {
    "reward_mean": 0.5,
    "entropy": 1.2,
    "clip_frac_lower_neg": 0.1,
    "eval_accuracy": 0.75,
    "calib_q_lower": 0.8,
    "clip_lower": 0.79,
    "calibrated": 1.0,
    "mismatch_k3": 1e-4,
    "is_weight_mean": 1.0,
    "token_mult_prob_error": 0.9,
    "step_time_s": 2.0,
}
EXPECTED = {
    "train/reward_mean",
    "train/entropy",
    "train/clip_frac_lower_neg",
    "eval/accuracy",
    "calib/q_lower",
    "calib/clip_lower",
    "calib/calibrated",
    "mismatch/mismatch_k3",
    "mismatch/is_weight_mean",
    "mismatch/token_mult_prob_error",
    "train/step_time_s",
}


class FakeWriter:
    """Stands in for tensorboardX.SummaryWriter: records add_scalar calls."""

    instances: ClassVar[list[FakeWriter]] = []

    def __init__(self, logdir: str) -> None:
        self.logdir, self.scalars, self.closed = logdir, {}, False
        FakeWriter.instances.append(self)

    def add_scalar(self, name: str, value: float, step: int) -> None:
        self.scalars[name] = (value, step)

    def flush(self) -> None:
        pass

    def close(self) -> None:
        self.closed = True


def fake_wandb() -> types.ModuleType:
    """A module with wandb.init(...) -> run with .log(data, step=) and .finish()."""
    module = types.ModuleType("wandb")
    module.runs = []

    class Run:
        def __init__(self, **kwargs):
            self.init, self.logged, self.finished = kwargs, [], False

        def log(self, data, step):
            self.logged.append((step, data))

        def finish(self):
            self.finished = True

    def init(**kwargs):
        module.runs.append(Run(**kwargs))
        return module.runs[-1]

    module.init = init
    return module


def test_every_key_lands_in_one_of_four_groups():
    assert {tag(k) for k in ROW} == EXPECTED
    assert {tag(k).split("/")[0] for k in ROW} == set(GROUPS)


def test_tensorboard_and_wandb_get_grouped_tags_jsonl_keeps_keys(tmp_path, monkeypatch):
    monkeypatch.setattr(tensorboardX, "SummaryWriter", FakeWriter)
    wandb = fake_wandb()
    monkeypatch.setitem(sys.modules, "wandb", wandb)
    sink = WandbSink("proj", str(tmp_path), {"seed": 3})
    logger = RunLogger(str(tmp_path), wandb=sink)
    logger.write(4, {**ROW, "note": "text"})
    logger.close()
    writer = FakeWriter.instances[-1]
    assert set(writer.scalars) == EXPECTED and writer.closed
    assert writer.scalars["eval/accuracy"] == (0.75, 4)
    (run,) = wandb.runs
    assert run.init == {"project": "proj", "name": tmp_path.name, "dir": str(tmp_path),
                        "config": {"seed": 3}}  # fmt: skip
    assert run.logged == [(4, {name: writer.scalars[name][0] for name in EXPECTED})]
    assert run.finished
    (row,) = R.read_metrics(tmp_path)
    assert row == {"step": 4, **ROW, "note": "text"}


def test_missing_wandb_is_a_config_error_naming_the_knob(monkeypatch):
    monkeypatch.setitem(sys.modules, "wandb", None)  # import wandb -> ImportError
    with pytest.raises(ConfigError, match=r"log\.wandb_project .* pip install wandb"):
        require_wandb()


FAKE_TORCH = """import os, pathlib
pathlib.Path(os.environ["TORCH_MARK"]).touch()
Tensor = type("Tensor", (), {})
"""
LOG_A_ROW = """
import json, os, pathlib, sys
if sys.argv[2] == "torch_first":
    import torch
from calclip_jax.workdir.run_logger import RunLogger
logger = RunLogger(sys.argv[1])
logger.write(1, {"loss": 0.5})
logger.close()
imported = pathlib.Path(os.environ["TORCH_MARK"]).exists()
import tensorboardX.writer
import torch  # importable afterwards
takes_torch = tensorboardX.writer.numpy_compatible is torch.Tensor
print(json.dumps({"imported_by_then": imported, "tensorboardx_takes_torch": takes_torch}))
"""


@pytest.mark.parametrize("torch_first", [False, True])
def test_tensorboard_writer_does_not_import_torch(tmp_path, torch_first):
    """Where torch is installed beside tensorboardX (a fake torch here, which marks its import),
    the run's TensorBoard writer does not import it (seconds at every run start), does not stop
    a later import, and leaves a torch imported before as tensorboardX would use it."""
    (tmp_path / "site" / "torch").mkdir(parents=True)
    (tmp_path / "site" / "torch" / "__init__.py").write_text(FAKE_TORCH)
    workdir = tmp_path / "run"
    env = {**os.environ, "TORCH_MARK": str(tmp_path / "torch_imported")}
    env["PYTHONPATH"] = os.pathsep.join([str(tmp_path / "site"), str(REPO)])
    order = "torch_first" if torch_first else "logger_first"
    cmd = [sys.executable, "-c", LOG_A_ROW, str(workdir), order]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    seen = json.loads(proc.stdout.strip().splitlines()[-1])
    assert seen == {"imported_by_then": torch_first, "tensorboardx_takes_torch": torch_first}
    assert list((workdir / R.TB_DIR).glob("events.out.tfevents.*")), "no TensorBoard events"
    assert R.read_metrics(workdir) == [{"step": 1, "loss": 0.5}]
