"""Grading a worked_addition response's working (calclip_jax.data.tasks.column_working)."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from calclip_jax.data.registry import get_task
from calclip_jax.data.tasks.column_working import (
    FIELDS,
    carry_left_out,
    check_working,
    column_statements,
    column_working,
    columns,
    operands,
    token_roles,
    written_digit_wrong,
)

NUMBERS = st.lists(st.integers(0, 9999), min_size=2, max_size=4)


def fields(numbers, response):
    got = check_working(numbers, response)
    return {f: getattr(got, f) for f in FIELDS}


@given(NUMBERS)
def test_the_demonstration_passes_every_check(numbers):
    assert all(fields(numbers, column_working(numbers)).values())
    assert all(fields(numbers, f"  {column_working(numbers)}\n").values())  # as decoded


@given(NUMBERS, st.data())
def test_a_false_column_total_is_caught_and_nothing_else(numbers, data):
    reference = column_working(numbers)
    columns = column_statements(reference)
    i = data.draw(st.integers(0, len(columns) - 1))
    total = columns[i][1]
    wrong = data.draw(st.integers(0, 99).filter(lambda t: t != total))
    head, sep, tail = reference.partition("; so ")
    parts = head.split("; ")
    parts[i] = parts[i].replace(f"= {total}", f"= {wrong}", 1)
    got = fields(numbers, "; ".join(parts) + sep + tail)
    assert got == {
        "result_right": True,
        "all_columns": True,
        "columns_right": True,
        "sums_true": False,
        "exact": False,
    }


@given(NUMBERS, st.integers(1, 9))
def test_a_wrong_result_is_only_the_result(numbers, delta):
    reference = column_working(numbers)
    response = reference.removesuffix(str(sum(numbers))) + str(sum(numbers) + delta)
    assert fields(numbers, response) == {
        "result_right": False,
        "all_columns": True,
        "columns_right": True,
        "sums_true": True,
        "exact": False,
    }


@given(NUMBERS)
def test_the_demonstration_keeps_every_carry(numbers):
    carries = any(carry for _, carry in columns(numbers))
    assert carry_left_out(numbers, column_working(numbers)) is (False if carries else None)


@given(NUMBERS, st.data())
def test_a_carry_dropped_from_a_column_is_read_as_left_out(numbers, data):
    # a column of two or more digits stays a statement ("t1 + t2 = s") without its carry
    carried = [i for i, (digits, carry) in enumerate(columns(numbers)) if carry and len(digits) > 1]
    if not carried:
        return
    i = data.draw(st.sampled_from(carried))
    reference = column_working(numbers)
    head, sep, tail = reference.partition("; so ")
    parts = head.split("; ")
    parts[i] = parts[i].replace(f" + {columns(numbers)[i][1]} =", " =", 1)
    response = "; ".join(parts) + sep + tail
    assert carry_left_out(numbers, response) is True
    assert not check_working(numbers, response).columns_right


@given(NUMBERS)
def test_the_demonstration_writes_each_total_s_last_digit(numbers):
    writes = len(columns(numbers)) > 1  # every column but the last writes one
    assert written_digit_wrong(column_working(numbers)) is (False if writes else None)


@given(NUMBERS, st.data())
def test_a_changed_written_digit_is_read_as_wrong(numbers, data):
    reference = column_working(numbers)
    head, sep, tail = reference.partition("; so ")
    parts = head.split("; ")
    # a column statement ("t1 + t2 = s") that writes a digit: every column but the last
    writing = [i for i, part in enumerate(parts[:-1]) if " + " in part.partition(" = ")[0]]
    if not writing:
        return
    i = data.draw(st.sampled_from(writing))
    statement, written, rest = parts[i].partition(", write ")
    digit, _, carry = rest.partition(" ")
    other = data.draw(st.integers(0, 9).filter(lambda d: d != int(digit)))
    parts[i] = statement + written + " ".join(filter(None, [str(other), carry]))
    response = "; ".join(parts) + sep + tail
    assert written_digit_wrong(response) is True
    assert fields(numbers, response)["sums_true"]  # the totals stay true: no other check reads it


@pytest.mark.parametrize(
    "response, expected",
    [
        ("2 + 8 = 10, write 9; 3 + 2 = 5; so 32 + 28 = 50", True),  # the break study's
        ("9 + 7 = 16, write 12; 4 + 3 = 7; so 49 + 37 = 86", True),  # two digits written
        ("3 + 9 =12; write 8; 7 + 3 =10; so 76 + 39 =115", True),  # a semicolon before "write"
        ("3 + 3 =6; write 6; 2 + 5 =7; so 21 + 53 =74", False),
        ("2 + 8 = 10, write 0 carry 1; 3 + 2 + 1 = 6; so 32 + 28 = 60", False),
        ("2 + 8 = 11, write 1; so 32 + 28 = 60", False),  # a false total, its digit written
        ("2 + 8 = 10; 3 + 2 = 5; so 2 + 8 = 10, write 9", None),  # after "so ": not the working
        ("60", None),
    ],
)
def test_written_digit_wrong_reads_each_column_s_own_total(response, expected):
    assert written_digit_wrong(response) is expected


@pytest.mark.parametrize(
    "response, expected",
    [
        ("8 + 9 = 17, write 7; 2 + 1 = 3; so 28 + 19 = 47", True),  # the break study's
        ("8 + 9 = 17, write 7 carry 1; 2 + 1 + 1 = 4; so 28 + 19 = 47", False),
        ("8 + 9 = 17, write 7; 1 + 2 = 3; so 28 + 19 = 47", False),  # not the column's digits
        ("8 + 9 = 17; so 28 + 19 = 47", False),  # the column not written
        ("47", False),
    ],
)
def test_carry_left_out_reads_the_column_the_carry_goes_into(response, expected):
    assert carry_left_out((28, 19), response) is expected
    assert carry_left_out((28, 11), response) is None  # 8 + 1 carries nowhere


@pytest.mark.parametrize(
    "response, expected",
    [
        # the tens column dropped (BF16's shortcut in the break study): true, but not the working
        ("1 + 9 = 10; so 99 + 29 = 128", (True, False, False, True, False)),
        # every column, true sums of the wrong digits
        (
            "3 + 9 = 12, write 2 carry 1; 9 + 2 + 1 = 12; so 99 + 29 = 128",
            (True, True, False, True, False),
        ),
        # a false sum and a column that is only a digit
        ("0 + 3 = 4, write 4; 6; so 99 + 29 = 128", (True, False, False, False, False)),
        # no working at all
        ("128", (True, False, False, False, False)),
        # cut off in the working (unfinished): no result
        ("9 + 9 = 18, write 8 carry 1; 9 + 2 + 1 = 12; so 99", (False, True, True, True, False)),
    ],
)
def test_degraded_responses(response, expected):
    assert tuple(fields((99, 29), response).values()) == expected


def test_operands_read_the_tasks_prompts():
    task = get_task("worked_addition", min_digits=1, max_digits=3, num_train=50, num_test=5)
    rng = random.Random(0)
    for _ in range(50):
        ex = task.sample(rng)
        chat = f"system text\nuser\n{ex.prompt}\nassistant\n"  # as a dump decodes it
        assert operands(chat) == tuple(ex.numbers)
    assert operands("What is the capital of France?") is None


@given(NUMBERS)
def test_token_roles_split_the_demonstration_at_its_closing_so(numbers):
    """One piece per character, as a digit-per-token tokenizer gives: every digit of the closing
    clause is the result's, every digit before it the working's."""
    text = column_working(numbers)
    working, closing = text.rsplit("so ", 1)
    roles = token_roles(list(text))
    assert roles.count("result digit") == sum(c.isdigit() for c in closing)
    assert roles.count("working digit") == sum(c.isdigit() for c in working)
    assert [r == "other" for r in roles] == [not c.isdigit() for c in text]


def test_token_roles_read_multi_character_pieces():
    pieces = ["7", " +", " 8", " =", " 15", ";", " so", " 15", "also"]
    assert token_roles(pieces) == [
        "working digit",
        "other",
        "working digit",
        "other",
        "working digit",
        "other",
        "other",
        "result digit",
        "other",
    ]
    assert token_roles(["al", "so", " 3"]) == ["other", "other", "working digit"]  # not the word
