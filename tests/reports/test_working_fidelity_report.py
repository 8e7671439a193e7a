"""A sweep's working fidelity: batch shares, arms paired over shared dump steps, the figure
(calclip_jax.reports.working_fidelity)."""

from __future__ import annotations

import math

from calclip_jax.data.tasks.column_working import column_working
from calclip_jax.probes.dump_responses import DumpedResponse
from calclip_jax.reports.working_fidelity import (
    CARRY,
    JOINT,
    LABELS,
    REPORTED,
    WRITTEN,
    batch_shares,
    fidelity_report,
    fidelity_rows,
    payoff_rows,
    seed_means,
)
from calclip_jax.reports.working_fidelity_figure import fidelity_figure


def response(prompt: str, text: str) -> DumpedResponse:
    return DumpedResponse(
        row=0, advantage=0.0, length=1, finished=True, prompt=prompt, response=text
    )


def test_batch_shares_count_only_prompts_that_pose_a_sum():
    q = "user\nCompute 47 + 38 column by column, then give the result.\nassistant\n"
    batch = [
        response(q, column_working((47, 38))),  # every check
        response(q, "8 + 7 = 15; so 47 + 38 = 85"),  # a column dropped, result right
        response(q, "85"),  # the result only
        response(q, "7 + 8 = 15, write 5 carry 1; 4 + 3 + 1 = 9; so 47 + 38 = 95"),
        response("Name a colour.", "red"),  # no sum posed: not counted
    ]
    got = batch_shares(batch)
    assert got == {
        "result_right": 0.75,
        "all_columns": 0.5,
        "columns_right": 0.5,
        "sums_true": 0.5,
        "exact": 0.25,
        JOINT: 0.25,  # result and columns right: the demonstration only
        CARRY: 0.0,  # the fourth keeps its carry and sums it falsely
        WRITTEN: 0.0,  # the two that write a digit write their totals' last
    }
    assert all(math.isnan(v) for v in batch_shares(batch[-1:]).values())


def test_a_carry_left_out_counts_among_the_sums_that_carry():
    q = "user\nCompute {} column by column, then give the result.\nassistant\n"
    batch = [
        response(q.format("47 + 38"), "7 + 8 = 15, write 5; 4 + 3 = 7; so 47 + 38 = 85"),
        response(q.format("47 + 38"), column_working((47, 38))),
        response(q.format("12 + 34"), "2 + 4 = 6, write 6; 1 + 3 = 4; so 12 + 34 = 46"),
    ]
    got = batch_shares(batch)
    assert got[CARRY] == 0.5  # 12 + 34 carries nowhere: not counted
    assert got["columns_right"] == 2 / 3 and got["result_right"] == 1.0
    assert math.isnan(batch_shares(batch[2:])[CARRY])


def test_a_wrong_written_digit_counts_among_the_responses_that_write_one():
    q = "user\nCompute 32 + 28 column by column, then give the result.\nassistant\n"
    batch = [
        response(q, "2 + 8 = 10, write 9; 3 + 2 = 5; so 32 + 28 = 50"),  # the break study's
        response(q, column_working((32, 28))),
        response(q, "2 + 8 = 10; 3 + 2 + 1 = 6; so 32 + 28 = 60"),  # writes no digit
        response(q, "60"),
    ]
    assert batch_shares(batch)[WRITTEN] == 0.5
    assert math.isnan(batch_shares(batch[2:])[WRITTEN])


def shares(value: float) -> dict[str, float]:
    return dict.fromkeys((*REPORTED, JOINT), value)


def sweep() -> dict:
    """Two seeds; `better` is `base` + 0.1 at the steps both hold; `base` alone dumped step 25."""
    base = {s: {t: shares(0.1 * s + 0.01 * t) for t in (5, 10, 15, 20, 25)} for s in (0, 1)}
    better = {s: {t: shares(v["result_right"] + 0.1) for t, v in base[s].items() if t < 25}
              for s in (0, 1)}  # fmt: skip
    return {"base": base, "better": better}


def test_arms_pair_over_the_dump_steps_all_runs_share():
    rows = fidelity_rows(sweep(), "base", n_boot=200)
    assert len(rows) == 2 * len(REPORTED)
    better = {r[1]: r for r in rows if r[0] == "better"}
    for field in REPORTED:
        diff, size = better[LABELS[field]][4:]
        assert diff.startswith("10 [10, 10]")  # exactly +0.1 at every shared (seed, step)
        assert size == "2 x 4"  # steps 5-20: base's step 25 has no partner
    base = [r for r in rows if r[0] == "base"]
    # base over steps 5-20: mean over seeds of 0.1 s + 0.01 t = 0.05 + 0.125
    assert base[0][2].startswith("18 [") and base[0][4] == "-"
    report = fidelity_report(sweep(), "base", n_boot=200)
    assert "dump steps 5-20, late half from 15 (all runs)" in report
    assert "| 25 | base |" in report  # the per-step table keeps every dump


def test_each_seed_pairs_over_its_own_dump_steps():
    """Seed 1 dumped to step 20 only: seed 0 keeps steps 5-40 (late half 25-40), seed 1 pairs
    over 5-20 (late half 15-20); `better` leads by 10 points late in seed 0, 30 in seed 1."""
    ends = {0: 40, 1: 20}
    base = {s: {t: shares(0.5) for t in range(5, end + 1, 5)} for s, end in ends.items()}
    lead = {0: 0.1, 1: 0.3}
    better = {
        s: {t: shares(0.5 + (lead[s] if t > end // 2 else 0.9)) for t in base[s]}
        for s, end in ends.items()
    }
    fidelity = {"base": base, "better": better}
    rows = {(r[0], r[1]): r for r in fidelity_rows(fidelity, "base", n_boot=200)}
    late, diff, size = rows["better", LABELS["exact"]][3:]
    assert diff.startswith("20 [") and size == "2 x 8/4"  # each seed weighs the same
    assert late.startswith("70 [")  # (60 + 80) / 2
    report = fidelity_report(fidelity, "base", n_boot=100)
    assert (
        "each seed's dump steps (seed 0: 5-40, late half from 25; seed 1: 5-20, late half from 15)"
        in report
    )


def test_seed_means_and_figure(tmp_path):
    means = seed_means(sweep())
    assert math.isclose(means["base"][25]["exact"], (0.25 + 0.35) / 2)
    assert sorted(means["better"]) == [5, 10, 15, 20]
    fig = fidelity_figure(sweep(), save=tmp_path / "f.png")
    assert (tmp_path / "f.png").stat().st_size > 0
    assert len(fig.axes) == len(REPORTED)
    assert all(len(ax.lines) == 2 for ax in fig.axes)


def test_seed_means_skip_a_seed_whose_batch_had_no_carrying_sum():
    fidelity = {"a": {0: {5: {**shares(0.5), CARRY: float("nan")}}, 1: {5: shares(0.25)}}}
    assert seed_means(fidelity)["a"][5][CARRY] == 0.25
    alone = {"a": {0: {5: {**shares(0.5), CARRY: math.nan}}}}
    assert math.isnan(seed_means(alone)["a"][5][CARRY])
    assert "| 5 | a | 50 | 50 | 50 | 50 | 50 | - | 50 |" in fidelity_report(alone, n_boot=50)


def test_payoff_conditions_the_result_on_the_columns():
    # half the batch has the columns right; 0.4 of it has both, 0.2 only the result
    batch = {**shares(0.0), "columns_right": 0.5, "result_right": 0.6, JOINT: 0.4}
    fidelity = {"a": {0: {t: batch for t in (5, 10, 15)}}}
    ((arm, if_right, if_not, diff, cols),) = payoff_rows(fidelity, n_boot=100)
    assert arm == "a" and if_right.startswith("80 [80, 80]") and if_not.startswith("40 [40, 40]")
    assert diff.startswith("40 [40, 40]") and cols.startswith("50 [50, 50]")
