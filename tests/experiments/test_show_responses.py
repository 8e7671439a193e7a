"""A ratio dump's responses as text (calclip_jax.probes.dump_responses,
experiments.show_responses), on a tiny run that was extended (config.json lists the change)."""

from __future__ import annotations

import subprocess
import sys

import pytest
from experiments_testutil import tiny_config

from calclip_jax.probes.dump_responses import dump_responses, select
from calclip_jax.probes.eval_checkpoint import EvalError, run_spec_of
from calclip_jax.train.rl_loop import run_experiment
from calclip_jax.workdir import run_record as R
from calclip_jax.workdir.config_record import CHANGES_KEY
from calclip_jax.workdir.ratio_dumps import dump_rows, dump_steps


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """1 RL step, then extended to 2: both steps dump their batch."""
    root = tmp_path_factory.mktemp("show")
    cache, run = str(root / "cache"), root / "run"
    for steps in (1, 2):
        config = tiny_config(cache, **{"train.steps": steps, "log.ratios_every": 1})
        run_experiment(config, str(run), log=lambda _: None)
    assert CHANGES_KEY in R.load_config(run)  # the extension is on record
    return run


def test_rows_decode_to_their_prompts_and_responses(run):
    step, got = dump_responses(run)
    assert step == 2 and list(dump_steps(run)) == [1, 2]
    rows = dump_rows(dump_steps(run)[2])
    tokenizer, config = run_spec_of(run).tokenizer, run_spec_of(run).config
    group = config.rollout.samples_per_prompt
    assert len(got) == len(rows["tokens"]) == config.rollout.prompts_per_step * group
    prompts = [r.prompt for r in got]
    for g in range(0, len(got), group):  # a group's samples share their prompt
        assert len(set(prompts[g : g + group])) == 1 and prompts[g]
        assert abs(sum(r.advantage for r in got[g : g + group])) < 1e-4  # GRPO: centred
    assert len(set(prompts)) > 1
    for r, ids, mask in zip(got, rows["tokens"], rows["response_mask"], strict=True):
        response_ids = ids[mask > 0]
        assert r.length == len(response_ids) <= config.rollout.max_new_tokens
        assert r.finished == (tokenizer.eos_id in response_ids.tolist())
        assert r.response == tokenizer.decode_response(response_ids)[0]


def test_selection_by_sign_and_finish(run):
    _, got = dump_responses(run, step=1)
    neg, pos = select(got, "neg"), select(got, "pos")
    assert all(r.advantage < 0 for r in neg) and all(r.advantage > 0 for r in pos)
    assert len(neg) + len(pos) + len(select(got, "zero")) == len(got)
    assert all(not r.finished for r in select(got, unfinished=True))
    assert len(select(got, unfinished=True)) == sum(not r.finished for r in got)
    with pytest.raises(ValueError, match="sign"):
        select(got, "negative")
    with pytest.raises(EvalError, match=r"no ratio dump at RL step 7; dumps at \[1, 2\]"):
        dump_responses(run, step=7)


def test_cli_prints_one_line_per_response_and_names_a_missing_dump(run):
    cmd = [sys.executable, "-m", "experiments.show_responses", f"--workdir={run}"]
    done = subprocess.run([*cmd, "--step=1", "--limit=0"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    head, *lines = done.stdout.strip().splitlines()
    _, got = dump_responses(run, step=1)
    assert f"RL step 1: {len(got)} responses" in head and len(lines) == len(got)
    assert all(f"A={r.advantage:+.2f}" in line for r, line in zip(got, lines, strict=True))
    bad = subprocess.run([*cmd, "--step=9"], capture_output=True, text=True)
    assert bad.returncode != 0 and "no ratio dump at RL step 9" in bad.stderr
