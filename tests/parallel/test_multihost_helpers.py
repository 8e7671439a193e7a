"""The multi-process helpers on one process: placement, the lost-contact note, checkpoint steps."""

from __future__ import annotations

import jax
import numpy as np

from calclip_jax.parallel.mesh import batch_sharding, make_mesh, replicated
from calclip_jax.parallel.multihost import lost_contact_note, to_global
from calclip_jax.workdir.run_record import checkpoint_steps


def test_to_global_places_host_and_device_arrays_as_sharded():
    mesh = make_mesh(data=2, fsdp=None, tensor=1, devices=jax.devices()[:4])
    rows = np.arange(8 * 3, dtype=np.float32).reshape(8, 3)
    rows[0, 0] = np.nan  # a sentinel every process holds: nothing compares it
    tree = {"host": rows, "device": jax.numpy.asarray(rows), "flag": np.bool_(True)}
    shardings = {"host": batch_sharding(mesh), "device": batch_sharding(mesh)}
    shardings["flag"] = replicated(mesh)
    placed = to_global(tree, shardings)
    for key in ("host", "device"):
        assert placed[key].sharding == batch_sharding(mesh)
        assert placed[key].sharding.shard_shape(rows.shape) == (2, 3)
        np.testing.assert_array_equal(np.asarray(placed[key]), rows)
    assert bool(placed["flag"]) and placed["flag"].sharding == replicated(mesh)


def test_lost_contact_note_says_where_a_rerun_resumes():
    note = lost_contact_note(RuntimeError("Gloo all-reduce failed: reset\nmore"), 30, 20)
    assert note.startswith("error: process 0 of 1")
    assert "Gloo all-reduce failed: reset)" in note and "more" not in note
    assert "within 30 s" in note and "resume from RL step 20" in note
    assert "no checkpoint yet" in lost_contact_note(RuntimeError(""), 30, 0)


def test_checkpoint_steps_lists_finalized_folders_only(tmp_path):
    assert checkpoint_steps(tmp_path) == []
    for name in ("10", "2", "4.orbax-checkpoint-tmp-1", "notes"):
        (tmp_path / "checkpoints" / name).mkdir(parents=True)
    assert checkpoint_steps(tmp_path) == [2, 10]
