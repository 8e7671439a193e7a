"""Verifiers on hand-written right, wrong and garbled answers; the safe expression parser."""

from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from calclip_jax.data import Example, get_task
from calclip_jax.data.expression import ParseError, parse_expression
from calclip_jax.data.verify import digit_credit

ADD = Example("123+234=", "357", (123, 234), 357)
SUB = Example("5-12=", "-7", (5, 12), -7)
CD = Example("3,7,25:100=", "(7-3)*25", (3, 7, 25), 100)


@pytest.mark.parametrize(
    ("response", "reward", "correct", "parsed"),
    [
        ("357", 1.0, True, 357),
        (" 357\n", 1.0, True, 357),  # surrounding whitespace is ignored
        ("0357", 1.0, True, 357),  # value-based correctness
        ("358", 2 / 3, False, 358),  # 2 of 3 digits right-aligned
        ("57", 2 / 3, False, 57),  # missing digit counts against the longer length
        ("1357", 3 / 4, False, 1357),
        ("999", 0.0, False, 999),
        ("-357", 3 / 4, False, -357),
    ],
)
def test_arithmetic_right_and_wrong(response, reward, correct, parsed):
    result = get_task("arithmetic").verify(ADD, response)
    assert result.reward == pytest.approx(reward)
    assert (result.correct, result.garbled, result.parsed) == (correct, False, parsed)


@pytest.mark.parametrize("response", ["", "35 7", "3a57", "357=", "--3", "3-5", "+357", "½"])
def test_arithmetic_garbled(response):
    result = get_task("arithmetic", format_reward=0.1).verify(ADD, response)
    assert (result.reward, result.correct, result.garbled, result.parsed) == (
        0.0,
        False,
        True,
        None,
    )


def test_arithmetic_unfinished_is_garbled_and_format_reward_added():
    task = get_task("arithmetic", format_reward=0.1)
    assert task.verify(ADD, "357", finished=False).garbled
    assert task.verify(ADD, "357").reward == pytest.approx(1.1)
    assert task.verify(ADD, "358").reward == pytest.approx(2 / 3 + 0.1)


def test_arithmetic_without_partial_credit_and_negative_answers():
    task = get_task("arithmetic", partial_credit=False, allow_negative=True, operators="-")
    assert task.verify(ADD, "358").reward == 0.0
    assert task.verify(SUB, "-7").correct
    assert task.verify(SUB, "7").reward == 0.0


def test_digit_credit_values():
    assert digit_credit("1234", "1234") == 1.0
    assert digit_credit("1230", "1234") == 0.75
    assert digit_credit("", "") == 0.0
    assert digit_credit("4", "1234") == 0.25


@pytest.mark.parametrize(
    ("response", "correct", "parsed"),
    [
        ("(7-3)*25", True, 100),
        ("25*(7-3)", True, 100),
        ("((7-3))*25", True, 100),
        ("25*4", False, 100),  # 4 is not a given number
        ("25*(7-3)*3", False, 300),
        ("(7-3)*25+0", False, 100),  # 0 is not given
        ("25+25+25+25", False, 100),  # 25 used more than once
        ("7/3", False, Fraction(7, 3)),
        ("7/(3-3)", False, None),  # division by zero: well formed, wrong
        ("3*7", False, 21),
    ],
)
def test_countdown_right_and_wrong(response, correct, parsed):
    result = get_task("countdown").verify(CD, response)
    assert (result.correct, result.garbled, result.parsed) == (correct, False, parsed)
    assert result.reward == float(correct)


@pytest.mark.parametrize(
    "response", ["", "(7-3*25", "7-3)*25", "7--3", "-7+3", "7 * 3", "25*x", "100=100", "()", "7*"]
)
def test_countdown_garbled(response):
    result = get_task("countdown").verify(CD, response)
    assert (result.reward, result.correct, result.garbled) == (0.0, False, True)


def test_countdown_use_all_partial_credit_and_unfinished():
    strict = get_task("countdown", use_all=True)
    assert not strict.verify(Example("3,7,25:28=", "", (3, 7, 25), 28), "3+25").correct
    assert strict.verify(Example("3,7,25:28=", "", (3, 7, 25), 35), "3+25+7").correct
    assert get_task("countdown").verify(Example("3,7,25:28=", "", (3, 7, 25), 28), "3+25").correct
    partial = get_task("countdown", partial_credit=True)
    assert partial.verify(CD, "3*25").reward == pytest.approx(0.5 * 0.75)
    assert partial.verify(CD, "3*25*7").reward == 0.0  # too far: clipped at 0
    assert partial.verify(CD, "4*25").reward == 0.0  # invalid numbers get no credit
    assert get_task("countdown").verify(CD, "(7-3)*25", finished=False).garbled


def test_expression_parser_precedence_and_limits():
    assert parse_expression("2+3*4").value == 14
    assert parse_expression("(2+3)*4").value == 20
    assert parse_expression("8/4/2").value == 1
    assert parse_expression("8-4-2").value == 2
    assert parse_expression("12/5").value == Fraction(12, 5)
    assert parse_expression("1+(2*3)").numbers == (1, 2, 3)
    for bad in ["__import__('os')", "2**3", "1e3", "(" * 200 + "1" + ")" * 200]:
        with pytest.raises(ParseError):
            parse_expression(bad)


def test_verify_batch_arrays():
    task = get_task("arithmetic")
    out = task.verify_batch([ADD, ADD, ADD], ["357", "358", "x"], [True, True, True])
    assert out["reward"].tolist() == pytest.approx([1.0, 2 / 3, 0.0])
    assert out["correct"].tolist() == [True, False, False]
    assert out["garbled"].tolist() == [False, False, True]
    assert out["reward"].dtype.name == "float32"


def _tree(leaves):
    ops = st.sampled_from("+-*/")
    return st.tuples(leaves, ops, leaves)


@st.composite
def _expressions(draw, depth=3):
    """(text, exact value or None) of a random fully parenthesized expression."""
    if depth == 0 or draw(st.booleans()):
        n = draw(st.integers(0, 999))
        return str(n), Fraction(n)
    (a, va), op, (b, vb) = draw(_tree(_expressions(depth=depth - 1)))
    if va is None or vb is None or (op == "/" and vb == 0):
        value = None
    else:
        value = {"+": va + vb, "-": va - vb, "*": va * vb, "/": va / vb if vb else None}[op]
    return f"({a}{op}{b})", value


@given(_expressions())
def test_expression_parser_matches_tree_value(expression):
    text, value = expression
    assert parse_expression(text).value == value
