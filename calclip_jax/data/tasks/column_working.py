"""`worked_addition`'s demonstration (`column_working`) and a response's working graded against it.

The verifier reads the response's last integer. The working before it (one statement per column,
"7 + 8 = 15, write 5 carry 1; 4 + 3 + 1 = 8; so 47 + 38 = 85") earns nothing by itself, so a
policy can keep the reward while its working drifts into decoration: columns dropped, wrong
digits summed, false sums. `check_working` grades one response against the demonstration
(each rollout batch: `WorkedAdditionTask.response_metrics`; a sweep's ratio dumps:
`reports.working_fidelity`):

- `result_right`: the last integer is the sum (what the verifier rewards in a finished response);
- `all_columns`: as many column statements as the demonstration (none dropped, none added);
- `columns_right`: the column statements sum the demonstration's terms (each column's digits and
  carry, every column, in order), whatever totals they write;
- `sums_true`: there is a column statement and every one's total is the sum of its terms;
- `exact`: the response is the demonstration, verbatim.

Two checks read drifts that `check_working` does not: `carry_left_out`, a column written with
its digits but not the carry into it (asked only of sums that carry), and `written_digit_wrong`,
a column that writes a digit other than its own total's last ("2 + 8 = 10, write 9"; asked only
of responses that write one).

A column statement is "t1 + t2 [+ t3 ...] = total" before the response's last "so " (the
demonstration's "so <expression> = <sum>" closes the working; a response without one is all
column statements).
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Sequence

from calclip_jax.data.rewards.answers import last_integer

STATEMENT = re.compile(r"(\d+(?:\s*\+\s*\d+)+)\s*=\s*(\d+)")
WRITTEN = re.compile(STATEMENT.pattern + r"\s*[,;]\s*write\s+(\d+)")  # a statement, its digit
EXPRESSION = re.compile(r"\d+(?:\s*\+\s*\d+)+")
INTEGER = re.compile(r"\d+")
CLOSING = "so "
CLOSING_WORD = re.compile(r"\bso\b")  # the closing clause has begun once the text holds it
ROLES = ("working digit", "result digit", "other")  # `token_roles`' labels


def columns(numbers: Sequence[int]) -> list[tuple[tuple[int, ...], int]]:
    """Per column of the sum of non-negative `numbers`, from the right: the operands' digits there
    (an operand with fewer digits has none) and the carry into it."""
    if len(numbers) < 2 or min(numbers) < 0:
        raise ValueError(f"column_working needs two or more non-negative numbers: {numbers}")
    digits = [str(n)[::-1] for n in numbers]
    out, carry = [], 0
    for i in range(max(len(d) for d in digits)):
        column = tuple(int(d[i]) for d in digits if i < len(d))
        out.append((column, carry))
        carry = (sum(column) + carry) // 10
    return out


def column_working(numbers: Sequence[int]) -> str:
    """The column-by-column sum of non-negative `numbers`, ending with "so <sum expression> = s".

    Per column from the right (`columns`): the operands' digits there, plus the carry in, "= s";
    every column but the last then says ", write <s mod 10>", and " carry <s div 10>" when
    s >= 10; the last column's s is written whole.
    """
    terms_of = [(*digits, carry) if carry else digits for digits, carry in columns(numbers)]
    parts = []
    for i, terms in enumerate(terms_of):
        total = sum(terms)
        part = f"{' + '.join(map(str, terms))} = {total}"
        if i < len(terms_of) - 1:
            part += f", write {total % 10}" + (f" carry {total // 10}" if total >= 10 else "")
        parts.append(part)
    expression = " + ".join(str(n) for n in numbers)
    return "; ".join(parts) + f"; so {expression} = {sum(numbers)}"


@dataclasses.dataclass(frozen=True)
class WorkingCheck:
    """One response graded against the demonstration (module docstring)."""

    result_right: bool
    all_columns: bool
    columns_right: bool
    sums_true: bool
    exact: bool


def statements(working: str) -> list[tuple[tuple[int, ...], int]]:
    """Each "t1 + t2 ... = total" in `working`, as ((t1, t2, ...), total)."""
    return [
        (tuple(int(t) for t in INTEGER.findall(terms)), int(total))
        for terms, total in STATEMENT.findall(working)
    ]


def working(response: str) -> str:
    """The response before its last "so " (all of it where it has none)."""
    cut = response.rfind(CLOSING)
    return response if cut < 0 else response[:cut]


def column_statements(response: str) -> list[tuple[tuple[int, ...], int]]:
    """The statements of the response's `working`."""
    return statements(working(response))


def operands(prompt: str) -> tuple[int, ...] | None:
    """The numbers of the first "a + b ..." in `prompt` (the task's question), None if none."""
    found = EXPRESSION.search(prompt)
    return None if found is None else tuple(int(t) for t in INTEGER.findall(found.group()))


def check_working(numbers: Sequence[int], response: str) -> WorkingCheck:
    """`response` to the sum of `numbers`, graded (`WorkingCheck`)."""
    reference = column_working(numbers)
    expected = [terms for terms, _ in column_statements(reference)]
    got = column_statements(response)
    return WorkingCheck(
        result_right=last_integer(response) == sum(numbers),
        all_columns=len(got) == len(expected),
        columns_right=[terms for terms, _ in got] == expected,
        sums_true=bool(got) and all(sum(terms) == total for terms, total in got),
        exact=response.strip() == reference,
    )


def carry_left_out(numbers: Sequence[int], response: str) -> bool | None:
    """Whether `response` writes a column the demonstration carries into as that column's digits
    alone, its carry left out ("8 + 9 = 17, write 7; 2 + 1 = 3; so 28 + 19 = 47"; the n-th column
    statement read as the n-th column); None where the demonstration carries into no column."""
    expected = columns(numbers)
    if not any(carry for _, carry in expected):
        return None
    got = [terms for terms, _ in column_statements(response)]
    return any(
        carry and i < len(got) and got[i] == digits for i, (digits, carry) in enumerate(expected)
    )


def written_digit_wrong(response: str) -> bool | None:
    """Whether a column statement of `response` writes a digit other than the last of its own total
    ("2 + 8 = 10, write 9"), whatever the sum posed; None where none writes one."""
    written = WRITTEN.findall(working(response))
    if not written:
        return None
    return any(int(digit) != int(total) % 10 for _, total, digit in written)


FIELDS = tuple(f.name for f in dataclasses.fields(WorkingCheck))


def pass_rates(checks: Sequence[WorkingCheck]) -> dict[str, float]:
    """Each check's share of `checks` passing it (NaN for every check when there are none)."""
    return {
        f: sum(getattr(c, f) for c in checks) / len(checks) if checks else math.nan for f in FIELDS
    }


def token_roles(pieces: Sequence[str]) -> list[str]:
    """Each response token's role, from the tokens' texts in order: a digit before the closing
    "so" is the working's, a digit after it the result's, anything else "other" (`ROLES`)."""
    roles, text = [], ""
    for piece in pieces:
        if not piece.strip().isdigit():
            roles.append(ROLES[2])
        else:
            roles.append(ROLES[1] if CLOSING_WORD.search(text) else ROLES[0])
        text += piece
    return roles
