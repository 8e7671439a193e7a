"""cached_sft: an intact cache is reused; a damaged one is rebuilt, with one log line."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from calclip_jax.train.sft import cached_sft
from calclip_jax.workdir.checksums import MANIFEST_NAME

KEY = "k123"


class Trainer:
    """A stand-in SFT: params + 1, counting its calls."""

    calls = 0

    def __call__(self, params):
        self.calls += 1
        return {"w": params["w"] + 1.0}, {"accuracy": 0.5, "updates": 3}


def _entry(cache: Path) -> Path:
    return cache / "sft" / KEY


def _largest(folder: Path) -> Path:
    files = [p for p in folder.rglob("*") if p.is_file() and p.name != MANIFEST_NAME]
    return max(files, key=lambda p: p.stat().st_size)


def _flip(cache: Path) -> None:
    f = _largest(_entry(cache))
    blob = bytearray(f.read_bytes())
    blob[len(blob) // 2] ^= 0x01
    f.write_bytes(bytes(blob))


def _truncate(cache: Path) -> None:
    f = _largest(_entry(cache))
    f.write_bytes(f.read_bytes()[:10])


def _no_report(cache: Path) -> None:
    (cache / "sft" / f"{KEY}.json").unlink()


def _torn_report(cache: Path) -> None:
    (cache / "sft" / f"{KEY}.json").write_text('{"accur')


def _empty(cache: Path) -> None:
    shutil.rmtree(_entry(cache))
    _entry(cache).mkdir()


DAMAGE = {
    "checksum": _flip,
    "truncated": _truncate,
    "no report": _no_report,
    "torn report": _torn_report,
    "empty": _empty,
}
PARAMS = {"w": jnp.arange(512.0).reshape(32, 16)}
SHAPES = jax.eval_shape(lambda: PARAMS)


class Start:
    """The starting params, counting how often they were made (initialized or read)."""

    calls = 0

    def __call__(self):
        self.calls += 1
        return PARAMS


def sft(cache: Path, train: Trainer, log=print, start: Start | None = None):
    return cached_sft(str(cache), KEY, start or Start(), SHAPES, train, log=log)


def test_intact_cache_is_reused_without_making_the_starting_params(tmp_path):
    train, start = Trainer(), Start()
    trained, _ = sft(tmp_path, train, start=start)
    assert start.calls == 1
    said: list[str] = []
    params, report = sft(tmp_path, train, log=said.append, start=start)
    assert train.calls == 1 and start.calls == 1 and report == {"accuracy": 0.5, "updates": 3}
    np.testing.assert_array_equal(params["w"], PARAMS["w"] + 1.0)
    assert params["w"].dtype == trained["w"].dtype and params["w"].sharding == trained["w"].sharding
    assert said == [f"sft: using cached warm start {_entry(tmp_path)}"]
    assert (_entry(tmp_path) / MANIFEST_NAME).is_file()


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_damaged_cache_is_rebuilt(tmp_path, damage):
    train = Trainer()
    sft(tmp_path, train)
    DAMAGE[damage](tmp_path)
    said: list[str] = []
    params, report = sft(tmp_path, train, log=said.append)
    assert train.calls == 2 and report["accuracy"] == 0.5
    np.testing.assert_array_equal(params["w"], PARAMS["w"] + 1.0)
    assert len(said) == 1 and "is damaged" in said[0] and "rebuilding" in said[0]
    # the rebuilt entry is intact
    params, _ = sft(tmp_path, train, log=said.append)
    assert train.calls == 2 and json.loads((tmp_path / "sft" / f"{KEY}.json").read_text())
    np.testing.assert_array_equal(params["w"], PARAMS["w"] + 1.0)
