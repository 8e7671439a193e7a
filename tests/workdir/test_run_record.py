"""The run record: one metrics reader (torn tail, resume, repeats, blank lines), the writer's
truncate_after through it, run discovery, summary.json, and the resolved clip bounds."""

import json
import subprocess
import sys
import warnings

import pytest
from run_fixtures import make_run

from calclip_jax.workdir import run_record as R


def write_lines(path, lines):
    path.write_text("".join(line + "\n" for line in lines[:-1]) + lines[-1])


def resumed_metrics(path):
    """Steps 1-2, a torn step 3, the resume's steps 3 (glued to the fragment) and 2 (a repeat)."""
    write_lines(
        path,
        [
            json.dumps({"step": 1, "entropy": 2.0}),
            "",
            json.dumps({"step": 2, "entropy": 1.9}),
            '{"step": 3, "entr',  # killed mid-write
            '{"step": 3, "ent{"step": 3, "entropy": 1.7}',  # resumed: appended to a fragment
            "   ",
            json.dumps({"step": 2, "entropy": 1.8}),
            '{"step": 4, "entro',  # killed again: a torn last line
        ],
    )


def test_read_metrics_torn_tail_glued_record_repeats_and_blank_lines(tmp_path):
    resumed_metrics(tmp_path / R.METRICS_FILE)
    with pytest.warns(UserWarning, match="line 4") as caught:
        rows = R.read_metrics(tmp_path)
    assert len(caught) == 1  # the torn middle line; the torn last line and blanks are silent
    assert [(r["step"], r["entropy"]) for r in rows] == [(1, 2.0), (2, 1.8), (3, 1.7)]


def test_read_metrics_torn_last_line_is_silent_and_missing_file_is_empty(tmp_path):
    good = [json.dumps({"step": s, "reward_mean": 0.1 * s}) for s in (1, 2, 3)]
    write_lines(tmp_path / R.METRICS_FILE, [*good, '{"step": 4, "reward_me'])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert [r["step"] for r in R.read_metrics(tmp_path)] == [1, 2, 3]
    assert R.read_metrics(tmp_path / "nope") == []


def test_decode_line():
    assert R.decode_line('{"step": 1}') == {"step": 1}
    assert R.decode_line('{"step": 2, "x{"step": 2, "x": 1}') == {"step": 2, "x": 1}
    assert R.decode_line('{"step": 2, "x') is None and R.decode_line("[1, 2]") is None


def test_truncate_after_rewrites_what_the_reader_reads(tmp_path):
    from calclip_jax.workdir.run_logger import RunLogger  # imports jax (train package)

    resumed_metrics(tmp_path / R.METRICS_FILE)
    logger = RunLogger(str(tmp_path), tensorboard=False)
    with pytest.warns(UserWarning, match="line 4"):
        logger.truncate_after(2)
    text = (tmp_path / R.METRICS_FILE).read_text()
    assert text == R.metrics_line({"step": 1, "entropy": 2.0}) + R.metrics_line(
        {"step": 2, "entropy": 1.8}
    )
    logger.write(3, {"entropy": 1.6})
    assert [(r["step"], r["entropy"]) for r in R.read_metrics(tmp_path)][-1] == (3, 1.6)


def test_paths_and_step_files(tmp_path):
    assert R.ratio_dump_path(tmp_path, 7) == tmp_path / "ratios" / "step_000007.npz"
    assert R.sample_path(tmp_path, 12) == tmp_path / "samples" / "step_000012.txt"
    (tmp_path / "ratios").mkdir()
    for name in ("step_000010.npz", "step_000002.npz", "step_x.npz", "step_000003.txt"):
        (tmp_path / "ratios" / name).write_text("")
    assert list(R.step_files(tmp_path / "ratios", "npz")) == [2, 10]
    assert R.step_files(tmp_path / "missing", "npz") == {}


def test_summary_config_and_run_discovery(tmp_path):
    run = make_run(tmp_path / "sweep" / "b", [{"step": 1}], config={"seed": 3})
    assert not R.is_finished(run) and R.load_summary(run) is None
    R.save_summary(run, {"final_step": 1})
    assert R.is_finished(run) and R.load_summary(run) == {"final_step": 1}
    assert R.load_config(run) == {"seed": 3} and R.load_config(tmp_path) is None
    (tmp_path / "sweep" / "a").mkdir()
    (tmp_path / "sweep" / "a" / R.CONFIG_FILE).write_text("{}")
    (tmp_path / "sweep" / "empty").mkdir()
    (tmp_path / "sweep" / "summary.csv").write_text("")
    assert list(R.find_arms(tmp_path / "sweep")) == ["a", "b"]
    assert R.find_runs(tmp_path / "sweep") == R.find_arms(tmp_path / "sweep")
    assert R.find_runs(run) == {"b": run}
    assert R.find_arms(tmp_path / "missing") == {} == R.find_runs(tmp_path / "missing")


def test_arms_read_by_seed_leave_out_empty_results(tmp_path):
    for name in ("x__seed0", "x__seed2", "y", "z__seed1"):
        make_run(tmp_path / name, [{"step": 1}])
    got = R.read_arms_by_seed(tmp_path, lambda p: {} if p.name == "z__seed1" else {"run": p.name})
    assert got == {
        "x": {0: {"run": "x__seed0"}, 2: {"run": "x__seed2"}},
        "y": {0: {"run": "y"}},  # no suffix: seed 0
    }


def test_clip_bounds_from_the_resolved_section(tmp_path):
    resolved = {"clip_bounds": [0.8, 1.28], "rollout_recipe": {"fwd": "e4m3"}}
    run = make_run(tmp_path / "new", [], config={"rl": {"preset": "dapo"}, "resolved": resolved})
    assert R.clip_bounds(run) == (0.8, 1.28)
    assert R.resolved_value(run, "rollout_recipe") == {"fwd": "e4m3"}


@pytest.mark.parametrize(
    ("config", "message"),
    [
        (None, "missing or undecodable"),
        ({"rl": {"preset": "grpo"}}, "lacks resolved.clip_bounds"),
        ({"resolved": {"train_recipe": {}}}, "lacks resolved.clip_bounds"),
        ({"resolved": {"clip_bounds": 0.8}}, r"not \[lower, upper\]"),
    ],
)
def test_clip_bounds_error_names_the_file(tmp_path, config, message):
    run = make_run(tmp_path / "old", [], config=config)
    with pytest.raises(R.RunRecordError, match=message) as err:
        R.clip_bounds(run)
    assert str(run / R.CONFIG_FILE) in str(err.value)


def test_readers_import_neither_jax_nor_ipython():
    code = (
        "import sys, calclip_jax.analysis, calclip_jax.workdir, calclip_jax.reports.notebook; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('jax', 'flax', 'IPython')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_surge_settings_are_the_runs_own_else_the_schema_defaults():
    from calclip_jax.analysis.surge import SURGE_FACTOR, SURGE_WARMUP, SURGE_WINDOW
    from calclip_jax.config import RunConfig

    own = {"log": {"surge_factor": 2.0, "surge_warmup": 3, "surge_window": 1}}
    assert R.surge_settings(own) == (2.0, 3, 1)
    assert R.surge_settings(None) == (SURGE_FACTOR, SURGE_WARMUP, SURGE_WINDOW)
    log = RunConfig().log
    assert (log.surge_factor, log.surge_warmup, log.surge_window) == R.surge_settings({})
