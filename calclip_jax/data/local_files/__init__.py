"""Prompts and reference answers from the user's own files (JSONL, parquet with pyarrow)."""

from calclip_jax.data.local_files.content_hash import content_sha256
from calclip_jax.data.local_files.errors import DataFileError
from calclip_jax.data.local_files.rows import FieldNames, PromptRow, read_prompt_rows

__all__ = ["DataFileError", "FieldNames", "PromptRow", "content_sha256", "read_prompt_rows"]
