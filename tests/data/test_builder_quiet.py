"""Preparing a task's data locally prints nothing (no tfds download notices, no progress bars,
no per-builder config warning) while other absl warnings still pass."""

import logging

from calclip_jax.data import SPLITS, get_task, load_split
from calclip_jax.data.builder import CUSTOM_CONFIG_NOTICE


def test_prepare_and_read_are_silent(tmp_path, capfd, caplog):
    task = get_task("arithmetic", num_train=50, num_test=10)
    with caplog.at_level(logging.INFO):
        sizes = [len(load_split(task, split, tmp_path)) for split in SPLITS]
    assert sizes == [50, 10]
    out, err = capfd.readouterr()
    assert "Downloading and preparing" not in out + err
    assert "downloaded and prepared" not in out + err
    assert "Generating" not in err and "Shuffling" not in err  # tfds's tqdm bars
    assert not [r for r in caplog.records if CUSTOM_CONFIG_NOTICE in r.getMessage()]


def test_other_absl_warnings_still_pass(caplog):
    with caplog.at_level(logging.WARNING):
        logging.getLogger("absl").warning("a real warning")
    assert [r.getMessage() for r in caplog.records] == ["a real warning"]
