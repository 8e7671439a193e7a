"""What put a sweep's A<0 tokens below the lower bound (reports/clip_origins.py), on synthetic
ratio dumps: the trainer's ratio is the shadow's times planted noise."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from calclip_jax.reports.clip_origins import clip_origin_table, clip_origins
from calclip_jax.workdir import run_record as R
from calclip_jax.workdir.run_logger import RunLogger

B, T, LOWER = 64, 8, 0.8


def _run(folder: Path, seed: int, noise: float, with_ref: bool = True) -> dict[str, list]:
    """Dumps at steps 10 and 20 (step 10 logs a calibrated bound 0.6, step 20 none: the static
    0.8); returns the clipped A<0 tokens' trainer log r, shadow log r and shadow-clipped flags."""
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True)
    logger = RunLogger(str(folder), tensorboard=False)
    R.config_path(folder).write_text(json.dumps({"resolved": {"clip_bounds": [LOWER, 1.28]}}))
    logger.write(10, {"clip_lower": 0.6})
    logger.write(20, {"reward_mean": 0.5})
    seen: dict[str, list] = {"log_r": [], "shadow": [], "below": [], "noise": [], "move": []}
    for s, lower in ((10, 0.6), (20, LOWER)):
        adv = np.where(np.arange(B) % 2 == 0, -1.0, 1.0).astype(np.float32)
        mask = np.arange(T)[None] < rng.integers(3, T + 1, size=(B, 1))
        ratio_ref = np.exp(rng.normal(0.0, 0.1, (B, T))).astype(np.float32)
        ratio = (ratio_ref * np.exp(rng.normal(0.0, noise, (B, T)))).astype(np.float32)
        dump = {"ratio": ratio, "advantages": adv, "mask": mask}
        if with_ref:
            dump["ratio_ref"] = ratio_ref
        logger.write_ratio_dump(s, dump)
        hit = mask & (adv[:, None] < 0) & (ratio < lower)
        seen["log_r"] += list(np.log(ratio[hit].astype(np.float64)))
        seen["shadow"] += list(np.log(ratio_ref[hit].astype(np.float64)))
        seen["below"] += list(ratio_ref[hit] < lower)
        neg = mask & (adv[:, None] < 0)
        move = np.log(ratio_ref[neg].astype(np.float64))
        seen["move"] += list(move)
        seen["noise"] += list(np.log(ratio[neg].astype(np.float64)) - move)
    return seen


def test_each_arm_pools_its_seeds_clipped_tokens_at_each_steps_bound(tmp_path):
    noisy = {k: _run(tmp_path / f"noisy__seed{k}", k, 0.5) for k in (1, 2)}
    _run(tmp_path / "plain__seed1", 7, 0.0)
    _run(tmp_path / "old__seed1", 8, 0.5, with_ref=False)  # dumps without the shadow: left out
    rows = {r.arm: r for r in clip_origins(tmp_path, n_boot=300)}
    assert list(rows) == ["noisy", "plain"] and rows["noisy"].seeds == (1, 2)
    mine = rows["noisy"]
    pooled = {k: [v for s in (1, 2) for v in noisy[s][k]] for k in ("log_r", "shadow", "below")}
    assert mine.tokens == len(pooled["log_r"]) > 50
    assert mine.log_r.estimate == pytest.approx(np.mean(pooled["log_r"]))
    assert mine.shadow_log_r.estimate == pytest.approx(np.mean(pooled["shadow"]))
    assert mine.shadow_clipped.estimate == pytest.approx(np.mean(pooled["below"]))
    for k, seed_rows in noisy.items():  # each seed's own value
        assert mine.log_r.per_seed[k - 1] == pytest.approx(np.mean(seed_rows["log_r"]))
    # noise did the clipping: the shadow barely moved those tokens and rarely clips them
    assert mine.log_r.high < -0.3 and abs(mine.shadow_log_r.estimate) < 0.1
    assert mine.shadow_clipped.estimate < 0.3
    # over all A<0 tokens: the planted noise (0.5) is five times the planted move (0.1)
    pooled |= {k: [v for s in (1, 2) for v in noisy[s][k]] for k in ("noise", "move")}
    rms = lambda k: np.sqrt(np.mean(np.square(pooled[k])))
    assert mine.noise_rms.estimate == pytest.approx(rms("noise"))
    assert mine.move_rms.estimate == pytest.approx(rms("move"))
    assert mine.noise_to_move.estimate == pytest.approx(rms("noise") / rms("move"))
    assert 0.45 < mine.noise_rms.low < mine.noise_rms.high < 0.55
    assert 3.5 < mine.noise_to_move.low < 5 < mine.noise_to_move.high < 7
    assert len(mine.noise_rms.per_seed) == 2
    plain = rows["plain"]  # trainer = shadow: every clipped token is the shadow's too
    assert plain.shadow_clipped.estimate == 1.0
    assert plain.log_r.estimate == pytest.approx(plain.shadow_log_r.estimate)
    assert plain.noise_rms.estimate < 1e-6 and plain.move_rms.estimate == pytest.approx(0.1, 0.2)
    table = clip_origin_table(list(rows.values()))
    assert "| noisy | 2 |" in table and "(100)" in table
