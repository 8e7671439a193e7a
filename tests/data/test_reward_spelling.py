"""The `task.reward` spelling: weighted terms, built-in parameters, user functions, errors."""

import pytest

from calclip_jax.data.rewards import RewardTerm, parse_reward


@pytest.mark.parametrize(
    ("spelling", "terms"),
    [
        ("exact", [RewardTerm(1.0, "exact")]),
        (
            "0.8*last_number(tol=0.01) + 0.2*format",
            [RewardTerm(0.8, "last_number", (("tol", 0.01),)), RewardTerm(0.2, "format")],
        ),
        ("boxed + -0.5 * format", [RewardTerm(1.0, "boxed"), RewardTerm(-0.5, "format")]),
        (" .5*my_pkg.rewards:Scorer.score ", [RewardTerm(0.5, "my_pkg.rewards:Scorer.score")]),
    ],
)
def test_spellings_parse(spelling, terms):
    assert list(parse_reward(spelling)) == terms


def test_labels_name_the_builtin_or_the_function():
    terms = parse_reward("last_integer + 2*pkg.mod:length_bonus + pkg:Cls.method")
    assert [t.label for t in terms] == ["last_integer", "length_bonus", "method"]
    assert [t.is_builtin for t in terms] == [True, False, False]


@pytest.mark.parametrize(
    ("spelling", "named"),
    [
        ("", "non-empty"),
        ("exactly", "unknown reward 'exactly'"),
        ("0.5*", "is not"),
        ("nan*exact", "is not"),
        ("exact(tol=0.1)", "bad parameter"),
        ("last_number(tol=nan)", "finite"),
        ("last_number(tol=abc)", "finite"),
        ("last_number(eps=1)", "bad parameter"),
        ("pkg:fn(x=1)", "only built-ins"),
        ("exact + 0.5*exact", "appears twice"),
        ("pkg:errors", "reserved"),
        ("exact + ", "is not"),
    ],
)
def test_bad_spellings_are_named(spelling, named):
    with pytest.raises(ValueError, match=r"^reward") as info:
        parse_reward(spelling)
    assert named in str(info.value)


def test_a_non_string_is_rejected():
    with pytest.raises(ValueError, match=r"^reward must be a non-empty string"):
        parse_reward(0.5)
