"""Comparing extracted PTX with `nvcc -ptx` output."""

from __future__ import annotations

import re


def normalize_ptx(text: str) -> str:
    """PTX with comments removed and whitespace runs squeezed: nvcc blanks comments and squeezes
    whitespace when it embeds PTX, so only this form is comparable with `nvcc -ptx`."""
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"//[^\n]*", " ", text)
    return " ".join(text.split())
