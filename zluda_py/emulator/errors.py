"""Errors of the AMD GPU ISA emulator."""

from __future__ import annotations


class EmulatorError(Exception):
    """A launch the emulator cannot complete: an instruction or operand form it does not
    implement (named with its address), a memory fault, or a malformed code object."""
