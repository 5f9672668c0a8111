"""Differential fuzzing of the CPU target against the reference executor (docs/fuzz.md)."""
