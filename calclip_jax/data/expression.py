"""A tiny safe parser/evaluator for `+ - * /` expressions over non-negative integers.

Grammar (no unary minus): expr := term (('+'|'-') term)*; term := atom (('*'|'/') atom)*;
atom := NUMBER | '(' expr ')'. Evaluation is exact (Fraction). Never calls `eval`.
"""

from __future__ import annotations

import dataclasses
from fractions import Fraction

MAX_LENGTH = 128  # bounds recursion depth and number sizes
_DIGITS = tuple("0123456789")


class ParseError(ValueError):
    """The text is not a well-formed expression."""


@dataclasses.dataclass(frozen=True)
class Parsed:
    """A parsed expression: its exact value (None on division by zero) and the literals used."""

    value: Fraction | None
    numbers: tuple[int, ...]


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0
        self.numbers: list[int] = []

    def peek(self) -> str:
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def expr(self) -> Fraction | None:
        value = self.term()
        while self.peek() in ("+", "-"):
            op = self.text[self.pos]
            self.pos += 1
            rhs = self.term()
            value = (
                None
                if value is None or rhs is None
                else (value + rhs if op == "+" else value - rhs)
            )
        return value

    def term(self) -> Fraction | None:
        value = self.atom()
        while self.peek() in ("*", "/"):
            op = self.text[self.pos]
            self.pos += 1
            rhs = self.atom()
            if value is None or rhs is None or (op == "/" and rhs == 0):
                value = None
            else:
                value = value * rhs if op == "*" else value / rhs
        return value

    def atom(self) -> Fraction | None:
        char = self.peek()
        if char == "(":
            self.pos += 1
            value = self.expr()
            if self.peek() != ")":
                raise ParseError(f"expected ')' at {self.pos}")
            self.pos += 1
            return value
        start = self.pos
        while self.peek() in _DIGITS:
            self.pos += 1
        if start == self.pos:
            raise ParseError(f"expected a number at {self.pos}")
        number = int(self.text[start : self.pos])
        self.numbers.append(number)
        return Fraction(number)


def parse_expression(text: str) -> Parsed:
    """Parses and evaluates `text`; raises ParseError if malformed or longer than MAX_LENGTH."""
    if len(text) > MAX_LENGTH:
        raise ParseError(f"expression longer than {MAX_LENGTH} characters")
    parser = _Parser(text)
    value = parser.expr()
    if parser.pos != len(text):
        raise ParseError(f"unexpected {text[parser.pos]!r} at {parser.pos}")
    return Parsed(value=value, numbers=tuple(parser.numbers))
