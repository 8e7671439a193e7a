"""Surprisal by token role (calclip_jax.reports.working_surprisal), on synthetic batches."""

from __future__ import annotations

import math

import numpy as np
import pytest

from calclip_jax.reports.working_fidelity import seed_steps
from calclip_jax.reports.working_surprisal import batch_totals, surprisal_report

PIECES = ["1", " +", " 2", " =", " 3", ";", " so", " 3"]  # working, working, working, result


def test_batch_totals_sum_minus_log_p_per_role():
    logp = np.log(np.array([0.5, 1.0, 0.25, 1.0, 1.0, 1.0, 1.0, 0.8]))
    got = batch_totals([PIECES, PIECES[:3]], [logp, logp[:3]])
    assert got["working digit"][1] == 3 + 2 and got["result digit"][1] == 1
    assert got["other"][1] == 4 + 1
    assert got["working digit"][0] == pytest.approx(2 * (math.log(2) + math.log(4)))
    assert got["result digit"][0] == pytest.approx(-math.log(0.8))
    assert got["other"][0] == pytest.approx(0.0)
    with pytest.raises(ValueError):
        batch_totals([PIECES], [logp[:3]])  # a log-prob per token


def test_report_pools_token_weighted_halves_and_shares():
    def totals(work: float) -> dict[str, tuple[float, int]]:
        return {"working digit": (work, 10), "result digit": (1.0, 10), "other": (0.0, 20)}

    surprisal = {"a": {0: {5: totals(2.0), 10: totals(6.0), 15: totals(9.0)}}}
    assert seed_steps(surprisal) == {0: [5, 10, 15]}
    text = surprisal_report(surprisal, {0: [5, 10, 15]})
    rows = {r.split("|")[2].strip(): r for r in text.splitlines() if r.startswith("| a |")}
    cells = [c.strip() for c in rows["working digit"].strip("|").split("|")]
    assert cells[2:] == ["0.200", "0.750", f"{100 * 15 / 17:.0f}"]  # late: (6 + 9) / 20 tokens
    assert "steps 5-5" in text and "steps 10-15" in text
    assert surprisal_report(surprisal, {0: []}) == "No dump step is shared by a seed's runs.\n"


def test_each_seed_splits_its_own_steps():
    work = {"working digit": (1.0, 1), "result digit": (0.0, 1), "other": (0.0, 1)}
    late = {"working digit": (3.0, 1), "result digit": (0.0, 1), "other": (0.0, 1)}
    surprisal = {
        "a": {
            0: {5: work, 10: work, 15: late, 20: late},
            1: {5: work, 10: late},  # cut short: its halves are steps 5 and 10
        }
    }
    text = surprisal_report(surprisal, seed_steps(surprisal))
    assert "steps 5-10 (seed 0), 5-5 (seed 1)" in text
    assert "steps 15-20 (seed 0), 10-10 (seed 1)" in text
    row = next(r for r in text.splitlines() if r.startswith("| a | working digit"))
    assert [c.strip() for c in row.strip("|").split("|")][2:4] == ["1.000", "3.000"]
