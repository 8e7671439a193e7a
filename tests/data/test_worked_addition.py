"""The worked_addition task: demonstrations that write the column working out, scored on the sum."""

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from calclip_jax.data import get_task
from calclip_jax.data.tasks.column_working import column_working
from calclip_jax.data.tokenizer import CharTokenizer

TASK = get_task("worked_addition", min_digits=2, max_digits=2, num_train=200, num_test=30)
COLUMN = re.compile(r"([0-9]+(?: \+ [0-9]+)*) = ([0-9]+)(?:, write ([0-9])(?: carry ([0-9]+))?)?")


@pytest.mark.parametrize(
    ("numbers", "working"),
    [
        ((47, 38), "7 + 8 = 15, write 5 carry 1; 4 + 3 + 1 = 8; so 47 + 38 = 85"),
        ((63, 43), "3 + 3 = 6, write 6; 6 + 4 = 10; so 63 + 43 = 106"),
        ((10, 10), "0 + 0 = 0, write 0; 1 + 1 = 2; so 10 + 10 = 20"),
        ((5, 123), "5 + 3 = 8, write 8; 2 = 2, write 2; 1 = 1; so 5 + 123 = 128"),
        ((99, 9, 5), "9 + 9 + 5 = 23, write 3 carry 2; 9 + 2 = 11; so 99 + 9 + 5 = 113"),
    ],
)
def test_the_working_column_by_column(numbers, working):
    assert column_working(numbers) == working


@given(st.lists(st.integers(0, 10**6), min_size=2, max_size=4))
def test_the_working_adds_up_and_ends_with_the_sum(numbers):
    """Every column's terms sum to what it says, writes its last digit and carries the rest into
    the next column; the written digits and the last column spell the sum, the last integer."""
    working = column_working(numbers)
    *columns, final = working.split("; ")
    assert final == f"so {' + '.join(map(str, numbers))} = {sum(numbers)}"
    written, carry = "", 0
    for i, column in enumerate(columns):
        terms, total, digit, carried = COLUMN.fullmatch(column).groups()
        terms = [int(t) for t in terms.split(" + ")]
        digits = [int(str(n)[::-1][i]) for n in numbers if i < len(str(n))]
        assert terms == digits + ([carry] if carry else [])
        assert sum(terms) == int(total)
        if i < len(columns) - 1:
            assert (int(digit), int(carried or 0)) == (int(total) % 10, int(total) // 10)
            written, carry = digit + written, int(carried or 0)
        else:
            assert digit is None
            written = total + written
    assert int(written) == sum(numbers) == int(re.findall(r"[0-9]+", working)[-1])


def test_examples_demonstrate_the_working_and_are_scored_on_the_sum():
    for ex in TASK.examples("train")[:50]:
        a, b = ex.numbers
        assert ex.prompt == f"Compute {a} + {b} column by column, then give the result."
        assert ex.answer == column_working((a, b)) and ex.target == a + b
        assert TASK.verify(ex, ex.answer).correct  # the demonstration scores 1
    ex = TASK.examples("test")[0]
    wrong = ex.answer.removesuffix(str(ex.target)) + str(ex.target + 1)
    assert not TASK.verify(ex, wrong).correct and not TASK.verify(ex, wrong).garbled
    assert TASK.verify(ex, f"It is {ex.target}.").correct  # the working is not checked
    assert TASK.verify(ex, ex.answer, finished=False).garbled  # truncated
    assert TASK.verify(ex, "no idea").garbled


def test_partial_credit_is_against_the_sum_not_the_working():
    task = get_task("worked_addition", min_digits=2, max_digits=2, partial_credit=True)
    ex = task.examples("test")[0]
    right = str(ex.target)
    wrong = ("2" if right[0] == "1" else "1") + right[1:]  # all but the leading digit right
    assert task.verify(ex, wrong).reward == pytest.approx((len(right) - 1) / len(right))


def test_the_working_is_a_data_knob_of_its_own_task():
    """A new task, not a chat_arithmetic knob: chat_arithmetic's data (its tfds and SFT caches,
    the `task.data` a resumed run checks) stays what it was."""
    chat = get_task("chat_arithmetic", min_digits=2, max_digits=2, num_train=200, num_test=30)
    assert "working" not in chat.data_knobs() and chat.config_name() != TASK.config_name()
    assert chat.examples("train")[0].answer == str(chat.examples("train")[0].target)


def test_bad_knobs_are_named():
    with pytest.raises(ValueError, match="operators must be '\\+'"):
        get_task("worked_addition", operators="+-")
    with pytest.raises(ValueError, match="answer_from must be 'last_integer'"):
        get_task("worked_addition", answer_from="whole_response")
    with pytest.raises(ValueError, match="non-negative"):
        column_working((3,))


def test_a_character_tokenizer_covers_the_demonstrations():
    tok = CharTokenizer.for_tasks(TASK)
    for ex in TASK.examples("test"):
        assert tok.decode(tok.encode(ex.prompt + ex.answer)) == ex.prompt + ex.answer


def test_response_metrics_grade_the_batchs_working():
    examples = TASK.examples("test")[:4]
    assert TASK.response_metrics(examples, [ex.answer for ex in examples]) == {
        "working_all_columns": 1.0,
        "working_columns_right": 1.0,
        "working_sums_true": 1.0,
        "working_exact": 1.0,
    }
    bare = [str(ex.target) for ex in examples[:2]] + [ex.answer for ex in examples[2:]]
    got = TASK.response_metrics(examples, bare)  # half answer with the sum alone
    assert got == dict.fromkeys(got, 0.5)
    chat = get_task("chat_arithmetic", min_digits=2, max_digits=2, num_train=200, num_test=30)
    assert chat.response_metrics(chat.examples("test")[:2], ["1", "2"]) == {}
