"""The structure, resource-limit and disassembly checks (checks.py) for the conformance
kernels: every form of the form sweep that has a reference model, on gfx90a, gfx942 and
gfx1100 (conformance_corpus.py says how the kernels are grouped into modules)."""

from __future__ import annotations

import pytest

from .checks import check_disassembly, check_resources, check_structure, disassemble
from .conformance_corpus import plan
from .corpus import TARGETS


def _names() -> list[str]:
    return [m.name for m in plan()]


def _built(corpus, name: str):
    m = corpus[name]
    if m.error is not None:
        raise m.error
    if not m.kernels:
        pytest.skip(f"no form of {name} has a reference model yet: {', '.join(m.unmodelled)}")
    return m


@pytest.mark.parametrize("gfx", TARGETS)
@pytest.mark.parametrize("name", _names())
def test_structure(conformance_corpus, name, gfx):
    m = _built(conformance_corpus, name)
    check_structure(m.ast, *m.objects[gfx], gfx)
    assert sorted(m.objects[gfx][1]["kernels"]) == sorted(k.name for k in m.kernels)


@pytest.mark.parametrize("gfx", TARGETS)
@pytest.mark.parametrize("name", _names())
def test_resources_within_limits(conformance_corpus, name, gfx):
    check_resources(_built(conformance_corpus, name).objects[gfx][0], gfx)


@pytest.mark.parametrize("gfx", TARGETS)
@pytest.mark.parametrize("name", _names())
def test_disassembly(conformance_corpus, objdump, tmp_path, name, gfx):
    m = _built(conformance_corpus, name)
    check_disassembly(m.ast, disassemble(objdump, tmp_path / f"{gfx}.hsaco", m.objects[gfx][0], gfx), gfx)


def test_every_modelled_form_is_in_the_corpus(conformance_corpus):
    """The corpus is the sweep: each supported form is compiled, or waits for its model."""
    from conformance.forms import canonical, supported_forms

    compiled = [f for m in conformance_corpus.values() for k in m.kernels for f in k.forms]
    unmodelled = [f for m in conformance_corpus.values() for f in m.unmodelled]
    assert len(compiled) == len(set(compiled))
    assert {canonical(f) for f in compiled + unmodelled} == set(supported_forms())
