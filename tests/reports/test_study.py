"""calclip_jax.reports.study: the study layout's run names, table rows and seed groups."""

from calclip_jax.reports import study
from calclip_jax.reports.study_figures import precision_label


def test_study_arm_folds_seeds_into_the_seed_zero_arm():
    assert study.study_arm("fp8_block_tis__seed3") == "fp8_block_tis"
    assert study.study_arm("stress_seeds/fp8_tensor_tis__seed1") == "stress/fp8_tensor_tis"
    assert study.study_arm("stress/fp8_tensor_tis") == "stress/fp8_tensor_tis"


def test_phase_rows_ladder_formats_else_tensor_and_block():
    assert study.phase_rows("ladder_countdown")[1] == (
        "E5M2",
        "ladder_countdown/fp8_mx_tis_e5m2",
        "ladder_countdown/fp8_mx_tis_calib_e5m2",
    )
    assert study.phase_rows("stress") == [
        ("tensor", "stress/fp8_tensor_tis", "stress/fp8_tensor_tis_calib"),
        ("block", "stress/fp8_block_tis", "stress/fp8_block_tis_calib"),
    ]


def test_seed_runs_and_layout():
    runs = study.seed_runs(("bf16",), (1, 2), ("a",), ("b",), (5,))
    assert runs["GRPO"] == (("bf16",), ("{}", "{}__seed1", "{}__seed2"))
    assert runs["DAPO"][1][2].format("bf16") == "dapo_seeds/dapo_bf16__seed2"
    assert runs["GRPO stress"] == (("a",), ("stress/{}", "stress_seeds/{}__seed5"))
    assert runs["DAPO stress, Countdown"][1] == ("stress_dapo/{}", "stress_dapo_seeds/{}__seed5")
    layout = study.StudyLayout(("x", "s", "r"), ("s",), ("r",), ("block",), runs)
    assert layout.own_figure_phases == ("s", "r")


def test_precision_label_of_the_trainer():
    cfg = lambda p, f="": {"train": {"precision": p, "fwd_format": f}}
    assert precision_label(cfg("bf16")) == "bf16"
    assert precision_label(cfg("fp8_mx", "e2m1")) == "fp4"
    assert precision_label(cfg("fp8_block", "e5m2")) == "e5m2"
    assert precision_label(cfg("fp8_tensor")) == "fp8"
