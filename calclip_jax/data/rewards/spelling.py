"""The `task.reward` spelling: weighted terms joined by `+`, parsed without importing user code.

    exact                              one built-in, weight 1
    0.8*last_number(tol=0.01) + 0.2*format
    0.5*boxed + 0.5*my_package.rewards:length_bonus     a user function, `module:function`

A term is `[weight*]name[(key=value, ...)]`: `name` a built-in (`BUILTIN_REWARDS`) or
`module:function`; the weight a plain decimal (default 1, may be negative); parameters are numbers
and only built-ins take them. The combined reward is the weighted sum (not normalized). Each term
has a label (the built-in's or the function's name) that names its metrics; labels are unique.
"""

from __future__ import annotations

import dataclasses
import inspect
import math
import re

from calclip_jax.data.rewards.builtin import BUILTIN_REWARDS

_TERM = re.compile(
    r"\s*(?:(?P<weight>[-+]?(?:[0-9]+\.?[0-9]*|\.[0-9]+))\s*\*\s*)?"
    r"(?P<name>[A-Za-z_][\w.]*(?::[A-Za-z_][\w.]*)?)"
    r"\s*(?:\((?P<params>[^()]*)\))?\s*"
)
_PARAM = re.compile(r"\s*(?P<key>[A-Za-z_]\w*)\s*=\s*(?P<value>[^,]+?)\s*")
_STANDARD_ARGS = ("responses", "answers", "prompts", "finished")


@dataclasses.dataclass(frozen=True)
class RewardTerm:
    """One weighted term: a built-in name or `module:function`, with built-in parameters."""

    weight: float
    name: str
    params: tuple[tuple[str, float], ...] = ()

    @property
    def is_builtin(self) -> bool:
        return ":" not in self.name

    @property
    def label(self) -> str:
        """The metric name of this term: the built-in's name, or the function's."""
        return self.name.rsplit(":", 1)[-1].rsplit(".", 1)[-1]


def _split_terms(spelling: str) -> list[str]:
    """`spelling` split at the `+` signs outside parentheses that join terms (not a weight's)."""
    terms, depth, start = [], 0, 0
    for i, char in enumerate(spelling):
        depth += {"(": 1, ")": -1}.get(char, 0)
        if char == "+" and depth == 0 and spelling[start:i].strip():
            terms.append(spelling[start:i])
            start = i + 1
    terms.append(spelling[start:])
    return terms


def builtin_params(name: str) -> tuple[str, ...]:
    """The keyword parameters built-in `name` takes besides the standard arguments."""
    signature = inspect.signature(BUILTIN_REWARDS[name])
    return tuple(p for p in signature.parameters if p not in _STANDARD_ARGS)


def _params(term: str, name: str, text: str | None) -> tuple[tuple[str, float], ...]:
    if text is None or not text.strip():
        return ()
    if ":" in name:
        raise ValueError(f"reward term {term.strip()!r}: only built-ins take parameters")
    allowed = builtin_params(name)
    params = []
    for item in text.split(","):
        match = _PARAM.fullmatch(item)
        if match is None or match["key"] not in allowed:
            raise ValueError(
                f"reward term {term.strip()!r}: bad parameter {item.strip()!r}; "
                f"{name} takes {list(allowed) or 'none'} as key=number"
            )
        try:
            value = float(match["value"])
        except ValueError:
            value = math.nan
        if not math.isfinite(value):
            raise ValueError(
                f"reward term {term.strip()!r}: {match['key']} must be a finite number"
            )
        params.append((match["key"], value))
    return tuple(params)


def parse_reward(spelling: str) -> tuple[RewardTerm, ...]:
    """The terms of a `task.reward` spelling; ValueError ("reward ...") names what is wrong."""
    if not isinstance(spelling, str) or not spelling.strip():
        raise ValueError(f"reward must be a non-empty string like 'exact', got {spelling!r}")
    terms: list[RewardTerm] = []
    for text in _split_terms(spelling):
        match = _TERM.fullmatch(text)
        if match is None:
            raise ValueError(
                f"reward term {text.strip()!r} in {spelling!r} is not [weight*]name[(key=value)]"
            )
        name = match["name"]
        if ":" not in name and name not in BUILTIN_REWARDS:
            raise ValueError(
                f"reward term {text.strip()!r}: unknown reward {name!r}; "
                f"built-ins {sorted(BUILTIN_REWARDS)} or module:function"
            )
        weight = 1.0 if match["weight"] is None else float(match["weight"])
        terms.append(RewardTerm(weight, name, _params(text, name, match["params"])))
    labels = [t.label for t in terms]
    for label in labels:
        if label == "errors":  # the failure counter's name
            raise ValueError("reward term label 'errors' is reserved; rename the function")
        if labels.count(label) > 1:
            raise ValueError(f"reward term label {label!r} appears twice in {spelling!r}")
    return tuple(terms)
