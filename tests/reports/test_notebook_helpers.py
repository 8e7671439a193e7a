"""calclip_jax.reports.notebook: the run set the notebooks load, and the static bounds."""

from run_fixtures import arm_config, make_run

from calclip_jax.reports import notebook as nb


def test_load_run_set_statuses_and_planned_steps(tmp_path, capsys):
    make_run(tmp_path / "done", [{"step": 1, "reward_mean": 0.5}], summary={"final_step": 1})
    make_run(tmp_path / "killed", [{"step": 1}], config=arm_config("bf16", False))
    runs, rows, configs, cols = nb.load_run_set(tmp_path)
    assert list(runs) == ["done", "killed"] and configs["done"] is None
    assert rows["done"]["status"] == "finished" and rows["killed"]["status"] == "incomplete"
    assert rows["killed"]["planned_steps"] == 8 and cols["done"]["reward_mean"][0] == 0.5
    assert f"{tmp_path}: 2 runs, 1 finished, 1 not finished" in capsys.readouterr().out
    assert list(nb.load_run_set(tmp_path / "done").runs) == ["done"]  # a single workdir


def test_static_bounds_resolved_or_said(tmp_path, capsys):
    config = {**arm_config("bf16", False), "resolved": {"clip_bounds": [0.8, 1.2]}}
    assert nb.static_bounds(make_run(tmp_path / "new", [], config=config)) == (0.8, 1.2)
    old = make_run(tmp_path / "old", [], config=arm_config("bf16", False))
    assert nb.static_bounds(old) is None
    out = capsys.readouterr().out
    assert str(old / "config.json") in out and "static bounds not drawn" in out
