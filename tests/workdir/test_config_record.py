"""config_record: a workdir's config.json refuses other values, naming them; free keys pass."""

from __future__ import annotations

import json

import pytest

from calclip_jax.config import base_config, build_run_spec
from calclip_jax.workdir import run_record as R
from calclip_jax.workdir.config_record import (
    ConfigChangeError,
    changed_keys,
    check_config,
    is_free,
    write_config,
)


def _config(**changes):
    c = base_config()
    for dotted, value in changes.items():
        section, key = dotted.split(".")
        c[section][key] = value
    return c


@pytest.fixture
def workdir(tmp_path):
    c = _config()
    write_config(str(tmp_path), c, build_run_spec(c))
    return tmp_path


def test_new_workdir_and_same_config_pass(tmp_path, workdir):
    assert check_config(str(tmp_path / "new"), _config(), allow=False) == {}
    assert check_config(str(workdir), _config(), allow=False) == {}


def test_a_delayed_run_begun_before_frozen_scales_keeps_its_per_update_scales(tmp_path):
    """`train.delayed_scales`'s default changed the behaviour of delayed scaling: a run begun
    before the knob pushed its scales per update, so only "update" continues it unchanged."""
    c = _config(**{"train.precision": "fp8_delayed"})
    write_config(str(tmp_path), c, build_run_spec(c))
    stored = R.load_config(str(tmp_path))
    del stored["train"]["delayed_scales"]
    (tmp_path / R.CONFIG_FILE).write_text(json.dumps(stored))
    with pytest.raises(ConfigChangeError, match=r"train.delayed_scales: 'update' -> 'batch'"):
        check_config(str(tmp_path), c, allow=False)
    per_update = _config(**{"train.precision": "fp8_delayed", "train.delayed_scales": "update"})
    assert check_config(str(tmp_path), per_update, allow=False) == {}


def test_a_run_begun_before_the_one_forward_program_default_keeps_two_programs(workdir):
    """`train.same_forward`'s default changed the behaviour: a run begun before the knob took
    its old and new log-probs from two programs, so only `same_forward=false` continues it."""
    stored = R.load_config(str(workdir))
    del stored["train"]["same_forward"]
    (workdir / R.CONFIG_FILE).write_text(json.dumps(stored))
    with pytest.raises(ConfigChangeError, match=r"train.same_forward: False -> True"):
        check_config(str(workdir), _config(), allow=False)
    assert check_config(str(workdir), _config(**{"train.same_forward": False}), allow=False) == {}


def test_a_knob_added_after_the_run_began_passes_at_its_default(workdir):
    """config.json of a run begun before train.share_prompt existed: the default (off, the
    behaviour before it) is no change, turning it on is."""
    stored = R.load_config(str(workdir))
    del stored["train"]["share_prompt"]
    del stored["train"]["delayed_scales"]  # no delayed scaling in this run: no change either
    (workdir / R.CONFIG_FILE).write_text(json.dumps(stored))
    assert check_config(str(workdir), _config(), allow=False) == {}
    with pytest.raises(ConfigChangeError, match=r"train.share_prompt: '<absent>' -> True"):
        check_config(str(workdir), _config(**{"train.share_prompt": True}), allow=False)


def test_changed_values_are_refused_naming_every_key(workdir):
    before = (workdir / R.CONFIG_FILE).read_bytes()
    changed = _config(**{"train.learning_rate": 5e-5, "rollout.temperature": 0.5})
    with pytest.raises(ConfigChangeError) as err:
        check_config(str(workdir), changed, allow=False)
    message = str(err.value)
    assert "train.learning_rate: 0.0001 -> 5e-05" in message and "rollout.temperature" in message
    assert "\n" not in message and "--allow_config_change" in message
    assert (workdir / R.CONFIG_FILE).read_bytes() == before
    assert set(check_config(str(workdir), changed, allow=True)) == {
        "train.learning_rate",
        "rollout.temperature",
    }


def test_free_keys_and_growing_steps_pass_but_fewer_steps_do_not(workdir):
    steps = base_config().train.steps
    free = _config(**{"train.steps": steps + 5, "eval.every": 3, "log.quiet": True})
    assert set(check_config(str(workdir), free, allow=False)) == {
        "train.steps",
        "eval.every",
        "log.quiet",
    }
    with pytest.raises(ConfigChangeError, match=r"train\.steps"):
        check_config(str(workdir), _config(**{"train.steps": steps - 1}), allow=False)
    assert is_free("log.anything_new", (None, 1)) and not is_free("seed", (0, 1))


def test_changes_are_recorded_in_config_json(workdir):
    changed = _config(**{"train.learning_rate": 5e-5})
    changes = check_config(str(workdir), changed, allow=True)
    write_config(str(workdir), changed, build_run_spec(changed), changes, after_step=7)
    record = R.load_config(workdir)
    assert record["train"]["learning_rate"] == 5e-5
    assert record["config_changes"] == [
        {"after_step": 7, "changed": {"train.learning_rate": [0.0001, 5e-05]}}
    ]
    assert check_config(str(workdir), changed, allow=False) == {}  # the history is no knob


def test_changed_keys_flattens_and_marks_absent_keys():
    old = {"a": {"b": 1, "c": 2}, "resolved": {"x": 1}}
    assert changed_keys(old, {"a": {"b": 1, "d": 3}}) == {
        "a.c": (2, "<absent>"),
        "a.d": ("<absent>", 3),
    }


def test_unreadable_config_json_is_refused(tmp_path):
    (tmp_path / R.CONFIG_FILE).write_text("{")
    with pytest.raises(ConfigChangeError, match="unreadable"), pytest.warns(UserWarning):
        check_config(str(tmp_path), _config(), allow=False)


def test_new_bytes_in_a_data_file_are_a_change(tmp_path):
    """The file task's knobs name a path; its content hash is in the resolved record, so a
    resumed run on edited data is refused, naming `task.data`."""
    data = tmp_path / "rows.jsonl"
    data.write_text("".join(f'{{"prompt": "{i} + 1 =", "answer": "{i + 1}"}}\n' for i in range(40)))
    c = _config(**{"task.name": "file"})
    c.task.knobs = {"path": str(data)}
    run = tmp_path / "run"
    run.mkdir()
    write_config(str(run), c, build_run_spec(c))
    assert check_config(str(run), c, allow=False, spec=build_run_spec(c)) == {}
    data.write_text(data.read_text().replace('"answer": "40"', '"answer": "39"'))
    with pytest.raises(ConfigChangeError, match=r"task\.data"):
        check_config(str(run), c, allow=False, spec=build_run_spec(c))
