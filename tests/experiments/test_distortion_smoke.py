"""experiments/distortion end to end on configs/default.py at tiny sizes: files, r = 1 at theta_0
in every precision, finite numbers."""

from __future__ import annotations

import json
import math

import numpy as np
from experiments_testutil import tiny_config

from calclip_jax.probes.distortion import PRECISIONS, run_distortion
from configs.arms import apply_arm

UPDATES = 2


def _strict(text: str) -> dict:
    def reject(name: str) -> None:
        raise ValueError(f"non-finite {name} in distortion.json")

    return json.loads(text, parse_constant=reject)


def test_distortion_driver_end_to_end(tmp_path):
    # configs/default.py (its arm fp8_block_tis_calib) at tiny sizes; 16 rows: 2 minibatches of
    # 8, one row per simulated device
    config = apply_arm(
        tiny_config(
            str(tmp_path / "cache"),
            **{"sft.updates": 60, "sft.eval_every": 60, "rollout.samples_per_prompt": 8},
        ),
        "fp8_block_tis_calib",
    )
    out = tmp_path / "out"
    lines: list[str] = []
    record = run_distortion(
        config, str(out), num_prompts=2, updates=UPDATES, command=["test"], log=lines.append
    )
    for name in ("distortion.json", "distortion.md", "distortion.png", "tokens.npz"):
        assert (out / name).stat().st_size > 0, name
    assert _strict((out / "distortion.json").read_text())["settings"]["rows"] == 16
    # a progress line per (precision, k), k = 0..K
    for p in PRECISIONS:
        assert sum(line.startswith(f"{p} k=") for line in lines) == UPDATES + 1, p
    stats = record["stats"]
    assert stats["unit_ratio_gap"] == dict.fromkeys(PRECISIONS, 0.0)
    with np.load(out / "tokens.npz") as z:
        mask = z["mask"]
        assert z["advantages"].shape == (16,)
        for p in PRECISIONS:
            logp, old = z[f"logp_{p}"], z[f"old_logp_{p}"]
            assert logp.shape == (UPDATES + 1, *mask.shape)
            np.testing.assert_array_equal(logp[0][mask], old[mask])  # r == 1 exactly
            assert np.isfinite(logp[:, mask]).all()
            assert np.any(logp[-1][mask] != old[mask])  # the updates moved the policy
            if p != "bf16":  # the precision is applied
                assert np.any(old[mask] != z["old_logp_bf16"][mask]), p
    t = stats["tokens"]
    assert t["neg"] > 0 and t["pos"] > 0
    assert set(stats["precisions"]) == set(PRECISIONS) - {"bf16"}
    for p, s in stats["precisions"].items():
        noise = s["logp_noise"]
        for tag in ("neg", "pos"):
            assert math.isfinite(noise["std"][tag]) and noise["p99_abs"][tag] >= 0, p
        assert [u["k"] for u in s["updates"]] == list(range(1, UPDATES + 1))
        for u in s["updates"]:
            assert all(math.isfinite(x) for x in u["ratio_noise"]["std"].values()), p
            for key in ("lower_neg", "lower_neg_ref", "upper_pos", "upper_pos_ref"):
                assert 0.0 <= u["clip"][key] <= 1.0, (p, key)
    assert len(record["update_metrics"]) == UPDATES
    assert all(math.isfinite(m["loss"]) for m in record["update_metrics"])
    assert record["update_metrics"][0]["ratio_log_abs_max"] == 0.0  # the run's r = 1 at theta_0
    assert "| fp8_mx | 2 |" in (out / "distortion.md").read_text()
