"""The chat arithmetic task: instruction prompts, answers read from chat-style responses."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from calclip_jax.data import get_task
from calclip_jax.data.expression import parse_expression
from calclip_jax.data.tokenizer import CharTokenizer

TASK = get_task("chat_arithmetic", max_digits=2, operators="+-", num_train=200, num_test=30)


def test_prompts_are_instructions_over_the_arithmetic_problems():
    for ex in TASK.examples("train")[:20]:
        expression = ex.prompt.removeprefix("Compute ").removesuffix(
            ". Reply with only the result, no words."
        )
        a, op, b = expression.split(" ")
        assert int(a) == ex.numbers[0] and int(b) == ex.numbers[1] and op in "+-"
        value = parse_expression(expression.replace(" ", "")).value
        assert ex.answer == str(ex.target) == str(value)


@pytest.mark.parametrize(
    ("response", "correct", "garbled"),
    [
        ("57", True, False),
        ("The answer is 57.", True, False),
        ("23 + 34 = 57", True, False),
        ("57 is wrong, it is 56", False, False),  # the last integer counts
        ("I cannot do that.", False, True),
        ("", False, True),
    ],
)
def test_last_integer_is_the_answer(response, correct, garbled):
    ex = TASK.examples("test")[0]
    text = response.replace("57", ex.answer)
    result = TASK.verify(ex, text)
    assert (result.correct, result.garbled) == (correct, garbled)
    assert result.reward == float(correct)


def test_whole_response_needs_the_bare_integer_and_eos():
    task = get_task("chat_arithmetic", max_digits=2, answer_from="whole_response")
    ex = TASK.examples("test")[0]
    assert task.verify(ex, f" {ex.answer}\n").correct
    assert task.verify(ex, f"The answer is {ex.answer}.").garbled
    assert task.verify(ex, ex.answer, finished=False).garbled
    assert TASK.verify(ex, ex.answer, finished=False).garbled


@given(st.integers(-999, 999), st.integers(-999, 999))
def test_value_decides_correctness(target, said):
    ex = TASK.examples("test")[0]
    ex = type(ex)(ex.prompt, str(target), ex.numbers, target)
    assert TASK.verify(ex, f"So it is {said}").correct == (said == target)


def test_bad_knobs_are_named():
    with pytest.raises(ValueError, match="instruction"):
        get_task("chat_arithmetic", instruction="What is it?")
    with pytest.raises(ValueError, match="answer_from"):
        get_task("chat_arithmetic", answer_from="first")


def test_a_character_tokenizer_covers_the_prompts():
    tok = CharTokenizer.for_tasks(TASK)
    for ex in TASK.examples("test"):
        assert tok.decode(tok.encode(ex.prompt + ex.answer)) == ex.prompt + ex.answer


def test_the_instruction_is_a_data_knob_and_answer_from_is_not():
    other = get_task("chat_arithmetic", max_digits=2, operators="+-", instruction="{expression}=?")
    assert other.config_name() != TASK.config_name()
    lenient = get_task("chat_arithmetic", max_digits=2, operators="+-", num_train=200, num_test=30)
    strict = get_task(
        "chat_arithmetic", max_digits=2, operators="+-", num_train=200, num_test=30,
        answer_from="whole_response",
    )  # fmt: skip
    assert lenient.config_name() == strict.config_name()
