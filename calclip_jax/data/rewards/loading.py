"""Resolving a reward term to its function: a built-in (its parameters bound) or a user's
`module:function`, imported from the running interpreter's path (the repo root for the CLIs)."""

from __future__ import annotations

import functools
import importlib

from calclip_jax.data.rewards.builtin import BUILTIN_REWARDS, RewardFn
from calclip_jax.data.rewards.spelling import RewardTerm


def import_reward(name: str) -> RewardFn:
    """The callable `module:attr[.attr...]`; ValueError names the module or attribute missing."""
    module_name, _, path = name.partition(":")
    try:
        target = importlib.import_module(module_name)
    except ImportError as err:
        raise ValueError(f"reward {name!r}: cannot import module {module_name!r} ({err})") from err
    for attr in path.split("."):
        if not hasattr(target, attr):
            raise ValueError(f"reward {name!r}: module {module_name!r} has no {path!r}")
        target = getattr(target, attr)
    if not callable(target):
        raise ValueError(f"reward {name!r}: {path!r} is not callable")
    return target


def reward_function(term: RewardTerm) -> RewardFn:
    """The function that scores `term` (unweighted)."""
    if term.is_builtin:
        fn = BUILTIN_REWARDS[term.name]
        return functools.partial(fn, **dict(term.params)) if term.params else fn
    return import_reward(term.name)
