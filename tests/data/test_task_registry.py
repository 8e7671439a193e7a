"""Registry, knob validation, and deterministic disjoint split generation."""

import dataclasses
import random
from typing import ClassVar

import pytest

from calclip_jax.data import Example, Task, get_task, list_tasks, register_task
from calclip_jax.data.task import is_test_prompt
from calclip_jax.data.verify import VerifyResult


def test_builtin_tasks_registered():
    assert {"arithmetic", "countdown"} <= set(list_tasks())
    task = get_task("arithmetic", max_digits=2, operators="+-")
    assert (task.name, task.max_digits, task.operators) == ("arithmetic", 2, "+-")


@pytest.mark.parametrize(
    ("name", "knobs", "match"),
    [
        ("nope", {}, "unknown task 'nope'"),
        ("arithmetic", {"digits": 3}, "no knob"),
        ("arithmetic", {"operators": "+/"}, "operators"),
        ("arithmetic", {"min_digits": 3, "max_digits": 2}, "min_digits"),
        ("arithmetic", {"max_digits": 9, "num_operands": 3}, "18"),
        ("countdown", {"num_numbers": 1}, "num_numbers"),
        ("countdown", {"num_train": -1}, "num_train"),
    ],
)
def test_bad_names_and_knobs(name, knobs, match):
    with pytest.raises(ValueError, match=match):
        get_task(name, **knobs)


@register_task
@dataclasses.dataclass(frozen=True, kw_only=True)
class _EchoTask(Task):
    """A one-file task: repeat a number."""

    name: ClassVar[str] = "test_echo"
    prompt_alphabet: ClassVar[str] = "0123456789>"
    answer_alphabet: ClassVar[str] = "0123456789"

    def sample(self, rng: random.Random) -> Example:
        n = rng.randint(0, 999)
        return Example(f"{n}>", str(n), (n,), n)

    def verify(self, example: Example, response: str, *, finished: bool = True) -> VerifyResult:
        ok = finished and response == example.answer
        return VerifyResult(float(ok), ok, not finished, int(response) if ok else None)


def test_adding_a_task_and_duplicate_names():
    task = get_task("test_echo", num_train=50, num_test=5)
    assert "test_echo" in list_tasks()
    assert [task.verify(e, e.answer).correct for e in task.examples("train")] == [True] * 50
    with pytest.raises(ValueError, match="already registered"):
        register_task(type("Other", (_EchoTask,), {"__module__": "elsewhere"}))


@pytest.mark.parametrize(
    "knobs",
    [
        {"name": "arithmetic", "operators": "+-*", "num_operands": 3},
        {"name": "arithmetic", "operators": "-", "allow_negative": True},
        {"name": "countdown", "num_numbers": 4},
    ],
)
def test_generation_deterministic_disjoint_and_demonstrations_verify(knobs):
    knobs = {**knobs, "num_train": 1500, "num_test": 150}
    task = get_task(**knobs)
    train, test = task.examples("train"), task.examples("test")
    assert (len(train), len(test)) == (1500, 150)
    prompts_train = {e.prompt for e in train}
    assert len(prompts_train) == len(train)
    assert prompts_train.isdisjoint(e.prompt for e in test)
    assert all(is_test_prompt(e.prompt) for e in test)
    assert get_task(**knobs).examples("train") == train  # deterministic
    other_seed = get_task(**knobs, seed=1).examples("train")
    assert other_seed != train
    assert {e.prompt for e in other_seed}.isdisjoint(e.prompt for e in test)
    for example in train[:300] + test:
        demo = task.demonstration(example)
        assert demo.startswith(example.prompt)
        result = task.verify(example, demo[len(example.prompt) :])
        assert result.correct and not result.garbled and result.parsed == example.target
        assert set(demo) <= set(task.alphabet)


def test_knobs_shape_the_problems():
    task = get_task("arithmetic", min_digits=2, max_digits=4, operators="*", num_train=300)
    train = task.examples("train")
    assert all(10 <= n <= 9999 for e in train for n in e.numbers)
    assert all("*" in e.prompt and e.target == e.numbers[0] * e.numbers[1] for e in train)
    assert all(
        e.target >= 0 for e in get_task("arithmetic", operators="-", num_train=0).examples("test")
    )
    knobs = {
        "num_numbers": 5,
        "max_number": 9,
        "min_target": 10,
        "max_target": 50,
        "num_train": 0,
        "num_test": 100,
    }
    cd = get_task("countdown", **knobs)
    for e in cd.examples("test"):
        assert len(e.numbers) == 5 and all(1 <= n <= 9 for n in e.numbers)
        assert 10 <= e.target <= 50


def test_small_prompt_space_and_verifier_knobs_share_data():
    tiny = get_task("arithmetic", max_digits=1)
    assert len(tiny.examples("train")) + len(tiny.examples("test")) == 100  # all of 0..9 + 0..9
    plain = get_task("countdown", num_train=10)
    scored = get_task("countdown", num_train=10, use_all=True, format_reward=0.5)
    assert plain.config_name() == scored.config_name()
    assert plain.examples("train") == scored.examples("train")
    assert plain.config_name() != get_task("countdown", num_train=11).config_name()
