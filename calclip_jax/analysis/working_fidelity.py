"""Is a `worked_addition` response's working right, or only its result?

The verifier reads the response's last integer. The working before it (one statement per column,
"7 + 8 = 15, write 5 carry 1; 4 + 3 + 1 = 8; so 47 + 38 = 85") earns nothing by itself, so a
policy can keep the reward while its working drifts into decoration: columns dropped, wrong
digits summed, false sums. `check_working` grades one response against the demonstration
(`column_working`; a run's sampled batches: `reports.working_fidelity`):

- `result_right`: the last integer is the sum (what the verifier rewards in a finished response);
- `all_columns`: as many column statements as the demonstration (none dropped, none added);
- `columns_right`: the column statements sum the demonstration's terms (each column's digits and
  carry, every column, in order), whatever totals they write;
- `sums_true`: there is a column statement and every one's total is the sum of its terms;
- `exact`: the response is the demonstration, verbatim.

A column statement is "t1 + t2 [+ t3 ...] = total" before the response's last "so " (the
demonstration's "so <expression> = <sum>" closes the working; a response without one is all
column statements).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Sequence

from calclip_jax.data.rewards.answers import last_integer
from calclip_jax.data.tasks.worked_addition import column_working

STATEMENT = re.compile(r"(\d+(?:\s*\+\s*\d+)+)\s*=\s*(\d+)")
EXPRESSION = re.compile(r"\d+(?:\s*\+\s*\d+)+")
INTEGER = re.compile(r"\d+")
CLOSING = "so "


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


def column_statements(response: str) -> list[tuple[tuple[int, ...], int]]:
    """The statements before the response's last "so " (all of them where it has none)."""
    cut = response.rfind(CLOSING)
    return statements(response if cut < 0 else response[:cut])


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


FIELDS = tuple(f.name for f in dataclasses.fields(WorkingCheck))
