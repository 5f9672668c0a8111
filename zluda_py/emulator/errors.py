"""Errors of the AMD GPU ISA emulator."""

from __future__ import annotations


class EmulatorError(Exception):
    """A launch the emulator cannot complete: an instruction or operand form it does not
    implement (named with its address), a memory fault, or a malformed code object."""


class MemoryFault(EmulatorError):
    """An access outside every allocation (a GPU's illegal address)."""


class StackOverflow(EmulatorError):
    """A kernel with a dynamic call stack (recursion) went past its lane's scratch: the stack
    size limit (hipLimitStackSize) was too small; CUDA fails such a launch with 719."""


class Trapped(EmulatorError):
    """The kernel executed s_trap (an assertion or `trap`)."""
