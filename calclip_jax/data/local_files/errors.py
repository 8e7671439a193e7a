"""The one error a bad data file raises: a single line naming the file, the line and the field."""

from __future__ import annotations


class DataFileError(ValueError):
    """A data file that cannot be used: "<file>:<line>: field '<name>' <what is wrong>"."""

    @classmethod
    def at(cls, path: str, line: int | None, message: str) -> DataFileError:
        """The error at `line` (1-based; None: the file as a whole) of `path`."""
        where = path if line is None else f"{path}:{line}"
        return cls(f"{where}: {message}")
