"""The built-in rewards and the answer readers behind them, on hand-made responses."""

from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from calclip_jax.data.rewards import BUILTIN_REWARDS
from calclip_jax.data.rewards import answers as read


def _score(name, response, answer, finished=True, **params):
    fn = BUILTIN_REWARDS[name]
    return fn([response], [answer], prompts=["p"], finished=[finished], **params)[0]


@pytest.mark.parametrize(
    ("name", "response", "answer", "score"),
    [
        ("exact", " 42\n", "42", 1.0),
        ("exact", "The answer is 42.", "42", 0.0),
        ("exact", "Paris", " Paris ", 1.0),
        ("last_integer", "The answer is 12.", "12", 1.0),
        ("last_integer", "12 is wrong, it is 13", "12", 0.0),  # the last one counts
        ("last_integer", "no digits", "12", 0.0),
        ("last_integer", "5 - 8 = -3", "-3", 1.0),
        ("last_number", "It costs 2.50 dollars", "2.5", 1.0),
        ("last_number", "about 1,234 people", "1234", 1.0),
        ("last_number", "x = 3/4", "0.75", 1.0),
        ("last_number", "0.3334", "1/3", 0.0),  # outside the default 1e-6
        ("last_number", "no number", "7", 0.0),
        ("boxed", "so \\boxed{\\frac{1}{2}}", "\\frac{1}{2}", 1.0),
        ("boxed", "first \\boxed{3} then \\boxed{4.0}", "4", 1.0),  # the last box, as numbers
        ("boxed", "\\boxed{4", "4", 0.0),  # unclosed
        ("boxed", "4", "4", 0.0),
        ("format", "Mia has 9 pencils.", "1", 1.0),  # the value does not matter
        ("format", "I think 3\nbut not sure", "3", 0.0),  # last line holds no number
        ("format", "\\boxed{x}\nDone.", "3", 1.0),
        ("format", "", "3", 0.0),
    ],
)
def test_builtin_scores(name, response, answer, score):
    assert _score(name, response, answer) == score


@pytest.mark.parametrize("name", sorted(BUILTIN_REWARDS))
def test_an_unfinished_response_scores_zero(name):
    answer = "7"
    response = {"boxed": "\\boxed{7}", "format": "7"}.get(name, "7")
    assert _score(name, response, answer) == 1.0
    assert _score(name, response, answer, finished=False) == 0.0


def test_last_number_tolerance_is_relative_above_one():
    assert _score("last_number", "0.3334", "1/3", tol=1e-3) == 1.0
    assert _score("last_number", "1000.5", "1000", tol=1e-3) == 1.0  # 0.5 <= 1e-3 * 1000
    assert _score("last_number", "1002", "1000", tol=1e-3) == 0.0
    assert _score("last_number", "0.0015", "0", tol=1e-3) == 0.0  # absolute below 1


def test_last_number_rejects_a_non_numeric_reference():
    with pytest.raises(ValueError, match="not a number"):
        _score("last_number", "3", "three")


def test_batches_are_scored_row_by_row():
    scores = BUILTIN_REWARDS["last_integer"](
        ["1", "2", "x"], ["1", "3", "1"], prompts=["a", "b", "c"], finished=[True, True, True]
    )
    assert list(scores) == [1.0, 0.0, 0.0]
    with pytest.raises(ValueError, match="same length"):
        BUILTIN_REWARDS["exact"](["1"], ["1", "2"], prompts=["a"], finished=[True])


@given(st.integers(-(10**12), 10**12), st.text(alphabet="abc .,!?\n", max_size=20))
def test_readers_find_a_trailing_integer(value, prefix):
    text = f"{prefix} {value}."
    assert read.last_integer(text) == value
    assert read.last_number(text) == Fraction(value)
    assert read.last_boxed(f"{prefix}\\boxed{{{value}}}") == str(value)


def test_same_answer_compares_numbers_by_value_and_text_exactly():
    assert read.same_answer("0.50", "1/2")
    assert read.same_answer(" $12$ ", "12")
    assert not read.same_answer("paris", "Paris")
