"""`gpu_run`'s output: one JSON file and one Markdown table per section, both rewritten after
every measured row (so a run cut short keeps what it measured), each row also printed as a JSON
line the moment it is measured."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

JSON_FILE, MARKDOWN_FILE = "gpu_run.json", "gpu_run.md"
JSON_ONLY = ("custom_calls", "overrides")  # too wide for a table cell: in the JSON only


class GpuReport:
    """The run's header, and per section its status and rows (one per preset or arm: figures,
    an "error" or a "skipped" reason), kept in `out_dir` as JSON_FILE and MARKDOWN_FILE."""

    def __init__(self, out_dir: str | os.PathLike[str], header: dict[str, Any],
                 sections: Sequence[str]) -> None:  # fmt: skip
        self.out_dir = Path(out_dir)
        self.out_dir.mkdir(parents=True, exist_ok=True)
        self.data: dict[str, Any] = {
            "header": header,
            "sections": {name: {"status": "pending", "rows": []} for name in sections},
            "finished": None,
        }
        self._lock = threading.Lock()  # the deadline watchdog writes from its own thread
        self._print({"header": header})
        self._write()

    def add(self, section: str, row: dict[str, Any]) -> None:
        """Appends `row` to `section`, prints it and rewrites both files."""
        with self._lock:
            self.data["sections"][section]["rows"].append(row)
            self._print({"section": section, **row})
            self._write()

    def set_status(self, section: str, status: str) -> None:
        with self._lock:
            self.data["sections"][section]["status"] = status
            self._print({"section": section, "status": status})
            self._write()

    def rows(self, section: str) -> list[dict[str, Any]]:
        return self.data["sections"][section]["rows"]

    def finish(self, outcome: str, **summary: Any) -> None:
        """Records how the run ended ("completed", or why it stopped) and its summary."""
        with self._lock:
            self.data["finished"] = {"outcome": outcome, **summary}
            self._print({"finished": self.data["finished"]})
            self._write()

    @staticmethod
    def _print(record: dict[str, Any]) -> None:
        print(json.dumps(record, default=str), flush=True)

    def _write(self) -> None:
        _replace(self.out_dir / JSON_FILE, json.dumps(self.data, indent=1, default=str))
        _replace(self.out_dir / MARKDOWN_FILE, markdown(self.data))


def _replace(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(text)
    os.replace(tmp, path)


def _cell(value: Any) -> str:
    if isinstance(value, dict):
        return ", ".join(f"{k} {_cell(v)}" for k, v in value.items())
    if isinstance(value, list):
        return ", ".join(_cell(v) for v in value)
    return "" if value is None else str(value).replace("|", "/").replace("\n", " ")


def table(rows: list[dict[str, Any]]) -> list[str]:
    """A Markdown table of `rows`: a column per key (first-seen order), JSON_ONLY left out."""
    columns = [k for k in dict.fromkeys(k for r in rows for k in r) if k not in JSON_ONLY]
    lines = ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
    lines += ["| " + " | ".join(_cell(r.get(c)) for c in columns) + " |" for r in rows]
    return lines


def markdown(data: dict[str, Any]) -> str:
    """The header as a list, then per section its status and table."""
    header = data["header"]
    lines = ["# gpu_run", ""]
    lines += [f"- {key}: {_cell(value)}" for key, value in header.items() if key != "flags"]
    lines += [f"- finished: {_cell(data['finished'])}", ""]
    for name, section in data["sections"].items():
        lines += [f"## {name}", "", f"status: {section['status']}", ""]
        if section["rows"]:
            lines += [*table(section["rows"]), ""]
    return "\n".join(lines)
