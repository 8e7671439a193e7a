"""`--help` of experiments.train lists every train family (a config whose get_config takes an
arm), and experiments.sweep's every sweep config with its phases or options."""

from __future__ import annotations

from experiments.config_help import CONFIGS_DIR, catalogue, families_text


def test_every_train_family_is_listed_with_its_summary():
    train = families_text("train")
    for name in ("grpo", "dapo", "smollm2", "smollm2_break", "word_problems", "default"):
        assert f"configs/{name}.py[:<arm>]" in train, name
    assert "configs/study.py" not in train  # a sweep config, not a family


def test_sweep_help_lists_the_phases_and_the_train_families():
    text = catalogue("sweep")
    assert "configs/study.py[:<phase>]" in text and "smollm2_powered" in text
    assert "configs/smollm2_break_study.py[:<phase>]" in text
    assert "configs/smollm2_break.py[:<arm>]" in text
    listed = {p.stem for p in CONFIGS_DIR.glob("*.py")} - {"__init__", "arms"}
    assert all(f"configs/{name}.py" in text for name in listed)
