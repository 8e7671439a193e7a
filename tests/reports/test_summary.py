"""Summary rows on fabricated workdirs, and the CSV / Markdown tables."""

import csv

import pytest
from run_fixtures import arm_config, make_run

from calclip_jax.reports import summary as S

ENTROPY = [2.0, 1.5, 1.0, 0.9, 0.8, 0.8, 0.9, 1.3]  # surge at step 8 with k = 1.5


def records(entropy=ENTROPY, reward_shift=0.0):
    out = []
    for i, e in enumerate(entropy):
        step = i + 1
        rec = {
            "step": step,
            "reward_mean": 0.1 * step + reward_shift,
            "entropy": e,
            "step_time_s": 2.0,
            "clip_frac_lower_neg": 0.01 * step,
            "clip_frac_upper_pos": 0.002,
            "clip_frac_lower_neg_ref": 0.005 if step % 2 == 0 else None,
            "clip_frac_upper_pos_ref": None,
            "mismatch_k3": 1e-4 * step,
        }
        if step in (1, 4):
            rec["eval_accuracy"] = 0.25 * step / 4 + 0.1
        out.append(rec)
    out[-1]["reward_mean"] = None  # a NaN reward at the last step is skipped, not averaged
    return out


def test_row_values_of_a_finished_run(tmp_path):
    make_run(
        tmp_path / "fp8_block_tis",
        records(),
        config=arm_config("fp8_block", False),
        summary={"final_step": 8, "wall_time_s": 123.5},
    )
    row = S.summarize_run(tmp_path / "fp8_block_tis")
    assert list(row) == list(S.COLUMNS)
    assert row["arm"] == "fp8_block_tis" and row["status"] == "finished"
    assert row["final_step"] == 8
    assert row["final_reward"] == pytest.approx(0.4)  # steps 1-7 of the last 10 (8 is null)
    assert row["final_eval_accuracy"] == pytest.approx(0.35)  # last logged (step 4)
    assert row["entropy_peak"] == 2.0
    assert row["entropy_surge"] is True and row["entropy_surge_step"] == 8
    assert row["clip_frac_lower_neg"] == pytest.approx(0.045)
    assert row["clip_frac_lower_neg_ref"] == pytest.approx(0.005)
    assert row["clip_frac_upper_pos_ref"] is None
    assert row["mismatch_k3"] == pytest.approx(4.5e-4)
    assert row["wall_time_s"] == 123.5
    assert (row["train_precision"], row["calibration"], row["seed"]) == ("fp8_block", False, 0)


def test_incomplete_missing_and_config_surge_factor(tmp_path):
    make_run(tmp_path / "killed", records(), config=arm_config("bf16", False, surge_factor=3.0))
    row = S.summarize_run(tmp_path / "killed")
    assert row["status"] == "incomplete"
    assert row["wall_time_s"] == pytest.approx(16.0)  # sum of step_time_s
    assert row["entropy_surge"] is False and row["entropy_surge_step"] is None  # k from config
    assert S.summarize_run(tmp_path / "killed", surge_k=1.5)["entropy_surge_step"] == 8
    # the one-step rise to 1.3 does not lift a 10-step mean above 1.5 x its minimum
    assert (
        S.summarize_run(tmp_path / "killed", surge_k=1.5, surge_window=10)["entropy_surge"] is False
    )
    missing = S.summarize_run(tmp_path / "never_ran")
    assert missing["status"] == "missing" and missing["final_reward"] is None
    assert missing["entropy_surge"] is None


def test_sweep_tables_and_seed_aggregation(tmp_path):
    for seed, shift in [(0, 0.0), (1, 0.2)]:
        make_run(
            tmp_path / f"bf16__seed{seed}",
            records([1.0] * 8, shift),
            config=arm_config("bf16", False, seed),
            summary={"wall_time_s": 10.0},
        )
    make_run(tmp_path / "crashed", records()[1:2])
    rows = S.summarize_sweep(tmp_path, failed=["crashed"])
    assert [r["arm"] for r in rows] == ["bf16__seed0", "bf16__seed1", "crashed"]
    assert rows[2]["status"] == "failed"

    agg = S.aggregate_seeds(rows)
    assert [a["arm"] for a in agg] == ["bf16", "crashed"]
    assert agg[0]["n_seeds"] == 2 and agg[0]["train_precision"] == "bf16"
    assert agg[0]["final_reward"] == pytest.approx(0.4 + 0.1)
    assert agg[0]["final_reward_std"] == pytest.approx(0.2 / 2**0.5)
    assert agg[0]["entropy_surge"] == 0.0

    csv_path, md_path = S.write_summary(tmp_path, rows)
    with csv_path.open() as f:
        read = list(csv.DictReader(f))
    assert [r["arm"] for r in read] == ["bf16__seed0", "bf16__seed1", "crashed"]
    assert float(read[1]["final_reward"]) == pytest.approx(0.6)
    assert read[2]["final_eval_accuracy"] == ""
    md = md_path.read_text()
    assert "| bf16__seed1 | finished | 8 |" in md and "| crashed | failed |" in md
    assert "Mean and std over seeds" in md


def test_format_value():
    assert [S.format_value(v) for v in (None, True, False, 0.123456, float("nan"), 3, "x")] == [
        "-",
        "yes",
        "no",
        "0.1235",
        "-",
        "3",
        "x",
    ]
