"""Writes word_problems.jsonl, the example data of configs/word_problems.py: short word problems
with small non-negative integer answers, one JSON object per line ("system", "prompt", "answer").
Deterministic: rerunning it rewrites the shipped file byte for byte.

    python configs/data/make_word_problems.py [--out configs/data/word_problems.jsonl]
"""

from __future__ import annotations

import argparse
import json
import random
from pathlib import Path

ROWS = 300
SEED = 0
SYSTEM = "You solve word problems. Answer with a single number."
NAMES = ("Mia", "Tom", "Ava", "Leo", "Zoe", "Sam", "Ivy", "Max", "Eli", "Nia")
THINGS = ("apples", "pencils", "marbles", "stickers", "books", "coins", "shells", "cards")
# (template, operation): a >= b keeps differences non-negative; products stay below 50
TEMPLATES = (
    ("{name} has {a} {thing} and gets {b} more. How many {thing} does {name} have now?", "+"),
    ("{name} had {a} {thing} and gave {b} away. How many {thing} are left?", "-"),
    ("There are {a} {thing} in a box and {b} on the table. How many {thing} are there?", "+"),
    ("{name} buys {b} bags with {a} {thing} in each. How many {thing} is that?", "*"),
    ("{name} needs {a} {thing} and has {b}. How many more {thing} does {name} need?", "-"),
)
OPERATIONS = {"+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b}
DEFAULT_OUT = Path(__file__).with_name("word_problems.jsonl")


def word_problems(rows: int = ROWS, seed: int = SEED) -> list[dict[str, str]]:
    """`rows` distinct problems drawn from `seed`."""
    rng = random.Random(seed)
    out: dict[str, dict[str, str]] = {}
    while len(out) < rows:
        template, operation = rng.choice(TEMPLATES)
        b = rng.randint(2, 9)
        a = rng.randint(2, 5) if operation == "*" else rng.randint(b, 20)
        prompt = template.format(name=rng.choice(NAMES), thing=rng.choice(THINGS), a=a, b=b)
        answer = str(OPERATIONS[operation](a, b))
        out.setdefault(prompt, {"system": SYSTEM, "prompt": prompt, "answer": answer})
    return list(out.values())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = parser.parse_args()
    lines = [json.dumps(row) + "\n" for row in word_problems()]
    args.out.write_text("".join(lines), encoding="utf-8")
    print(f"wrote {len(lines)} problems to {args.out}")


if __name__ == "__main__":
    main()
