"""The built-in reward functions, each with the signature every reward function has:

    fn(responses, answers, *, prompts, finished) -> one float per response

`responses` are the decoded responses (text before EOS), `answers` the reference answers,
`prompts` the task prompts, `finished` whether each response ended with EOS. An answer-checking
reward scores 1.0 for a right answer, else 0.0, and 0.0 for an unfinished response (a truncated
response is garbled, as the tasks' own verifiers have it). Extra keyword parameters (`tol`) are
set in the reward spelling: `last_number(tol=0.01)`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from calclip_jax.data.rewards import answers as read

RewardFn = Callable[..., Sequence[float]]
DEFAULT_TOLERANCE = 1e-6


def _rows(responses: Sequence[str], answers: Sequence[str], finished: Sequence[bool]):
    if not len(responses) == len(answers) == len(finished):
        raise ValueError("responses, answers and finished must have the same length")
    return zip(responses, answers, finished, strict=True)


def exact(responses, answers, *, prompts, finished) -> list[float]:
    """1.0 when the response, surrounding whitespace stripped, is the reference answer."""
    del prompts
    rows = _rows(responses, answers, finished)
    return [float(done and r.strip() == a.strip()) for r, a, done in rows]


def last_integer(responses, answers, *, prompts, finished) -> list[float]:
    """1.0 when the response's last integer equals the reference, an integer."""
    del prompts
    scores = []
    for response, answer, done in _rows(responses, answers, finished):
        value = read.last_integer(response)
        scores.append(float(done and value is not None and value == int(answer.strip())))
    return scores


def last_number(
    responses, answers, *, prompts, finished, tol: float = DEFAULT_TOLERANCE
) -> list[float]:
    """1.0 when the response's last number is within `tol` of the reference, a number:
    |x - ref| <= tol * max(1, |ref|)."""
    del prompts
    scores = []
    for response, answer, done in _rows(responses, answers, finished):
        reference = read.as_number(answer)
        if reference is None:
            raise ValueError(f"reference answer {answer!r} is not a number")
        value = read.last_number(response)
        ok = done and value is not None and read.within_tolerance(value, reference, tol)
        scores.append(float(ok))
    return scores


def boxed(responses, answers, *, prompts, finished) -> list[float]:
    """1.0 when the last `\\boxed{...}` holds the reference (as a number, or as text)."""
    del prompts
    scores = []
    for response, answer, done in _rows(responses, answers, finished):
        content = read.last_boxed(response)
        scores.append(float(done and content is not None and read.same_answer(content, answer)))
    return scores


def format_check(responses, answers, *, prompts, finished) -> list[float]:
    """1.0 when the response finished with a readable final answer: a `\\boxed{...}`, or a number
    on its last non-empty line. The answer's value does not matter."""
    del prompts
    scores = []
    for response, _, done in _rows(responses, answers, finished):
        lines = [line for line in response.splitlines() if line.strip()]
        readable = read.last_boxed(response) is not None or (
            bool(lines) and read.last_number(lines[-1]) is not None
        )
        scores.append(float(done and readable))
    return scores


BUILTIN_REWARDS: dict[str, RewardFn] = {
    "exact": exact,
    "last_integer": last_integer,
    "last_number": last_number,
    "boxed": boxed,
    "format": format_check,
}
