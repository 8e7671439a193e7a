"""Checkpointer.restore_latest: a damaged newest step falls back to the newest intact one."""

from __future__ import annotations

import shutil
from pathlib import Path

import jax.numpy as jnp
import numpy as np
import pytest

from calclip_jax.workdir.checkpoints import DAMAGED_DIR, Checkpointer
from calclip_jax.workdir.checksums import MANIFEST_NAME, manifest_problem


def _state(step: int) -> dict:
    return {"w": jnp.full((64, 16), float(step)), "b": {"c": jnp.arange(8.0) + step}}


def _saved(workdir: Path, steps=(2, 4)) -> None:
    ckpt = Checkpointer(str(workdir))
    for step in steps:
        ckpt.save(step, _state(step))
    ckpt.close()


def _largest(folder: Path) -> Path:
    files = [p for p in folder.rglob("*") if p.is_file() and p.name != MANIFEST_NAME]
    return max(files, key=lambda p: p.stat().st_size)


def _flip(folder: Path) -> None:
    f = _largest(folder)
    blob = bytearray(f.read_bytes())
    blob[len(blob) // 2] ^= 0x01
    f.write_bytes(bytes(blob))


def _truncate(folder: Path) -> None:
    f = _largest(folder)
    f.write_bytes(f.read_bytes()[: f.stat().st_size // 2])


def _delete(folder: Path) -> None:
    _largest(folder).unlink()


def _empty(folder: Path) -> None:
    shutil.rmtree(folder)
    folder.mkdir()


def _unsealed_and_deleted(folder: Path) -> None:  # no manifest: only orbax's read error tells
    (folder / MANIFEST_NAME).unlink()
    for data in folder.rglob("d"):
        shutil.rmtree(data)


DAMAGE = {
    "checksum": (_flip, "checksum mismatch"),
    "truncated": (_truncate, "bytes, expected"),
    "deleted": (_delete, "missing file"),
    "empty": (_empty, "empty folder"),
    "unsealed": (_unsealed_and_deleted, "unreadable"),
}


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_damaged_newest_step_falls_back_with_one_log_line(tmp_path, damage):
    _saved(tmp_path)
    spoil, problem = DAMAGE[damage]
    spoil(tmp_path / "checkpoints" / "4")
    said: list[str] = []
    ckpt = Checkpointer(str(tmp_path))
    step, state = ckpt.restore_latest(_state(0), said.append)
    assert step == 2
    np.testing.assert_array_equal(state["w"], _state(2)["w"])
    assert len(said) == 1 and said[0].startswith("damaged checkpoint step 4 (")
    assert problem in said[0] and "resuming from step 2" in said[0]
    assert (tmp_path / DAMAGED_DIR / "4").is_dir() and ckpt.latest_step() == 2
    ckpt.save(4, _state(4))  # the step is free again
    ckpt.close()
    assert manifest_problem(tmp_path / "checkpoints" / "4") is None


def test_intact_checkpoints_restore_silently_and_all_damaged_start_over(tmp_path):
    _saved(tmp_path)
    said: list[str] = []
    step, state = Checkpointer(str(tmp_path)).restore_latest(_state(0), said.append)
    assert step == 4 and said == [] and float(state["b"]["c"][0]) == 4.0
    for step in (2, 4):
        _flip(tmp_path / "checkpoints" / str(step))
    step, state = Checkpointer(str(tmp_path)).restore_latest(_state(0), said.append)
    assert step == 0 and float(state["b"]["c"][0]) == 0.0
    assert len(said) == 1 and "starting over" in said[0]


def test_manifest_is_written_once_the_async_save_finished(tmp_path):
    ckpt = Checkpointer(str(tmp_path))
    ckpt.save(2, _state(2))
    ckpt.save(4, _state(4))  # seals step 2 before starting
    assert (tmp_path / "checkpoints" / "2" / MANIFEST_NAME).is_file()
    ckpt.close()
    assert (tmp_path / "checkpoints" / "4" / MANIFEST_NAME).is_file()
