"""Checksum manifests of saved folders (checkpoints, the SFT cache): orbax does not notice
flipped bytes in array data, so a restore would silently load wrong weights.

`write_manifest(folder)` records every file's size and SHA-256 in folder/MANIFEST_NAME;
`manifest_problem(folder)` names the first file that is missing, resized or altered since.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

MANIFEST_NAME = "calclip_checksums.json"


def _files(folder: Path) -> list[Path]:
    return sorted(p for p in folder.rglob("*") if p.is_file() and p.name != MANIFEST_NAME)


def _digest(path: Path) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def write_manifest(folder: str | Path) -> None:
    """folder/MANIFEST_NAME: {relative path: [size, sha256]} of every file (written atomically)."""
    folder = Path(folder)
    entries = {str(p.relative_to(folder)): [p.stat().st_size, _digest(p)] for p in _files(folder)}
    tmp = folder / (MANIFEST_NAME + ".tmp")
    tmp.write_text(json.dumps(entries, indent=0, sort_keys=True), encoding="utf-8")
    os.replace(tmp, folder / MANIFEST_NAME)


def has_manifest(folder: str | Path) -> bool:
    return (Path(folder) / MANIFEST_NAME).is_file()


def manifest_problem(folder: str | Path) -> str | None:
    """What is wrong with `folder` against its manifest (None: intact, or no manifest to check
    against; see `has_manifest`); an empty folder is always a problem."""
    folder = Path(folder)
    if not folder.is_dir() or not _files(folder):
        return "empty folder"
    if not has_manifest(folder):
        return None
    try:
        entries = json.loads((folder / MANIFEST_NAME).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return f"unreadable {MANIFEST_NAME}"
    for name, (size, digest) in sorted(entries.items()):
        path = folder / name
        if not path.is_file():
            return f"missing file {name}"
        if path.stat().st_size != size:
            return f"{name} has {path.stat().st_size} bytes, expected {size}"
        if _digest(path) != digest:
            return f"checksum mismatch in {name}"
    return None
