"""zluda_py.backends.choose/select: ZLUDA_BACKEND to a backend module."""

from __future__ import annotations

import types

import pytest

from zluda_py import backends
from zluda_py.backends import cpu


def test_cpu_is_always_usable():
    assert backends.choose("cpu") is cpu


def test_unknown_name_is_rejected_with_the_choices():
    with pytest.raises(backends.BackendUnavailable, match="expected one of cpu, hip, auto") as e:
        backends.choose("cuda")
    assert e.value.cu_result == 100


def test_auto_prefers_a_usable_hip(monkeypatch):
    fake = types.SimpleNamespace(available=lambda: True, memory=object(), load=lambda texts: None,
                                 unload=lambda module: None, launch=lambda *a: None, devices=lambda: [])
    monkeypatch.setattr(backends, "_usable", lambda name: fake if name == "hip" else cpu)
    assert backends.choose("auto") is fake


@pytest.mark.parametrize("problem, message", [
    ({"available": lambda: False}, "found no device"),
    ({}, "does not provide the driver interface yet (missing available, devices, memory, load, unload, launch)"),
    ({"available": lambda: 1 / 0, "devices": 0, "memory": 0, "load": 0, "unload": 0, "launch": 0}, "failed to start: division by zero"),
])
def test_hip_that_cannot_run_says_why_and_auto_falls_back(monkeypatch, problem, message):
    import sys

    fake = types.ModuleType("zluda_py.backends.hip")
    fake.__dict__.update({"devices": 0, "memory": 0, "load": 0, "unload": 0, "launch": 0} if "available" in problem else {})
    fake.__dict__.update(problem)
    monkeypatch.setitem(sys.modules, "zluda_py.backends.hip", fake)
    with pytest.raises(backends.BackendUnavailable, match=message.replace("(", r"\(").replace(")", r"\)")):
        backends.choose("hip")
    assert backends.choose("auto") is cpu
