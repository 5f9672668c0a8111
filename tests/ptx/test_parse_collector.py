"""A large parse hands its objects to the oldest generation of the cyclic collector (so the
young and middle collections do not walk them again), without freezing anything."""

from __future__ import annotations

import gc

import pytest

from zluda_py import ptx
from zluda_py.ptx import parser

TEXT = (".version 9.0\n.target sm_80\n.address_size 64\n.visible .entry k(.param .u64 p)\n{\n"
        "\t.reg .b64 %rd<2>;\n\tld.param.u64 %rd1, [p];\n\tst.global.u64 [%rd1], %rd1;\n\tret;\n}\n")


def in_oldest(obj: object) -> bool:
    return any(o is obj for o in gc.get_objects(generation=2))


@pytest.fixture
def collector_on():
    was = gc.isenabled()
    gc.enable()
    yield
    if not was:
        gc.disable()


def test_a_large_parse_lands_in_the_oldest_generation(collector_on, monkeypatch):
    monkeypatch.setattr(parser, "AGE_AFTER", 0)  # every parse counts as large
    m = ptx.parse(TEXT)
    assert in_oldest(m) and in_oldest(m.items[0])
    assert gc.get_freeze_count() == 0 and gc.isenabled()


def test_a_small_parse_is_left_to_the_collector(collector_on):
    m = ptx.parse(TEXT)
    assert not in_oldest(m)


def test_the_hosts_frozen_objects_stay_frozen(collector_on, monkeypatch):
    # The freeze count alone is not a witness: frozen objects freed meanwhile (by this
    # worker's other threads too) lower it. A container frozen by the host must stay out of
    # every collected generation, which only an unfreeze by the parser would undo.
    monkeypatch.setattr(parser, "AGE_AFTER", 0)
    host_object = [[]]
    gc.freeze()
    try:
        m = ptx.parse(TEXT)
        assert gc.get_freeze_count() > 0
        assert not any(o is host_object for o in gc.get_objects())
        assert not in_oldest(m)
    finally:
        gc.unfreeze()
